"""Incremental fetch sessions (KIP-227): the session cache and the per-request fetch context, as
Kafka's FetchSession, FetchSessionCache(Shard) and FetchManager do it.

No I/O and no clock: whatever needs the time takes `now` (ms), and session ids come from an
injectable random.Random. The Fetch handler (handlers/fetch.py) builds a context per request,
reads the context's partitions, then lets the context pick what goes into the response.

Request metadata (session_id, session_epoch) and what it means:

    | session_id | epoch | context                                                            |
    |------------|-------|--------------------------------------------------------------------|
    | any        | -1    | sessionless full fetch; a non-zero id's session is closed first    |
    | any        | 0     | full fetch that creates a session (a non-zero id's is closed first)|
    | id         | > 0   | incremental: FETCH_SESSION_ID_NOT_FOUND (70) for an unknown id,    |
    |            |       | INVALID_FETCH_SESSION_EPOCH (71) for another epoch than expected,  |
    |            |       | FETCH_SESSION_TOPIC_ID_ERROR (106) when the request's use of topic |
    |            |       | ids (v13+) differs from the session's                              |

A full fetch answers every requested partition; the new session's id (0 when the cache has no
slot for it) tells the client whether it may go incremental. An incremental request names only
the partitions whose fetch parameters changed (and `forgotten_topics_data` drops some); the
broker reads every partition of the session and answers only those with records, a new high
watermark or log start offset, or an error. A session left with no partition is closed.

The cache has `max.incremental.fetch.session.cache.slots` slots split over 8 shards (sessions go
to the shards round-robin; eviction looks only within the shard). With no free slot a new session
may evict: first the least recently used session if unused for longer than
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (120 s, a constant in Kafka too); otherwise the
"smallest" evictable one by (privileged, partition count, id) if the newcomer is bigger. A
session is evictable by everyone once it is older than the eviction time (as of its last use),
and unprivileged (consumer) sessions are evictable by privileged (replica) requests at any age.
Sessions do not time out on their own: an unused one just becomes the first to go.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.types.fetch import PartitionData

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NUM_SHARDS = 8
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
INT32_MAX = 2**31 - 1

# A partition as the request names it: (topic name, partition) before v13, (topic id, partition) from v13.
PartitionKey = tuple[Any, int]
# A partition's answer as the handler builds it: the response's PartitionData.
PartitionResult = PartitionData


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: the final epoch stays final, and the counter wraps to 1, not 0."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


def must_respond(cached: CachedPartition, result: PartitionResult, update: bool) -> bool:
    """Whether an incremental response carries this partition (and, with `update`, remember what
    the client now knows). Errors reset the known high watermark so the recovery is sent too."""
    respond = len(result.records or b"") > 0
    hwm = result.high_watermark
    if cached.high_watermark != hwm:
        respond = True
        if update:
            cached.high_watermark = hwm
    start = result.log_start_offset
    if cached.log_start_offset != start:
        respond = True
        if update:
            cached.log_start_offset = start
    if result.preferred_read_replica != -1:
        respond = True
    if result.error_code != 0:
        if update:
            cached.high_watermark = -1
        respond = True
    diverging = result.diverging_epoch  # present when it differs from the absent (-1, -1)
    if diverging.epoch >= 0 or diverging.end_offset >= 0:
        respond = True
    return respond


@dataclass(slots=True)
class CachedPartition:
    """A partition of a session: the client's last fetch parameters (the request's FetchPartition)
    and the high watermark and log start offset the client was last told."""

    params: Any
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    privileged: bool
    partitions: dict[PartitionKey, CachedPartition]  # in fetch order: partitions that returned data go last
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1  # the partition count as of the last touch (the eviction key uses it)

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(
        self, fetch_data: dict[PartitionKey, Any], to_forget: Iterable[PartitionKey]
    ) -> tuple[list[PartitionKey], list[PartitionKey], list[PartitionKey]]:
        """Apply an incremental request: new parameters for the named partitions (added when new),
        then drop the forgotten ones. Returns (added, updated, removed)."""
        added, updated = [], []
        for key, params in fetch_data.items():
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(params)
                added.append(key)
            else:
                cached.params = params
                updated.append(key)
        removed = [key for key in to_forget if self.partitions.pop(key, None) is not None]
        return added, updated, removed


class FetchSessionCacheShard:
    """Up to `max_entries` sessions with ids in [max(1, shard_num * id_range), (shard_num + 1) * id_range)."""

    def __init__(
        self,
        max_entries: int,
        eviction_ms: int,
        id_range: int = INT32_MAX,
        shard_num: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.id_range = id_range
        self.shard_num = shard_num
        self.rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        # Kafka keeps these as sorted maps; a shard holds ~125 sessions, so a min() when a slot is
        # needed is cheaper than keeping them sorted on every touch.
        self._evictable_by_all: dict[int, FetchSession] = {}
        self._evictable_by_privileged: dict[int, FetchSession] = {}
        self.total_partitions = 0
        self.evictions = 0

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def __len__(self) -> int:
        return len(self.sessions)

    def new_session_id(self) -> int:
        low, high = max(1, self.shard_num * self.id_range), (self.shard_num + 1) * self.id_range
        while True:
            sid = self.rng.randrange(low, high)
            if sid != INVALID_SESSION_ID and sid not in self.sessions:
                return sid

    def maybe_create_session(
        self,
        now: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        create_partitions: Callable[[], dict[PartitionKey, CachedPartition]],
    ) -> int:
        """A new session's id (its epoch is 1), or INVALID_SESSION_ID when there is no slot for it."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(
            privileged, (privileged, size, 0), now
        ):
            return INVALID_SESSION_ID
        session = FetchSession(
            self.new_session_id(),
            privileged,
            create_partitions(),
            uses_topic_ids,
            now,
            now,
            next_epoch(INITIAL_EPOCH),
        )
        self.sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stalest.last_used_ms > self.eviction_ms:
            self.remove(stalest)
            self.evictions += 1
            return True
        candidates = self._evictable_by_privileged if privileged else self._evictable_by_all
        if not candidates:
            return False
        smallest = min(candidates.values(), key=FetchSession.evictable_key)
        if key < smallest.evictable_key():
            return False
        self.remove(smallest)
        self.evictions += 1
        return True

    def remove(self, session: FetchSession | int) -> FetchSession | None:
        sid = session if isinstance(session, int) else session.id
        found = self.sessions.pop(sid, None)
        if found is not None:
            self._evictable_by_all.pop(sid, None)
            self._evictable_by_privileged.pop(sid, None)
            self.total_partitions -= found.cached_size
        return found

    def touch(self, session: FetchSession, now: int) -> None:
        """The session was used at `now`: refresh its recency, size and evictability."""
        session.last_used_ms = now
        if session.cached_size != -1:
            self.total_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        self.total_partitions += session.cached_size
        old = now - session.creation_ms > self.eviction_ms
        if not session.privileged or old:
            self._evictable_by_privileged[session.id] = session
        else:
            self._evictable_by_privileged.pop(session.id, None)
        if old:
            self._evictable_by_all[session.id] = session
        else:
            self._evictable_by_all.pop(session.id, None)


class FetchSessionCache:
    """`max_slots` sessions over NUM_SHARDS shards (each max_slots // NUM_SHARDS); a session's id tells its shard."""

    def __init__(
        self,
        max_slots: int,
        eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
        *,
        shards: int = NUM_SHARDS,
        rng: random.Random | None = None,
    ) -> None:
        rng = rng or random.Random()
        self.id_range = INT32_MAX // shards
        self.shards = [
            FetchSessionCacheShard(max_slots // shards, eviction_ms, self.id_range, n, rng)
            for n in range(shards)
        ]
        self._next = 0

    def shard_of(self, session_id: int) -> FetchSessionCacheShard | None:
        n = session_id // self.id_range
        return self.shards[n] if 0 <= n < len(self.shards) else None

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.shard_of(session_id)
        return shard.get(session_id) if shard else None

    def next_shard(self) -> FetchSessionCacheShard:
        """New sessions go to the shards in turn."""
        shard = self.shards[self._next % len(self.shards)]
        self._next += 1
        return shard

    def __len__(self) -> int:
        return sum(len(s) for s in self.shards)

    @property
    def total_partitions(self) -> int:
        return sum(s.total_partitions for s in self.shards)


# --- per-request contexts ------------------------------------------------------------------------


@dataclass(slots=True)
class FetchContext:
    """What one Fetch reads and how its response is made.

    kind: "sessionless" | "full" | "incremental" | "error". `partitions` is what to read, in
    order; `respond(results, now)` gives (error_code, session_id, the results to send).
    """

    kind: str
    partitions: list[tuple[PartitionKey, Any]]
    error: int = 0
    session: FetchSession | None = None
    request_epoch: int = FINAL_EPOCH
    cache: FetchSessionCache | None = None
    privileged: bool = False
    uses_topic_ids: bool = False
    fetch_data: dict[PartitionKey, Any] | None = None

    def respond(
        self, results: list[tuple[PartitionKey, PartitionResult]], now: int
    ) -> tuple[int, int, list[tuple[PartitionKey, PartitionResult]]]:
        if self.kind == "error":
            return self.error, INVALID_SESSION_ID, []
        if self.kind == "sessionless":
            return 0, INVALID_SESSION_ID, results
        if self.kind == "full":
            assert self.cache is not None and self.fetch_data is not None
            params = self.fetch_data

            def create() -> dict[PartitionKey, CachedPartition]:
                return {
                    key: CachedPartition(params[key], res.high_watermark, res.log_start_offset)
                    for key, res in results
                }

            sid = self.cache.next_shard().maybe_create_session(
                now, self.privileged, len(results), self.uses_topic_ids, create
            )
            return 0, sid, results
        session = self.session
        assert session is not None
        if session.epoch != next_epoch(self.request_epoch):
            # Another request of this session came in meanwhile (a duplicate): Kafka answers so.
            return int(ErrorCode.INVALID_FETCH_SESSION_EPOCH), session.id, []
        sent = []
        for key, res in results:
            cached = session.partitions.get(key)
            if cached is None:  # forgotten by a later request while this one waited
                continue
            if must_respond(cached, res, True):
                sent.append((key, res))
                if len(res.records or b"") > 0:  # fairness: partitions that returned data go last
                    session.partitions[key] = session.partitions.pop(key)
        return 0, session.id, sent


class FetchManager:
    """Turns a request's session metadata into a FetchContext (Kafka's FetchManager.newContext)."""

    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache

    def new_context(
        self,
        version: int,
        session_id: int,
        epoch: int,
        privileged: bool,
        fetch_data: dict[PartitionKey, Any],
        to_forget: Sequence[PartitionKey],
        now: int,
    ) -> FetchContext:
        uses_topic_ids = version >= 13
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full request
            if session_id != INVALID_SESSION_ID:
                shard = self.cache.shard_of(session_id)
                if shard is not None:
                    shard.remove(session_id)
            parts = list(fetch_data.items())
            if epoch == FINAL_EPOCH:
                return FetchContext("sessionless", parts)
            return FetchContext(
                "full",
                parts,
                cache=self.cache,
                privileged=privileged,
                uses_topic_ids=uses_topic_ids,
                fetch_data=fetch_data,
            )
        shard = self.cache.shard_of(session_id)
        session = shard.get(session_id) if shard else None
        if shard is None or session is None:
            return FetchContext("error", [], error=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
        if session.epoch != epoch:
            return FetchContext("error", [], error=int(ErrorCode.INVALID_FETCH_SESSION_EPOCH))
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext("error", [], error=int(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR))
        session.update(fetch_data, to_forget)
        if not session.partitions:
            shard.remove(session)
            return FetchContext("sessionless", list(fetch_data.items()))
        shard.touch(session, now)
        session.epoch = next_epoch(session.epoch)
        return FetchContext(
            "incremental",
            [(k, c.params) for k, c in session.partitions.items()],
            session=session,
            request_epoch=epoch,
        )
