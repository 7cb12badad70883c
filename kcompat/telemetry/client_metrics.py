"""Kafka's ClientMetricsManager (KIP-714) as kcompat's receiver: subscriptions, client instances,
the checks on GetTelemetrySubscriptions and PushTelemetry, and the last values clients pushed.

    client-metrics configs (ConfigResource 16) ──update_subscriptions──► [Subscription]
    GetTelemetrySubscriptions ──get()──► the client's instance: its id, subscription id, metrics
                                          and push interval, from every subscription it matches
    PushTelemetry ──push()──► error or accepted ──record()──► last value per series per client

A client matches a subscription when each of its `match` patterns fully matches the attribute of
that name (client_id, client_software_name, ... as ApiVersions and the socket tell them); a
subscription without patterns matches everyone. Matched subscriptions merge: their metric
prefixes united ("*" alone when one asks for all), the shortest interval. No subscription gives
the empty one: no metrics, the default interval (the client asks again then, and pushes nothing).
A change of the subscriptions makes every instance re-evaluate at its next request.

What is kept is bounded: at most MAX_INSTANCES instances (the least recently used go first) and
MAX_SERIES series per client; an instance and what it pushed expire max(60 s, 3 x its interval)
after its last request, as Kafka expires its cache. Time is passed in (no clock here).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

from kcompat.config.client_metrics_config import CLIENT_METRICS_CONFIGS
from kcompat.kafka_uuid import ZERO_UUID
from kcompat.telemetry.otlp import MetricsData
from kcompat.wire.checksum import crc32c
from kcompat.wire.compression import Compression
from kcompat.wire.error_codes import ErrorCode

# What GetTelemetrySubscriptions offers, in Kafka's order of preference.
ACCEPTED_COMPRESSION = (Compression.ZSTD, Compression.LZ4, Compression.GZIP, Compression.SNAPPY)
DEFAULT_INTERVAL_MS = 300_000
CACHE_EXPIRY_MS = 60_000
MAX_INSTANCES = 16_384  # Kafka's cache size (16k active client connections per broker)
MAX_SERIES = 2_000  # series kept per client instance
ALL_METRICS = "*"
NEVER = -(1 << 62)  # the time of a request not made yet: a new instance's first request is on time
_RESERVED = frozenset({ZERO_UUID, UUID(int=1)})
# After these a client asks for its subscription again at once, and is not throttled for it.
_ASK_AGAIN_AT_ONCE = (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def of(cls, name: str, configs: Mapping[str, str]) -> Subscription:
        parsed = {
            k: CLIENT_METRICS_CONFIGS[k].parse(v) for k, v in configs.items() if k in CLIENT_METRICS_CONFIGS
        }
        match = []
        for entry in parsed.get("match") or ():
            param, _, pattern = entry.partition("=")
            match.append((param.strip(), re.compile(pattern.strip())))
        metrics = frozenset(m.strip() for m in parsed.get("metrics") or () if m.strip())
        return cls(name, metrics, int(parsed.get("interval.ms", DEFAULT_INTERVAL_MS)), tuple(match))

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        for param, pattern in self.match:
            value = attributes.get(param)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


@dataclass(slots=True)
class Series:
    kind: str  # gauge or sum
    value: float
    time_ms: int  # when the client measured it (0 when it did not say)


@dataclass(slots=True)
class ClientInstance:
    """One client instance as the broker knows it (Kafka's ClientMetricsInstance)."""

    instance_id: UUID
    attributes: dict[str, str | None]  # the match params' values
    subscription_id: int
    version: int  # the subscriptions' version it was evaluated at
    metrics: list[str]
    interval_ms: int
    connection_id: str
    last_get_ms: int = NEVER
    last_push_ms: int = NEVER
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE  # of its last push (a Get may follow some at once)
    connected: bool = True  # False once its connection closed: its next request starts it afresh
    pushes: int = 0
    series: dict[tuple[str, tuple[tuple[str, str], ...]], Series] = field(default_factory=dict)
    resource: tuple[tuple[str, str], ...] = ()

    @property
    def expiry_ms(self) -> int:
        return max(CACHE_EXPIRY_MS, 3 * self.interval_ms)


@dataclass(frozen=True, slots=True)
class Peer:
    """Who sent the request: header client id, connection, and what ApiVersions said."""

    client_id: str
    connection_id: str
    host: str
    port: int


class Rejected(Exception):
    """A request answered with Kafka's error code (the message is for the debug log)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def subscription_id(metrics: list[str], interval_ms: int, instance_id: UUID) -> int:
    """A CRC32C over the merged subscription and interval, XORed with the instance id's hash (as
    Kafka derives it), as a signed int32: a push naming another id is UNKNOWN_SUBSCRIPTION_ID."""
    digest = crc32c((",".join(sorted(metrics)) + str(interval_ms)).encode())
    hi, lo = instance_id.int >> 64, instance_id.int & (2**64 - 1)
    h = hi ^ lo
    value = (digest ^ (h >> 32) ^ h) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class ClientMetricsManager:
    def __init__(self, max_bytes: Callable[[], int], new_id: Callable[[], UUID]) -> None:
        self.max_bytes = max_bytes  # telemetry.max.bytes
        self._new_id = new_id
        self.subscriptions: list[Subscription] = []
        self._configs: dict[str, dict[str, str]] = {}
        self.version = 0
        self.instances: OrderedDict[UUID, ClientInstance] = OrderedDict()
        self._software: dict[str, tuple[str, str]] = {}  # connection id -> ApiVersions' name, version
        self._by_connection: dict[str, UUID] = {}
        # Kafka's client-metrics sensors: requests throttled, pushes naming an unknown subscription.
        self.throttled = 0
        self.unknown_subscription = 0
        self.invalid_payloads = 0

    # --- what the broker tells it ----------------------------------------------------------------

    def client_information(self, connection_id: str, name: str, version: str) -> None:
        """ApiVersions v3+ named the client software on this connection."""
        self._software[connection_id] = (name, version)

    def connection_closed(self, connection_id: str) -> None:
        """Kafka drops the instance of a closed connection; here what it pushed stays on show until
        it expires, and its next request (from a new connection) starts it afresh, as Kafka's would."""
        self._software.pop(connection_id, None)
        instance_id = self._by_connection.pop(connection_id, None)
        inst = self.instances.get(instance_id) if instance_id is not None else None
        if inst is not None and inst.connection_id == connection_id:
            inst.connected = False

    def update_subscriptions(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """The client-metrics resources as they stand; a change re-evaluates every instance."""
        current = {name: dict(c) for name, c in configs.items() if c}
        if current == self._configs:
            return
        self._configs = current
        self.subscriptions = []
        for name, c in sorted(current.items()):
            try:
                self.subscriptions.append(Subscription.of(name, c))
            except (ValueError, re.error):
                # Validated when set, but in cluster mode by Kafka's controller: a Java regex Python
                # cannot compile matches no client rather than failing every client's request.
                continue
        self.version += 1

    # --- the two requests ------------------------------------------------------------------------

    def get(self, requested: UUID, peer: Peer, now_ms: int) -> ClientInstance:
        """GetTelemetrySubscriptions: the instance (a new id when the client has none); Rejected
        THROTTLING_QUOTA_EXCEEDED when it asks again before its push interval has passed, unless
        its last push was refused for a subscription id or compression type it must ask about."""
        self.expire(now_ms)
        instance_id = requested if requested != ZERO_UUID else self._fresh_id()
        inst = self._instance(instance_id, peer, now_ms)
        if now_ms - max(inst.last_get_ms, inst.last_push_ms) >= inst.interval_ms:
            inst.last_get_ms = now_ms
        elif inst.last_error not in _ASK_AGAIN_AT_ONCE:
            self.throttled += 1
            raise Rejected(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{instance_id}] arrived before the next push interval time",
            )
        inst.last_error = ErrorCode.NONE
        return inst

    def push(
        self,
        instance_id: UUID,
        sub_id: int,
        terminating: bool,
        compression: int,
        size: int,
        peer: Peer,
        now_ms: int,
    ) -> ClientInstance:
        """PushTelemetry's checks, in Kafka's order; the instance when the push is accepted."""
        if instance_id in _RESERVED:
            raise Rejected(
                ErrorCode.INVALID_REQUEST,
                f"Invalid request from the client [{instance_id}], invalid client instance id",
            )
        self.expire(now_ms)
        inst = self._instance(instance_id, peer, now_ms)
        try:
            if inst.terminating:
                raise Rejected(
                    ErrorCode.INVALID_REQUEST,
                    f"Client [{instance_id}] sent the previous request with state terminating to TRUE, "
                    "can not accept any requests after that",
                )
            # The first push after a Get may come early: clients start at 0.5-1.5 x the interval.
            on_time = inst.last_get_ms > inst.last_push_ms or now_ms - inst.last_push_ms >= inst.interval_ms
            if on_time:
                inst.last_push_ms = now_ms
            elif not terminating:
                self.throttled += 1
                raise Rejected(
                    ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                    f"Request from the client [{instance_id}] arrived before the next push interval time",
                )
            if sub_id != inst.subscription_id:
                self.unknown_subscription += 1
                raise Rejected(
                    ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                    f"Unknown client subscription id for the client [{instance_id}]",
                )
            if compression not in (0, *ACCEPTED_COMPRESSION):
                raise Rejected(
                    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                    f"Unknown compression type [{compression}] is received in telemetry request from [{instance_id}]",
                )
            limit = self.max_bytes()
            if size > limit:
                raise Rejected(
                    ErrorCode.TELEMETRY_TOO_LARGE,
                    f"Telemetry request from [{instance_id}] is larger than the maximum allowed size [{limit}]",
                )
        except Rejected as e:
            inst.last_error = e.code
            raise
        finally:
            inst.terminating = terminating
        inst.last_error = ErrorCode.NONE
        return inst

    def invalid_payload(self, inst: ClientInstance) -> None:
        """An accepted push whose metrics could not be read: INVALID_RECORD, as Kafka answers when
        its receiver plugin fails."""
        self.invalid_payloads += 1
        inst.last_error = ErrorCode.INVALID_RECORD

    def record(self, inst: ClientInstance, data: MetricsData, now_ms: int) -> None:
        """Keep the last value of each series the push carried (new series beyond MAX_SERIES are dropped)."""
        inst.pushes += 1
        if data.resource:
            inst.resource = data.resource
        for p in data.points:
            key = (p.name, p.attributes)
            s = inst.series.get(key)
            if s is not None:
                s.kind, s.value, s.time_ms = p.kind, p.value, p.time_unix_nano // 1_000_000
            elif len(inst.series) < MAX_SERIES:
                inst.series[key] = Series(p.kind, p.value, p.time_unix_nano // 1_000_000)

    # --- instances -------------------------------------------------------------------------------

    def _fresh_id(self) -> UUID:
        while True:
            u = self._new_id()
            if u not in self.instances:
                return u

    def _instance(self, instance_id: UUID, peer: Peer, now_ms: int) -> ClientInstance:
        inst = self.instances.get(instance_id)
        if inst is None or inst.version < self.version or not inst.connected:
            fresh = inst is None or not inst.connected  # new, or back on a new connection
            attributes = self._attributes(instance_id, peer) if fresh or inst is None else inst.attributes
            inst = self._evaluate(instance_id, attributes, peer.connection_id, inst)
            self.instances[instance_id] = inst
            self._by_connection[peer.connection_id] = instance_id
            while len(self.instances) > MAX_INSTANCES:
                _, evicted = self.instances.popitem(last=False)
                self._by_connection.pop(evicted.connection_id, None)
        self.instances.move_to_end(instance_id)
        inst.last_seen_ms = now_ms
        return inst

    def _attributes(self, instance_id: UUID, peer: Peer) -> dict[str, str | None]:
        name, version = self._software.get(peer.connection_id, (None, None))
        return {
            "client_instance_id": str(instance_id),
            "client_id": peer.client_id,
            "client_software_name": name,
            "client_software_version": version,
            "client_source_address": peer.host,
            "client_source_port": str(peer.port),
        }

    def _evaluate(
        self,
        instance_id: UUID,
        attributes: dict[str, str | None],
        connection_id: str,
        old: ClientInstance | None,
    ) -> ClientInstance:
        interval, metrics, everything = DEFAULT_INTERVAL_MS, set[str](), False
        for sub in self.subscriptions:
            if sub.matches(attributes):
                everything = everything or ALL_METRICS in sub.metrics
                metrics |= sub.metrics
                interval = min(interval, sub.interval_ms)
        wanted = [ALL_METRICS] if everything else sorted(metrics)
        inst = ClientInstance(
            instance_id,
            attributes,
            subscription_id(wanted, interval, instance_id),
            self.version,
            wanted,
            interval,
            connection_id,
        )
        if old is not None:  # what it pushed stays on show; the timers start again, as Kafka's do
            inst.series, inst.resource, inst.pushes = old.series, old.resource, old.pushes
        return inst

    def expire(self, now_ms: int) -> None:
        """Forget the instances that have made no request for their expiry time."""
        while self.instances:
            oldest = next(iter(self.instances.values()))
            if now_ms - oldest.last_seen_ms < oldest.expiry_ms:
                break
            self.instances.popitem(last=False)
            if self._by_connection.get(oldest.connection_id) == oldest.instance_id:
                del self._by_connection[oldest.connection_id]

    def live(self, now_ms: int) -> list[ClientInstance]:
        """The instances not yet expired (what /metrics and the console show), oldest request first."""
        return [i for i in self.instances.values() if now_ms - i.last_seen_ms < i.expiry_ms]
