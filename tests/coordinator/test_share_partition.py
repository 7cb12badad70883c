"""SharePartition's record states and ShareGroup's membership, as Kafka's SharePartition does them."""

from __future__ import annotations

import uuid

from kcompat.coordinator.share.in_flight import Acquired, FetchedBatch, RecordState, ShareLimits, StateBatch
from kcompat.coordinator.share.share_group import HeartbeatResult, ShareGroup, ShareGroupTiming, simple_assign
from kcompat.coordinator.share.share_partition import SharePartition
from kcompat.wire.error_codes import ErrorCode

ACCEPT, RELEASE, REJECT, GAP, RENEW = 1, 2, 3, 0, 4


def sp(limit: int = 5, locks: int = 2000, lock_ms: int = 1000) -> SharePartition:
    return SharePartition(0, ShareLimits(limit, locks, lock_ms))


def test_acquire_accept_advances_start_offset() -> None:
    p = sp()
    assert p.acquire("a", [FetchedBatch(0, 9)], 100, now_ms=0) == [Acquired(0, 9, 1)]
    assert p.end_offset == 10 and p.start_offset == 0
    assert p.acknowledge("a", [(0, 4, [ACCEPT])], 0) == (ErrorCode.NONE, (0, 4))
    assert p.start_offset == 5
    assert p.acknowledge("a", [(5, 9, [ACCEPT])], 0)[0] == ErrorCode.NONE
    assert p.start_offset == 10 and p.runs == []


def test_release_redelivers_with_count_raised() -> None:
    p = sp()
    p.acquire("a", [FetchedBatch(0, 4)], 100, 0)
    assert p.acknowledge("a", [(2, 3, [RELEASE])], 0)[0] == ErrorCode.NONE
    # the batch split: 0-1 and 4 still acquired, 2-3 available
    assert [(r.first, r.last, r.state) for r in p.runs] == [
        (0, 1, RecordState.ACQUIRED),
        (2, 3, RecordState.AVAILABLE),
        (4, 4, RecordState.ACQUIRED),
    ]
    assert p.next_fetch_offset() == 2
    assert p.acquire("b", [FetchedBatch(0, 4)], 100, 0) == [Acquired(2, 3, 2)]


def test_per_offset_types_and_reject_archives() -> None:
    p = sp()
    p.acquire("a", [FetchedBatch(0, 3)], 100, 0)
    err, _ = p.acknowledge("a", [(0, 3, [ACCEPT, REJECT, RELEASE, GAP])], 0)
    assert err == ErrorCode.NONE
    assert p.start_offset == 2  # 0 acknowledged, 1 archived
    assert [(r.first, r.state) for r in p.runs] == [(2, RecordState.AVAILABLE), (3, RecordState.ARCHIVED)]


def test_ack_not_acquired_is_invalid_record_state_and_changes_nothing() -> None:
    p = sp()
    p.acquire("a", [FetchedBatch(0, 4)], 100, 0)
    before = [(r.first, r.last, r.state) for r in p.runs]
    assert p.acknowledge("b", [(0, 1, [ACCEPT])], 0)[0] == ErrorCode.INVALID_RECORD_STATE
    assert p.acknowledge("a", [(0, 1, [ACCEPT]), (3, 7, [ACCEPT])], 0)[0] == ErrorCode.INVALID_RECORD_STATE
    assert [(r.first, r.last, r.state) for r in p.runs] == before
    assert p.acknowledge("a", [(0, 1, [ACCEPT])], 0)[0] == ErrorCode.NONE
    assert p.acknowledge("a", [(0, 1, [ACCEPT])], 0)[0] == ErrorCode.INVALID_RECORD_STATE  # twice
    assert p.acknowledge("a", [(2, 3, [9])], 0)[0] == ErrorCode.INVALID_REQUEST


def test_overlapping_or_unordered_batches_are_refused_and_change_nothing() -> None:
    p = sp()
    p.acquire("a", [FetchedBatch(0, 9)], 100, 0)
    before = p.state_batches()
    # as Kafka's validation: batches in offset order, not overlapping (INVALID_REQUEST)
    assert p.acknowledge("a", [(0, 4, [ACCEPT]), (2, 6, [ACCEPT])], 0) == (ErrorCode.INVALID_REQUEST, None)
    assert p.acknowledge("a", [(5, 6, [ACCEPT]), (0, 1, [ACCEPT])], 0) == (ErrorCode.INVALID_REQUEST, None)
    # one starting on the previous one's last offset passes that check; the offset is acked twice
    assert p.acknowledge("a", [(0, 4, [ACCEPT]), (4, 6, [RELEASE])], 0) == (
        ErrorCode.INVALID_RECORD_STATE,
        None,
    )
    assert p.state_batches() == before and p.start_offset == 0
    assert p.acknowledge("a", [(0, 4, [ACCEPT]), (5, 6, [RELEASE])], 0) == (ErrorCode.NONE, (0, 6))


def test_lock_expiry_and_delivery_count_limit() -> None:
    p = sp(limit=2, lock_ms=100)
    p.acquire("a", [FetchedBatch(0, 0)], 10, 0)
    assert p.next_deadline_ms() == 100
    assert p.expire_locks(99) is None
    assert p.expire_locks(100) == (0, 0)
    assert p.acquire("b", [FetchedBatch(0, 0)], 10, 100) == [Acquired(0, 0, 2)]
    assert p.expire_locks(500) == (0, 0)
    # delivered twice, the limit: archived, the start moves on
    assert p.start_offset == 1 and p.runs == []


def test_renew_keeps_the_lock() -> None:
    p = sp(lock_ms=100)
    p.acquire("a", [FetchedBatch(0, 1)], 10, 0)
    assert p.acknowledge("a", [(0, 1, [RENEW])], 50)[0] == ErrorCode.NONE
    assert p.expire_locks(120) is None and p.next_deadline_ms() == 150


def test_max_records_max_locks_and_undeliverable_batches() -> None:
    p = sp(locks=6)
    got = p.acquire(
        "a", [FetchedBatch(0, 2), FetchedBatch(3, 3, deliverable=False), FetchedBatch(4, 9)], 4, 0
    )
    assert got == [Acquired(0, 2, 1), Acquired(4, 4, 1)]
    assert p.end_offset == 5
    got = p.acquire("a", [FetchedBatch(5, 9)], 100, 0)
    assert got == [Acquired(5, 5, 1)]  # window of 6 in flight (0-5) is full
    assert not p.can_acquire()
    p.acknowledge("a", [(0, 2, [ACCEPT])], 0)
    assert p.start_offset == 4 and p.can_acquire()


def test_release_member_and_state_round_trip() -> None:
    p = sp()
    p.acquire("a", [FetchedBatch(0, 4)], 100, 0)
    p.acknowledge("a", [(1, 1, [ACCEPT])], 0)
    assert p.release_member("a") == (0, 4)
    batches = p.state_batches()
    assert batches == (StateBatch(0, 0, 0, 1), StateBatch(1, 1, 2, 1), StateBatch(2, 4, 0, 1))
    q = sp()
    q.load(0, batches)
    assert q.start_offset == 0 and q.end_offset == 5
    assert q.acquire("b", [FetchedBatch(0, 4)], 100, 0) == [Acquired(0, 0, 2), Acquired(2, 4, 2)]


def test_reset_to_moves_start_past_deleted_records() -> None:
    p = sp()
    p.acquire("a", [FetchedBatch(0, 4)], 100, 0)
    p.reset_to(3)
    assert p.start_offset == 3 and p.runs[0].first == 3


def test_simple_assignor_spreads_and_shares() -> None:
    t = uuid.uuid4()
    assert simple_assign(["b", "a"], [(t, 0), (t, 1), (t, 2)]) == {"a": {t: [0, 2]}, "b": {t: [1]}}
    assert simple_assign(["a", "b", "c"], [(t, 0)]) == {"a": {t: [0]}, "b": {t: [0]}, "c": {t: [0]}}


def test_share_group_heartbeats() -> None:
    t = uuid.uuid4()
    g = ShareGroup("g")
    timing = ShareGroupTiming(session_timeout_ms=100)

    def parts(topic: str) -> list[tuple[uuid.UUID, int]]:
        return [(t, 0), (t, 1)] if topic == "x" else []

    def hb(mid: str, epoch: int, now: int = 0) -> HeartbeatResult:
        return g.heartbeat(
            now,
            mid,
            epoch,
            rack_id=None,
            subscribed=["x"],
            client_id="c",
            client_host="h",
            timing=timing,
            partitions_of=parts,
        )

    r = hb("a", 0)
    assert r.error_code == ErrorCode.NONE and r.member_epoch == 1 and r.assignment == {}
    # Only share-partitions whose state is initialized are assigned; initializing them bumps the epoch.
    assert g.uninitialized(parts) == {t: {0, 1}}
    g.initializing_started({t: {0, 1}}, {t: "x"})
    assert g.uninitialized(parts) == {} and hb("a", 1).assignment is None
    g.initializing_done({t: {1}}, False, parts)  # failed: tried again later
    g.initializing_done({t: {0}}, True, parts)
    assert g.uninitialized(parts) == {t: {1}} and g.initialized == {t: {0}}
    r = g.answer("a")  # type: ignore[assignment]
    assert r.member_epoch == 2 and r.assignment == {t: [0]}
    g.initializing_started({t: {1}}, {t: "x"})
    g.initializing_done({t: {1}}, True, parts)
    r = hb("b", 0)
    assert r.member_epoch == 4 and r.assignment == {t: [1]}
    r = hb("a", 2)
    assert r.member_epoch == 4 and r.assignment == {t: [0]}
    assert hb("a", 2).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert hb("zz", 3).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.expired(150) == ["a", "b"] or set(g.expired(150)) == {"a", "b"}
    assert hb("a", -1).member_epoch == -1 and set(g.members) == {"b"}


# --- transitions awaiting the persister (begin_acknowledge, commit, rollback) ---------------------


def test_a_transition_moves_the_start_offset_only_once_committed() -> None:
    p = sp()
    p.acquire("a", [FetchedBatch(0, 9)], 100, 0)
    err, t = p.begin_acknowledge("a", [(0, 4, [ACCEPT])], 0)
    assert err == ErrorCode.NONE and t is not None and (t.first, t.last) == (0, 4)
    assert p.start_offset == 0
    # the write carries the start offset past this transition's runs, and them only from there on
    assert p.settled_start_offset(t) == 5 and p.delivery_complete_count(t) == 0
    assert p.state_batches(0, 9, t) == ()
    # any other write leaves them to their own, and does not move the start past them
    assert p.state_batches(0, 9) == (StateBatch(5, 9, int(RecordState.AVAILABLE), 1),)
    assert p.settled_start_offset() == 0
    # a transition past the start offset carries its runs
    _, t2 = p.begin_acknowledge("a", [(7, 8, [ACCEPT])], 0)
    assert t2 is not None
    assert p.state_batches(0, 9, t2) == (StateBatch(7, 8, int(RecordState.ACKNOWLEDGED), 1),)
    p.commit(t2)
    p.commit(t)
    assert p.start_offset == 5
    assert [(r.first, r.state) for r in p.runs] == [
        (5, RecordState.ACQUIRED), (7, RecordState.ACKNOWLEDGED), (9, RecordState.ACQUIRED)
    ]  # fmt: skip


def test_released_records_wait_for_the_commit_before_anyone_acquires_them() -> None:
    p = sp()
    p.acquire("a", [FetchedBatch(0, 4)], 100, 0)
    _, t = p.begin_acknowledge("a", [(0, 4, [RELEASE])], 0)
    assert t is not None
    assert p.next_fetch_offset() == 5 and p.acquire("b", [FetchedBatch(0, 4)], 100, 0) == []
    p.commit(t)
    assert p.acquire("b", [FetchedBatch(0, 4)], 100, 0) == [Acquired(0, 4, 2)]


def test_a_rollback_restores_only_its_own_runs_member_count_and_deadline() -> None:
    p = sp(lock_ms=1000)
    p.acquire("a", [FetchedBatch(0, 4)], 100, now_ms=0)
    p.acquire("b", [FetchedBatch(5, 9)], 100, now_ms=100)
    _, ta = p.begin_acknowledge("a", [(0, 4, [ACCEPT])], 50)
    _, tb = p.begin_acknowledge("b", [(5, 9, [RELEASE])], 150)
    assert ta is not None and tb is not None
    assert p.acknowledge("a", [(0, 0, [ACCEPT])], 60)[0] == ErrorCode.INVALID_RECORD_STATE  # in transition
    p.rollback(ta)
    r = p.runs[0]
    assert (r.first, r.last, r.state, r.member, r.deadline_ms, r.delivery_count) == (
        0, 4, RecordState.ACQUIRED, "a", 1000, 1
    )  # fmt: skip
    assert p.start_offset == 0
    p.commit(tb)  # b's release stands: 5-9 available again
    assert p.acquire("c", [FetchedBatch(0, 9)], 100, 200) == [Acquired(5, 9, 2)]


def test_no_lock_expires_a_run_in_transition_and_a_rolled_back_one_expires_as_before() -> None:
    p = sp(lock_ms=1000)
    p.acquire("a", [FetchedBatch(0, 4)], 100, now_ms=0)
    _, t = p.begin_acknowledge("a", [(0, 4, [ACCEPT])], 10)
    assert t is not None
    assert p.next_deadline_ms() is None and p.expire_locks(5000) is None
    p.rollback(t)
    assert p.next_deadline_ms() == 1000
    assert p.expire_locks(5000) == (0, 4)
    assert p.acquire("b", [FetchedBatch(0, 4)], 100, 5000) == [Acquired(0, 4, 2)]
