"""The quota managers of a broker (Kafka's QuotaFactory.QuotaManagers): one ClientQuotaManager per
quota type (produce, fetch, request: request_percentage, charged by the dispatcher with each request's time)
the ControllerMutationQuotaManager (CreateTopics, CreatePartitions, DeleteTopics) and the
ConnectionQuotas (connection_creation_rate of an ip, which the Reactor asks), over one table of client quotas (the entities and values AlterClientQuotas set).

    Produce ──bytes──► produce.record(principal, client id) ──► throttle ms ─┐
    Fetch ──bytes──► fetch.record(...) (an empty answer when throttled)  ─────┤
                                                                              ▼
                      throttle_time_ms in the answer, and `mutes[connection]`: the connection
                      reads no request for that long once the answer is out (KIP-219)

No cost without quotas: each manager's `on` is False until some entity sets its key, and the
handlers test only that. The maths (the windowed rate, the precedence) is kcompat.quotas.
A single node keeps the table in kcompat.storage.quota_store (saved before the answer); in
cluster mode it is the metadata image's ClientQuotaRecords (`replace` is given each new one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from kcompat.quotas.entities import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Entity,
    QuotaTable,
    resolve,
)
from kcompat.quotas.rate import QuotaWindow, Rate, TokenBucket
from kcompat.server.quotas.connection_quotas import ConnectionQuotas
from kcompat.storage.quota_store import QuotaStore

log = logging.getLogger("kcompat.server.quotas")
ANONYMOUS = "ANONYMOUS"

__all__ = [
    "ClientQuotaManager",
    "ControllerMutationQuotaManager",
    "MutationQuota",
    "QuotaManagers",
    "user_of",
]


def user_of(principal: str) -> str:
    """The quota user of a principal ("User:alice" -> "alice"), as KafkaPrincipal.getName."""
    return principal.partition(":")[2] or principal


class ClientQuotaManager:
    """One quota type (`key`): the sensors its clients share and the throttle time of a record."""

    __slots__ = ("_bounds", "_sensors", "_table", "key", "on", "window")

    def __init__(self, key: str, window: QuotaWindow) -> None:
        self.key = key
        self.window = window
        self.on = False
        self._table: QuotaTable = {}
        # (user, client id) -> (sensor entity, bound) or None; rebuilt when the table changes
        self._bounds: dict[tuple[str, str], tuple[Entity, float] | None] = {}
        self._sensors: dict[Entity, Rate] = {}

    def update(self, table: QuotaTable) -> None:
        self._table = table
        self._bounds = {}
        self.on = any(self.key in values for values in table.values())

    def quota(self, user: str, client_id: str) -> tuple[Entity, float] | None:
        """The sensor and bound that apply to (user, client id), None when unlimited."""
        who = (user, client_id)
        try:
            return self._bounds[who]
        except KeyError:
            got = self._bounds[who] = resolve(self._table, self.key, user, client_id)
            return got

    def _sensor(self, entity: Entity) -> Rate:
        rate = self._sensors.get(entity)
        if rate is None:
            rate = self._sensors[entity] = Rate(self.window)
        return rate

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` for the client: the throttle time in ms (0 within its quota or unlimited)."""
        q = self.quota(user, client_id)
        if q is None:
            return 0
        return self._sensor(q[0]).record(value, q[1], now_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back what `record` counted (a throttled Fetch answers empty)."""
        q = self.quota(user, client_id)
        if q is not None:
            self._sensor(q[0]).add(-value, now_ms)

    def max_in_window(self, user: str, client_id: str) -> float | None:
        """The most one record may carry without a certain throttle (None: unlimited)."""
        q = self.quota(user, client_id)
        return None if q is None else self.window.max_in_window(q[1])


class ControllerMutationQuotaManager(ClientQuotaManager):
    """controller_mutation_rate: partitions created or deleted per second (KIP-599), measured with
    a token bucket. Kafka's ControllerMutationQuota per request: strict (CreateTopics v6+,
    CreatePartitions v3+, DeleteTopics v5+) refuses a topic with THROTTLING_QUOTA_EXCEEDED once the
    bucket is empty, permissive (older versions) applies it and throttles. On a single node only:
    in cluster mode these APIs go to Kafka's controller, which applies its own."""

    __slots__ = ("_buckets",)

    def __init__(self, window: QuotaWindow) -> None:
        super().__init__(CONTROLLER_MUTATION_RATE, window)
        self._buckets: dict[Entity, TokenBucket] = {}

    def bucket(self, user: str, client_id: str) -> tuple[TokenBucket, float] | None:
        q = self.quota(user, client_id)
        if q is None:
            return None
        b = self._buckets.get(q[0])
        if b is None:
            b = self._buckets[q[0]] = TokenBucket(self.window)
        return b, q[1]


class MutationQuota:
    """One request's controller mutation quota (ControllerMutationQuota)."""

    __slots__ = ("_bound", "_bucket", "_now_ms", "_strict", "throttle_ms")

    def __init__(self, bucket: TokenBucket, bound: float, strict: bool, now_ms: Callable[[], int]) -> None:
        self._bucket, self._bound, self._strict, self._now_ms = bucket, bound, strict, now_ms
        self.throttle_ms = 0

    def record(self, partitions: int) -> bool:
        """Take `partitions`; False: strict and over the quota, the topic is refused."""
        now = self._now_ms()
        if self._strict:
            ms = self._bucket.throttle_ms(self._bound, now)
            if ms:
                self.throttle_ms = ms
                return False
            self._bucket.take(partitions, self._bound, now)
            return True
        self._bucket.take(partitions, self._bound, now)
        self.throttle_ms = self._bucket.throttle_ms(self._bound, now)
        return True


class QuotaManagers:
    """The broker's quota managers, their table, and the mutes the connections honour."""

    def __init__(
        self, samples: int, window_s: int, store: QuotaStore | None, clock: Callable[[], float]
    ) -> None:
        window = QuotaWindow(samples, window_s * 1000)
        self.window = window
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, window)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, window)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, window)
        self.controller_mutation = ControllerMutationQuotaManager(window)
        self.connection = ConnectionQuotas(window)
        self._clock = clock
        self._store = store
        # connection id -> seconds the connection reads nothing after its answer (KIP-219)
        self.mutes: dict[str, float] = {}
        self.table: QuotaTable = MappingProxyType({})
        if store is not None:
            self.replace(store.load())

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def replace(self, table: Mapping[Entity, Mapping[str, float]]) -> None:
        """A new table (an AlterClientQuotas here, or a new metadata image)."""
        self.table = MappingProxyType({e: MappingProxyType(dict(v)) for e, v in table.items() if v})
        for manager in (self.produce, self.fetch, self.request, self.controller_mutation, self.connection):
            manager.update(self.table)

    def alter(self, changes: Mapping[Entity, Mapping[str, float | None]]) -> None:
        """Apply validated changes (None removes a key), saved before they are in force."""
        table = {e: dict(v) for e, v in self.table.items()}
        for entity, ops in changes.items():
            values = table.setdefault(entity, {})
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
        table = {e: v for e, v in table.items() if v}
        if self._store is not None:
            self._store.save(table)
        self.replace(table)

    def admit_connection(self, host: str) -> int:
        """connection_creation_rate: 0 to serve a new connection from `host`, else ms to hold it."""
        return self.connection.admit(host, self.now_ms()) if self.connection.on else 0

    def record_connection(self, bound: float) -> int:
        """max.connection.creation.rate: ms the acceptor waits before serving a new connection."""
        return self.connection.broker_rate(bound, self.now_ms())

    def throttle(self, connection_id: str, throttle_ms: int) -> None:
        """Mute the connection for `throttle_ms` once its answer is out (longest wins)."""
        if throttle_ms > 0:
            s = throttle_ms / 1000
            if s > self.mutes.get(connection_id, 0.0):
                self.mutes[connection_id] = s

    def record(self, manager: ClientQuotaManager, client: Any, client_id: str | None, value: float) -> int:
        """Record `value` for a request's client on `manager`: the throttle time in ms, the
        connection muted for it once the answer is out."""
        user = user_of(client.principal) if client is not None else ANONYMOUS
        ms = manager.record(user, client_id or "", value, self.now_ms())
        if ms and client is not None:
            self.throttle(client.connection_id, ms)
        return ms

    def record_request_time(self, client: Any, client_id: str | None, seconds: float) -> int:
        """request_percentage: `seconds` of the event loop a request's handler took, as Kafka's
        request handler thread time in percent of one thread (100 = one thread busy). The throttle
        in ms, at most one window (ClientRequestQuotaManager's bound), the connection muted for it."""
        user = user_of(client.principal) if client is not None else ANONYMOUS
        ms = min(
            self.request.record(user, client_id or "", seconds * 100, self.now_ms()), self.window.window_ms
        )
        if ms and client is not None:
            self.throttle(client.connection_id, ms)
        return ms

    def unrecord(self, manager: ClientQuotaManager, client: Any, client_id: str | None, value: float) -> None:
        user = user_of(client.principal) if client is not None else ANONYMOUS
        manager.unrecord(user, client_id or "", value, self.now_ms())

    def max_fetch_bytes(self, client: Any, client_id: str | None) -> float | None:
        user = user_of(client.principal) if client is not None else ANONYMOUS
        return self.fetch.max_in_window(user, client_id or "")

    def mutation_quota(self, client: Any, client_id: str | None, strict: bool) -> MutationQuota | None:
        """The request's controller mutation quota, None when the client has none."""
        user = user_of(client.principal) if client is not None else ANONYMOUS
        got = self.controller_mutation.bucket(user, client_id or "")
        return None if got is None else MutationQuota(got[0], got[1], strict, self.now_ms)

    def mutated(self, client: Any, quota: MutationQuota | None) -> int:
        """The request is answered: its throttle time, the connection muted for it."""
        if quota is None or not quota.throttle_ms:
            return 0
        if client is not None:
            self.throttle(client.connection_id, quota.throttle_ms)
        return quota.throttle_ms
