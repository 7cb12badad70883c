"""The share group's own records in __consumer_offsets (types 10-15): Kafka's bytes, the records a
change writes, and the replay that rebuilds the group from them (also through GroupCoordinator.load,
as a restart or a shard load does)."""

from __future__ import annotations

import uuid

import kcompat.coordinator.records as rec
import kcompat.coordinator.share.share_group_records as sr
from kcompat.coordinator import GroupCoordinator
from kcompat.coordinator.share.share_group import ShareGroup, ShareGroups, ShareGroupTiming
from kcompat.wire.types import share_group_records as t

T = uuid.UUID("00000000-0000-0000-0000-00000000000a")


def parts(topic: str) -> list[tuple[uuid.UUID, int]]:
    return [(T, 0), (T, 1), (T, 2)] if topic == "x" else []


def join(g: ShareGroup, mid: str, epoch: int = 0, now: int = 0) -> None:
    g.heartbeat(
        now,
        mid,
        epoch,
        rack_id="r1",
        subscribed=["x"],
        client_id=f"client-{mid}",
        client_host="/127.0.0.1",
        timing=ShareGroupTiming(session_timeout_ms=100),
        partitions_of=parts,
    )


def grown() -> ShareGroup:
    """A group with two members whose share-partitions are initialized and assigned."""
    g = ShareGroup("g")
    join(g, "a")
    g.initializing_started({T: {0, 1, 2}}, {T: "x"})
    g.initializing_done({T: {0, 1, 2}}, True, parts)
    join(g, "b")
    g.answer("a")
    return g


def replayed(records: list[rec.Record]) -> ShareGroups:
    groups = ShareGroups()
    for r in records:
        decoded = sr.decode(r)
        assert decoded is not None
        sr.replay(groups, *decoded)
    return groups


def test_the_bytes_are_kafkas() -> None:
    key, value = sr.make(
        t.ShareGroupMetadataKey(group_id="g"), t.ShareGroupMetadataValue(epoch=7, metadata_hash=-2)
    )
    assert key == b"\x00\x0b" + b"\x00\x01g"  # type 11, then the key's fields at version 0 (not flexible)
    # value version 0, flexible: epoch, hash, no tagged fields
    assert value == b"\x00\x00" + (7).to_bytes(4, "big") + (-2).to_bytes(8, "big", signed=True) + b"\x00"
    key, _ = sr.make(t.ShareGroupStatePartitionMetadataKey(group_id="g"), None)
    assert key[:2] == b"\x00\x0f"
    # the consumer group codec leaves them alone; the share one decodes only its own types
    assert rec.decode_key(key) is None and sr.decode((key, None)) == (
        t.ShareGroupStatePartitionMetadataKey(group_id="g"),
        None,
    )
    assert sr.decode_key(rec.encode_key(rec.GroupMetadataKey("g"))) is None
    assert sr.group_of_key(key) == "g" and sr.group_of_key(rec.encode_key(rec.GroupMetadataKey("h"))) == "h"


def test_a_group_written_from_nothing_replays_to_the_same_group() -> None:
    g = grown()
    records = sr.changes("g", None, sr.image(g), g.topic_names)
    kinds = [int.from_bytes(k[:2], "big") for k, _ in records]
    assert kinds == [10, 10, 11, 15, 13, 13, 12, 14, 14]  # Kafka's order: members, epoch, state, targets
    back = replayed(records).groups["g"]
    assert sr.image(back) == sr.image(g)
    assert (back.group_epoch, back.assignment_epoch) == (3, 3)
    assert back.members["a"].client_id == "client-a" and back.members["a"].rack_id == "r1"
    assert back.initialized == {T: {0, 1, 2}} and back.topic_names == {T: "x"}
    # What the member sees after a reload: its epoch goes on, no bump for unchanged topics.
    join(back, "a", epoch=back.members["a"].member_epoch)
    assert back.group_epoch == 3


def test_only_what_changed_is_written_and_a_leave_writes_tombstones() -> None:
    g = grown()
    before = sr.image(g)
    assert sr.changes("g", before, sr.image(g), g.topic_names) == []
    g.remove("b", parts)
    records = sr.changes("g", before, sr.image(g), g.topic_names)
    decoded = [sr.decode(r) for r in records]
    assert [(type(k).__name__, v is None) for k, v in decoded] == [  # type: ignore[misc]
        ("ShareGroupCurrentMemberAssignmentKey", True),
        ("ShareGroupTargetAssignmentMemberKey", True),
        ("ShareGroupMemberMetadataKey", True),
        ("ShareGroupMetadataKey", False),
        ("ShareGroupTargetAssignmentMemberKey", False),
        ("ShareGroupTargetAssignmentMetadataKey", False),
    ]
    log = sr.changes("g", None, before, g.topic_names) + records
    assert sr.image(replayed(log).groups["g"]) == sr.image(g)


def test_a_deleted_group_leaves_only_tombstones() -> None:
    g = grown()
    written = sr.changes("g", None, sr.image(g), g.topic_names)
    gone = sr.changes("g", sr.image(g), None, g.topic_names)
    assert all(v is None for _, v in gone) and len(gone) == 3 * 2 + 3
    assert replayed(written + gone).groups == {}
    # a compacted log (the tombstones only) gives the same
    assert replayed(gone).groups == {}


def test_the_coordinator_loads_and_unloads_share_groups_with_fresh_sessions() -> None:
    g = grown()
    records = sr.changes("g", None, sr.image(g), g.topic_names)
    offsets = [rec.make(rec.OffsetCommitKey("cg", "x", 0), rec.OffsetCommitValue(5, "", 1))]
    c = GroupCoordinator(share_session_timeout_ms=lambda group_id: 1000)
    c.load(offsets + records, now_ms=50_000)
    loaded = c.share_groups.groups["g"]
    assert sr.image(loaded) == sr.image(g) and c.has_state()
    assert {m.deadline_ms for m in loaded.members.values()} == {51_000}
    assert c.offsets["cg"][("x", 0)].offset == 5
    c.unload(lambda group_id: group_id == "g")
    assert c.share_groups.groups == {}


def test_partitions_left_initializing_are_initialized_again_after_a_load() -> None:
    g = ShareGroup("g")
    join(g, "a")
    g.initializing_started({T: {0, 1, 2}}, {T: "x"})  # the coordinator stopped here
    records = sr.changes("g", None, sr.image(g), g.topic_names)
    c = GroupCoordinator()
    c.load(records, now_ms=0)
    loaded = c.share_groups.groups["g"]
    assert loaded.initializing == {} and loaded.uninitialized(parts) == {T: {0, 1, 2}}
