"""The fetch session cache and contexts (KIP-227) on their own: no broker, no clock, no I/O."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from kcompat.server.fetch_session import (
    FINAL_EPOCH,
    INT32_MAX,
    CachedPartition,
    FetchManager,
    FetchSessionCache,
    FetchSessionCacheShard,
    must_respond,
    next_epoch,
)
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.types.fetch import EpochEndOffset, PartitionData

EVICT = 120_000


def fp(offset: int = 0, max_bytes: int = 1 << 20) -> Any:
    return SimpleNamespace(fetch_offset=offset, partition_max_bytes=max_bytes, current_leader_epoch=-1)


def data(*parts: int, topic: str = "t") -> dict[tuple[Any, int], Any]:
    return {(topic, p): fp() for p in parts}


def res(hwm: int = 0, start: int = 0, records: bytes = b"", error: int = 0) -> PartitionData:
    return PartitionData(error_code=error, high_watermark=hwm, log_start_offset=start, records=records)


def manager(slots: int = 1000) -> FetchManager:
    return FetchManager(FetchSessionCache(slots, EVICT, rng=random.Random(7)))


def open_session(m: FetchManager, parts: dict[tuple[Any, int], Any], now: int = 0, version: int = 12,
                 privileged: bool = False) -> int:  # fmt: skip
    ctx = m.new_context(version, 0, 0, privileged, parts, [], now)
    assert ctx.kind == "full"
    err, sid, sent = ctx.respond([(k, res()) for k in parts], now)
    assert err == 0 and len(sent) == len(parts)
    return sid


@pytest.mark.parametrize(("epoch", "after"), [(0, 1), (1, 2), (41, 42), (INT32_MAX, 1), (-1, -1), (-5, -1)])
def test_next_epoch(epoch: int, after: int) -> None:
    assert next_epoch(epoch) == after


# (session id, epoch) -> the context Kafka's FetchManager makes, with no session in the cache.
@pytest.mark.parametrize(
    ("session_id", "epoch", "kind", "error"),
    [
        (0, -1, "sessionless", 0),
        (0, 0, "full", 0),
        (123, -1, "sessionless", 0),  # closes 123 if it existed
        (123, 0, "full", 0),  # closes 123 and opens a new one
        (123, 1, "error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        (0, 3, "error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        (INT32_MAX, 2, "error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND),  # beyond every shard's range
        (-7, 2, "error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
    ],
)
def test_request_metadata_picks_the_context(session_id: int, epoch: int, kind: str, error: int) -> None:
    ctx = manager().new_context(12, session_id, epoch, False, data(0), [], 0)
    assert (ctx.kind, ctx.error) == (kind, int(error))
    err, sid, sent = ctx.respond([(("t", 0), res())] if kind != "error" else [], 0)
    assert err == int(error) and len(sent) == (0 if kind == "error" else 1)
    assert (sid != 0) == (kind == "full")


def test_session_errors_against_a_live_session() -> None:
    m = manager()
    sid = open_session(m, data(0, 1))
    cases = [
        # (version, epoch, expected error); the session's next epoch is 1
        (12, 2, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        (12, 7, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        (13, 1, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR),  # a name-keyed session asked by id
        (12, 1, 0),
        (12, 1, ErrorCode.INVALID_FETCH_SESSION_EPOCH),  # epoch 1 was used: 2 is next
        (12, 2, 0),
    ]
    for version, epoch, error in cases:
        ctx = m.new_context(version, sid, epoch, False, {}, [], 10)
        assert ctx.error == int(error), (version, epoch)
        assert ctx.kind == ("error" if error else "incremental")
        if ctx.kind == "incremental":
            ctx.respond([(k, res()) for k, _ in ctx.partitions], 10)
    by_id = open_session(m, {("id-1", 0): fp()}, version=13)
    assert m.new_context(12, by_id, 1, False, {}, [], 0).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert m.new_context(13, by_id, 1, False, {}, [], 0).kind == "incremental"


def test_incremental_update_adds_updates_and_forgets() -> None:
    m = manager()
    sid = open_session(m, data(0, 1, 2))
    new_params = fp(offset=5)
    ctx = m.new_context(12, sid, 1, False, {("t", 1): new_params, ("t", 3): fp()}, [("t", 0), ("t", 9)], 0)
    assert ctx.kind == "incremental"
    assert [k for k, _ in ctx.partitions] == [("t", 1), ("t", 2), ("t", 3)]
    assert dict(ctx.partitions)[("t", 1)] is new_params
    # Forgetting every partition closes the session: a sessionless answer for what was named.
    ctx.respond([(k, res()) for k, _ in ctx.partitions], 0)
    ctx = m.new_context(12, sid, 2, False, {}, [("t", 1), ("t", 2), ("t", 3)], 0)
    assert (ctx.kind, ctx.partitions) == ("sessionless", [])
    assert m.cache.get(sid) is None
    assert m.new_context(12, sid, 3, False, {}, [], 0).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_incremental_response_holds_only_what_changed() -> None:
    m = manager()
    sid = open_session(m, data(0, 1, 2, 3))  # the client knows hwm 0, log start 0 everywhere

    log = {p: res() for p in range(4)}  # what a read of each partition finds, round after round

    def round_(epoch: int, changes: dict[int, PartitionData]) -> list[int]:
        log.update(changes)
        ctx = m.new_context(12, sid, epoch, False, {}, [], 0)
        assert ctx.kind == "incremental"
        err, got_sid, sent = ctx.respond([(k, log[k[1]]) for k, _ in ctx.partitions], 0)
        for r in log.values():
            r.records = b""  # records are read once
        assert (err, got_sid) == (0, sid)
        return [k[1] for k, _ in sent]

    assert round_(1, {}) == []  # nothing new: an empty response
    assert round_(2, {1: res(hwm=3, records=b"xyz")}) == [1]  # records and a new hwm
    assert round_(3, {}) == []  # the client now knows hwm 3 for partition 1
    assert round_(4, {2: res(start=4)}) == [2]  # log start moved
    assert round_(5, {3: res(error=ErrorCode.OFFSET_OUT_OF_RANGE)}) == [3]  # same hwm, but an error
    assert round_(6, {}) == [3]  # errors are always sent
    assert round_(7, {3: res()}) == [3]  # recovered: the error reset the known hwm to -1, so hwm 0 is news
    assert round_(8, {}) == []
    pref = res()
    pref.preferred_read_replica = 2
    assert round_(9, {0: pref}) == [0]
    assert round_(10, {0: res()}) == []
    # Partitions that returned records go to the end of the session's order (fairness).
    ctx = m.new_context(12, sid, 11, False, {}, [], 0)
    assert [k[1] for k, _ in ctx.partitions] == [0, 2, 3, 1]


def test_a_duplicate_request_gets_invalid_epoch_at_response_time() -> None:
    m = manager()
    sid = open_session(m, data(0))
    first = m.new_context(12, sid, 1, False, {}, [], 0)
    second = m.new_context(12, sid, 2, False, {}, [], 0)  # the session moved on meanwhile
    assert first.respond([(("t", 0), res())], 0)[:2] == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid)
    assert second.respond([(("t", 0), res())], 0)[:2] == (0, sid)


def test_full_fetch_with_an_id_closes_that_session() -> None:
    m = manager()
    sid = open_session(m, data(0))
    ctx = m.new_context(12, sid, FINAL_EPOCH, False, data(0), [], 0)
    assert ctx.kind == "sessionless" and m.cache.get(sid) is None
    sid2 = open_session(m, data(0))
    sid3 = open_session(m, data(0))  # a plain new session leaves the others alone
    assert m.cache.get(sid2) is not None
    ctx = m.new_context(12, sid2, 0, False, data(0, 1), [], 0)
    assert m.cache.get(sid2) is None and ctx.kind == "full"
    assert ctx.respond([(k, res()) for k in data(0, 1)], 0)[1] not in (0, sid2, sid3)


def test_cache_hands_out_ids_by_shard_round_robin() -> None:
    cache = FetchSessionCache(16, EVICT, rng=random.Random(1))
    m = FetchManager(cache)
    ids = [open_session(m, data(0)) for _ in range(16)]
    assert [cache.id_range and i // cache.id_range for i in ids] == list(range(8)) * 2
    assert len(set(ids)) == 16 and 0 not in ids
    assert len(cache) == 16 and cache.total_partitions == 16
    assert open_session(m, data(0)) == 0  # every shard full, nobody evictable: no session
    assert len(cache) == 16


def test_zero_slots_means_no_sessions() -> None:
    m = manager(slots=0)
    assert open_session(m, data(0, 1)) == 0
    assert m.new_context(12, 0, 0, False, data(0), [], 0).kind == "full"  # still a full fetch


def shard_with(
    *sessions: tuple[bool, int, int], max_entries: int | None = None
) -> tuple[FetchSessionCacheShard, list[int]]:
    """A shard holding sessions given as (privileged, partition count, creation ms)."""
    shard = FetchSessionCacheShard(max_entries or len(sessions), EVICT, rng=random.Random(3))
    ids = []
    for privileged, size, created in sessions:
        parts = {("t", p): CachedPartition(fp()) for p in range(size)}
        ids.append(shard.maybe_create_session(created, privileged, size, False, lambda parts=parts: parts))
    return shard, ids


# (sessions as (privileged, size, created ms), last use of each, now, newcomer (privileged, size),
#  which session is evicted: an index, or None for "no room")
EVICTIONS = [
    # a session unused for more than the eviction time goes first, whatever its size
    ([(True, 10, 0), (False, 10, 0)], [0, 0], EVICT + 1, (False, 1), 0),
    # least recently used of the stale ones
    ([(False, 1, 0), (False, 1, 0)], [50, 10], EVICT + 60, (False, 1), 1),
    # nothing stale, nothing older than the eviction time: a consumer cannot evict
    ([(False, 1, 0), (False, 1, 0)], [0, 0], 1000, (False, 50), None),
    # ... but a replica (privileged) can evict an unprivileged session at any age
    ([(False, 5, 0), (False, 3, 0)], [0, 0], 1000, (True, 1), 1),
    # ... and not a privileged one that is young
    ([(True, 5, 0)], [0], 1000, (True, 50), None),
    # sessions older than the eviction time (at their last use) are evictable by everyone, the
    # smallest first, and only by a bigger newcomer
    ([(False, 5, 0), (False, 3, 0)], [EVICT + 10, EVICT + 10], EVICT + 20, (False, 4), 1),
    (
        [(False, 5, 0), (False, 3, 0)],
        [EVICT + 10, EVICT + 10],
        EVICT + 20,
        (False, 3),
        None,
    ),  # a tie is not enough
    ([(False, 5, 0), (False, 3, 0)], [EVICT + 10, EVICT + 10], EVICT + 20, (False, 2), None),
    # an unprivileged newcomer never evicts a privileged session, a privileged one beats any unprivileged
    ([(True, 1, 0)], [EVICT + 10], EVICT + 20, (False, 100), None),
    ([(False, 100, 0)], [EVICT + 10], EVICT + 20, (True, 1), 0),
    # age is judged at the last touch: old by now but not when last used -> not evictable by all
    ([(False, 1, 0)], [10], EVICT + 5, (False, 9), None),
]


@pytest.mark.parametrize(("sessions", "used", "now", "newcomer", "evicted"), EVICTIONS)
def test_eviction_rules(sessions: list[tuple[bool, int, int]], used: list[int], now: int,
                        newcomer: tuple[bool, int], evicted: int | None) -> None:  # fmt: skip
    shard, ids = shard_with(*sessions)
    for sid, t in zip(ids, used, strict=True):
        session = shard.get(sid)
        assert session is not None
        shard.touch(session, t)
    privileged, size = newcomer
    new = shard.maybe_create_session(
        now, privileged, size, False, lambda: {("t", p): CachedPartition(fp()) for p in range(size)}
    )
    if evicted is None:
        assert new == 0 and sorted(shard.sessions) == sorted(ids) and shard.evictions == 0
    else:
        assert new != 0 and shard.get(ids[evicted]) is None and new in shard.sessions
        assert len(shard) == len(ids) and shard.evictions == 1
    assert shard.total_partitions == sum(len(s.partitions) for s in shard.sessions.values())


def test_must_respond_without_update_keeps_the_cached_state() -> None:
    cached = CachedPartition(fp(), high_watermark=3, log_start_offset=0)
    assert must_respond(cached, res(hwm=4), False) and cached.high_watermark == 3
    assert must_respond(cached, res(hwm=4), True) and cached.high_watermark == 4
    assert not must_respond(cached, res(hwm=4), True)
    diverging = res(hwm=4)
    diverging.diverging_epoch = EpochEndOffset(epoch=1, end_offset=2)
    assert must_respond(cached, diverging, True)
