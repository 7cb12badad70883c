"""The share coordinator's pure state: batch merging, fencing, snapshot cadence, and replay."""

from __future__ import annotations

import itertools
import random
import uuid

import pytest

from kcompat.coordinator.share_coordinator import (
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    ShareKey,
    ShareResult,
    StateBatch,
    combine,
    state_partition,
)
from kcompat.coordinator.share_coordinator.prune import SnapshotOffsets
from kcompat.coordinator.share_coordinator.records import SNAPSHOT, UPDATE, decode
from kcompat.wire.error_codes import ErrorCode

B = StateBatch
TOPIC = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
KEY = ShareKey("g", TOPIC, 0)


@pytest.mark.parametrize(
    ("old", "new", "start", "want"),
    [
        ([], [], -1, []),
        ([B(0, 9, AVAILABLE, 1)], [], -1, [B(0, 9, AVAILABLE, 1)]),
        # a later delivery (higher count) wins over the range it covers
        (
            [B(0, 9, AVAILABLE, 1)],
            [B(3, 5, AVAILABLE, 2)],
            -1,
            [B(0, 2, AVAILABLE, 1), B(3, 5, AVAILABLE, 2), B(6, 9, AVAILABLE, 1)],
        ),
        # same count: the terminal state wins
        ([B(0, 9, AVAILABLE, 1)], [B(0, 9, ACKNOWLEDGED, 1)], -1, [B(0, 9, ACKNOWLEDGED, 1)]),
        ([B(0, 9, ACKNOWLEDGED, 1)], [B(0, 4, AVAILABLE, 1)], -1, [B(0, 9, ACKNOWLEDGED, 1)]),
        # an older word arriving late does not undo a newer one
        (
            [B(0, 9, ARCHIVED, 5)],
            [B(2, 12, AVAILABLE, 3)],
            -1,
            [B(0, 9, ARCHIVED, 5), B(10, 12, AVAILABLE, 3)],
        ),
        # contiguous batches with one state and count are joined; different ones are not
        ([B(0, 4, ACKNOWLEDGED, 1)], [B(5, 9, ACKNOWLEDGED, 1)], -1, [B(0, 9, ACKNOWLEDGED, 1)]),
        (
            [B(0, 4, ACKNOWLEDGED, 1)],
            [B(5, 9, ACKNOWLEDGED, 2)],
            -1,
            [B(0, 4, ACKNOWLEDGED, 1), B(5, 9, ACKNOWLEDGED, 2)],
        ),
        # gaps stay gaps
        (
            [B(0, 1, AVAILABLE, 1)],
            [B(5, 6, AVAILABLE, 1)],
            -1,
            [B(0, 1, AVAILABLE, 1), B(5, 6, AVAILABLE, 1)],
        ),
        # below the start offset: dropped; straddling it: cut
        (
            [B(0, 4, ACKNOWLEDGED, 1), B(5, 9, AVAILABLE, 1)],
            [B(10, 11, ARCHIVED, 2)],
            7,
            [B(7, 9, AVAILABLE, 1), B(10, 11, ARCHIVED, 2)],
        ),
        ([B(0, 4, ACKNOWLEDGED, 1)], [], 5, []),
        # overlapping batches within one write are merged too
        (
            [],
            [B(0, 5, AVAILABLE, 1), B(3, 8, ACKNOWLEDGED, 1)],
            -1,
            [B(0, 2, AVAILABLE, 1), B(3, 8, ACKNOWLEDGED, 1)],
        ),
    ],
)
def test_combine(old: list[B], new: list[B], start: int, want: list[B]) -> None:
    assert list(combine(old, new, start)) == want


def _per_offset(batches: list[B], start: int) -> dict[int, tuple[int, int]]:
    """The oracle: each offset's highest (count, state) among the batches covering it."""
    out: dict[int, tuple[int, int]] = {}
    for b in batches:
        for o in range(max(b.first_offset, start), b.last_offset + 1):
            out[o] = max(out.get(o, (-1, -1)), (b.delivery_count, b.delivery_state))
    return out


def test_combine_matches_the_per_offset_rule() -> None:
    rng = random.Random(7)
    for _ in range(500):

        def batch() -> B:
            first = rng.randrange(0, 40)
            return B(
                first,
                first + rng.randrange(0, 8),
                rng.choice((AVAILABLE, ACKNOWLEDGED, ARCHIVED)),
                rng.randrange(0, 4),
            )

        old = [batch() for _ in range(rng.randrange(0, 6))]
        new = [batch() for _ in range(rng.randrange(0, 6))]
        start = rng.choice((-1, rng.randrange(0, 30)))
        got = combine(old, new, start)
        assert _per_offset(list(got), start) == _per_offset(old + new, start)
        for a, b in itertools.pairwise(got):  # sorted, disjoint, maximally joined
            assert a.last_offset < b.first_offset
            assert not (
                a.last_offset + 1 == b.first_offset
                and (a.delivery_state, a.delivery_count) == (b.delivery_state, b.delivery_count)
            )


def _shard(
    per_snapshot: int = 500, known: bool = True, init: tuple[ShareKey, ...] = (KEY,)
) -> ShareCoordinatorShard:
    """A shard with the share-partitions of `init` initialized (state epoch 0, start offset 0), as
    the group coordinator does before any leader reads or writes them."""
    s = ShareCoordinatorShard(ShareCoordinatorConfig(per_snapshot), lambda t, p: known)
    for key in init:
        assert s.initialize(0, key, 0, 0).error == ErrorCode.NONE
    return s


def _write(
    s: ShareCoordinatorShard,
    state_epoch: int = 0,
    leader_epoch: int = 0,
    start: int = 0,
    batches: tuple[B, ...] = (),
    dcc: int = -1,
    key: ShareKey = KEY,
) -> ShareResult:
    return s.write(
        1000,
        key,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start,
        delivery_complete_count=dcc,
        batches=batches,
    )


@pytest.mark.parametrize(
    ("recorded", "write", "error"),
    [
        ((1, 5), (1, 5), ErrorCode.NONE),
        ((1, 5), (1, 6), ErrorCode.NONE),  # a newer leader
        ((1, 5), (2, 5), ErrorCode.NONE),  # a newer state epoch
        ((1, 5), (1, 4), ErrorCode.FENCED_LEADER_EPOCH),
        ((1, 5), (0, 5), ErrorCode.FENCED_STATE_EPOCH),
        ((1, 5), (0, 4), ErrorCode.FENCED_LEADER_EPOCH),  # the leader is checked first
        ((1, 5), (1, -1), ErrorCode.NONE),  # a writer that gives no epoch is not fenced (Kafka)
        ((1, 5), (-1, 5), ErrorCode.NONE),
    ],
)
def test_write_fencing(recorded: tuple[int, int], write: tuple[int, int], error: ErrorCode) -> None:
    s = _shard()
    assert _write(s, state_epoch=recorded[0], leader_epoch=recorded[1]).error == ErrorCode.NONE
    before = s.states[KEY]
    r = _write(s, state_epoch=write[0], leader_epoch=write[1], batches=(B(0, 0, ACKNOWLEDGED, 1),))
    assert r.error == error
    if error != ErrorCode.NONE:
        assert r.records == () and s.states[KEY] == before and r.message


@pytest.mark.parametrize(
    ("key", "known", "error", "unknown"),
    [
        (ShareKey("", TOPIC, 0), True, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST),
        (ShareKey("g", uuid.UUID(int=0), 0), True, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST),
        (ShareKey("g", TOPIC, -1), True, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST),
        # an unknown partition cannot be initialized; reads and writes find it uninitialized
        (KEY, False, ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ],
)
def test_bad_keys(key: ShareKey, known: bool, error: ErrorCode, unknown: ErrorCode) -> None:
    s = _shard(known=known, init=())
    assert _write(s, key=key).error == error
    assert s.read(0, key, 0).error == error
    assert s.initialize(0, key, 0, 0).error == unknown
    assert s.summary(key).error == unknown
    assert not s.states


def test_reads_and_writes_need_an_initialized_share_partition() -> None:
    s = _shard(init=())
    for r in (s.read(0, KEY, 3), _write(s, batches=(B(0, 0, ACKNOWLEDGED, 1),))):
        assert (r.error, r.records) == (ErrorCode.INVALID_REQUEST, ()) and r.message
    summary = s.summary(KEY)
    assert (summary.error, summary.state) == (ErrorCode.NONE, None)
    assert s.initialize(0, KEY, 0, -1).error == ErrorCode.NONE
    assert s.read(0, KEY, 3).state is not None


def test_a_new_leaders_read_is_recorded_and_fences_the_old_leader() -> None:
    s = _shard()
    _write(s, leader_epoch=1, batches=(B(0, 4, ACKNOWLEDGED, 1),))
    same = s.read(0, KEY, 1)
    assert same.records == () and same.state is not None
    newer = s.read(0, KEY, 2)
    assert (
        len(newer.records) == 1
        and newer.state is not None
        and newer.state.batches == (B(0, 4, ACKNOWLEDGED, 1),)
    )
    assert _write(s, leader_epoch=1).error == ErrorCode.FENCED_LEADER_EPOCH
    assert s.read(0, KEY, 1).error == ErrorCode.FENCED_LEADER_EPOCH
    assert s.read(0, KEY, -1).error == ErrorCode.NONE  # nor a reader
    assert _replayed(s, newer.records).leader_epochs.get(KEY) == 2


def test_initialize_resets_the_state_and_fences_older_state_epochs() -> None:
    s = _shard()
    _write(s, state_epoch=0, leader_epoch=3, start=0, batches=(B(0, 4, ACKNOWLEDGED, 1),))
    assert s.initialize(0, KEY, 0, 100).error == ErrorCode.NONE
    st = s.states[KEY]
    assert (st.start_offset, st.batches, st.state_epoch, st.snapshot_epoch) == (100, (), 0, 1)
    assert s.initialize(0, KEY, 2, 200).error == ErrorCode.NONE
    assert s.initialize(0, KEY, 1, 0).error == ErrorCode.FENCED_STATE_EPOCH
    assert _write(s, state_epoch=1, leader_epoch=3).error == ErrorCode.FENCED_STATE_EPOCH
    assert _write(s, state_epoch=2, leader_epoch=2).error == ErrorCode.FENCED_LEADER_EPOCH  # still 3


def test_delete_writes_a_tombstone_and_forgets() -> None:
    s = _shard(init=())
    assert s.delete(KEY).records == ()
    s.initialize(0, KEY, 0, 0)
    _write(s, batches=(B(0, 0, ACKNOWLEDGED, 1),))
    r = s.delete(KEY)
    assert [rec.value for rec in r.records] == [None]
    assert KEY not in s.states and KEY not in s.leader_epochs
    assert s.read(0, KEY, 0).error == ErrorCode.INVALID_REQUEST


def _kinds(records: list) -> list[int]:  # type: ignore[type-arg]
    return [int.from_bytes(r.key[:2], "big") for r in records]


@pytest.mark.parametrize("per_snapshot", [0, 1, 3, 500])
def test_snapshot_cadence(per_snapshot: int) -> None:
    s = _shard(per_snapshot)
    records = []
    for i in range(12):
        records.extend(_write(s, start=0, batches=(B(i, i, ACKNOWLEDGED, 1),)).records)
    # after initialize's snapshot, `per_snapshot` updates between snapshots
    want = ([UPDATE] * per_snapshot + [SNAPSHOT]) * 12
    assert _kinds(records) == want[:12]
    assert s.states[KEY].batches == (B(0, 11, ACKNOWLEDGED, 1),)


def test_a_new_state_epoch_is_always_a_snapshot() -> None:
    s = _shard()
    _write(s, state_epoch=0)
    _write(s, state_epoch=0)
    r = _write(s, state_epoch=1)
    assert _kinds(list(r.records)) == [SNAPSHOT]
    assert s.states[KEY].state_epoch == 1


def _replayed(
    s: ShareCoordinatorShard, records: tuple = (), log: list | None = None
) -> ShareCoordinatorShard:  # type: ignore[type-arg]
    fresh = _shard(s.config.snapshot_update_records_per_snapshot, init=())
    for r in [*(log or []), *records]:
        fresh.replay(r.key, r.value)
    return fresh


@pytest.mark.parametrize("per_snapshot", [0, 2, 5, 500])
def test_replay_rebuilds_the_same_state(per_snapshot: int) -> None:
    rng = random.Random(per_snapshot)
    s = _shard(per_snapshot, init=())
    log = []
    keys = [ShareKey(g, TOPIC, p) for g in ("a", "b") for p in range(3)]
    leader: dict[ShareKey, int] = {}
    start: dict[ShareKey, int] = {}
    for step in range(400):
        key = rng.choice(keys)
        op = rng.random()
        if key not in s.states and op >= 0.05:
            op = 0.05  # the group coordinator initializes a share-partition before its leader uses it
        if op < 0.05:
            r = s.delete(key)
            leader.pop(key, None)
            start.pop(key, None)
        elif op < 0.1:
            r = s.initialize(step, key, 0, rng.randrange(0, 50))
        elif op < 0.2:
            leader[key] = leader.get(key, 0) + rng.randrange(0, 2)
            r = s.read(step, key, leader[key])
        else:
            start[key] = start.get(key, 0) + rng.randrange(0, 3)
            first = start[key] + rng.randrange(0, 10)
            batches = (
                B(
                    first,
                    first + rng.randrange(0, 5),
                    rng.choice((AVAILABLE, ACKNOWLEDGED, ARCHIVED)),
                    rng.randrange(1, 4),
                ),
            )
            r = _write(
                s,
                leader_epoch=leader.get(key, 0),
                start=rng.choice((-1, start[key])),
                batches=batches,
                dcc=step,
                key=key,
            )
        assert r.error == ErrorCode.NONE, r.message
        log.extend(r.records)
        if step % 25 and step != 399:
            continue
        # a prefix of the log replays to the state the coordinator had then
        fresh = _replayed(s, log=log)
        assert fresh.states == s.states
        assert fresh.leader_epochs == s.leader_epochs
        assert fresh.state_epochs == s.state_epochs
        assert fresh.updates_since_snapshot == s.updates_since_snapshot


def test_records_round_trip_and_partition_hash() -> None:
    s = _shard()
    r = _write(s, state_epoch=2, leader_epoch=7, start=5, dcc=3, batches=(B(5, 9, ARCHIVED, 5),))
    key, value = decode(r.records[0].key, r.records[0].value)
    assert key == KEY
    assert (
        value is not None and value.batches == (B(5, 9, ARCHIVED, 5),) and value.delivery_complete_count == 3
    )
    # Kafka's partitionFor: abs(javaHashCode("group:topicIdBase64:partition")) % n
    assert KEY.coordinator_key() == "g:a6e4EJ2tEdGAtADAT9QwyA:0"
    assert 0 <= state_partition(KEY, 50) < 50


def test_cold_snapshots_refresh_old_snapshots_and_keep_the_fencing_epochs() -> None:
    s = _shard()
    a, b = KEY, ShareKey("h", TOPIC, 1)
    s.write(
        0,
        a,
        state_epoch=0,
        leader_epoch=4,
        start_offset=0,
        delivery_complete_count=1,
        batches=(B(0, 3, ACKNOWLEDGED, 1),),
    )
    s.initialize(0, b, 1, 10)  # its leader epoch is 0 in the state ...
    s.read(0, b, 6)  # ... and 6 where fencing looks
    s.write(
        500,
        a,
        state_epoch=0,
        leader_epoch=4,
        start_offset=0,
        delivery_complete_count=2,
        batches=(B(4, 4, ARCHIVED, 3),),
    )
    assert s.cold_snapshots(999, 1000, lambda k: True).records == ()  # nothing is a second old yet
    r = s.cold_snapshots(1000, 1000, lambda k: True)
    assert _kinds(list(r.records)) == [SNAPSHOT, SNAPSHOT]
    assert s.states[b].leader_epoch == 6 and s.states[b].state_epoch == 1
    assert s.states[a].batches == (B(0, 3, ACKNOWLEDGED, 1), B(4, 4, ARCHIVED, 3))
    # the cold snapshots alone rebuild the state (what is left after a prune)
    alone = _replayed(s, r.records)
    assert alone.states == s.states and alone.leader_epochs == s.leader_epochs
    assert s.cold_snapshots(5000, 1000, lambda k: True).records == ()  # all quiet: nothing new to save
    s.write(5000, a, state_epoch=0, leader_epoch=4, start_offset=-1, delivery_complete_count=-1, batches=())
    assert len(s.cold_snapshots(6000, 1000, lambda k: True).records) == 2  # no longer all quiet
    assert s.cold_snapshots(6000, 1000, lambda k: k == b).records == ()  # b alone is quiet


def test_snapshot_offsets_say_what_a_prune_may_drop() -> None:
    s = _shard(per_snapshot=1, init=())
    offsets = SnapshotOffsets()
    a, b = KEY, ShareKey("h", TOPIC, 1)
    log = [*s.initialize(0, a, 0, 0).records, *s.initialize(0, b, 0, 0).records]
    for key in (a, b, a, a, b, a):
        log.extend(_write(s, key=key, batches=(B(0, 0, ACKNOWLEDGED, 1),)).records)
    for offset, r in enumerate(log):
        offsets.note(0, offset, r.key, r.value)
    assert _kinds(log) == [SNAPSHOT, SNAPSHOT, UPDATE, UPDATE, SNAPSHOT, UPDATE, SNAPSHOT, SNAPSHOT]
    assert offsets.prune_point(0, len(log)) == 6  # b's newest snapshot; a's is at 7
    fresh = _replayed(s, log=log[6:])
    assert fresh.states == s.states
    offsets.note(0, len(log), *s.delete(b).records[0])
    assert offsets.prune_point(0, len(log) + 1) == 7  # a's newest snapshot
    assert offsets.prune_point(1, 42) == 42  # nothing kept in a partition without share-partitions
