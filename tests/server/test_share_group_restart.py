"""A share group's own records on a single node: written to __consumer_offsets as the group changes,
replayed at start-up (the group epoch, members' epochs and assignments survive a restart, a member
heartbeating with its epoch continues), and DeleteGroups leaves tombstones behind."""

from __future__ import annotations

import kcompat.coordinator.share.share_group_records as sr
from kcompat.storage.topic_store import CONSUMER_OFFSETS
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.alter_share_group_offsets import ALTER_SHARE_GROUP_OFFSETS
from kcompat.wire.messages.delete_groups import DELETE_GROUPS
from kcompat.wire.messages.delete_share_group_offsets import DELETE_SHARE_GROUP_OFFSETS
from kcompat.wire.messages.share_group_describe import SHARE_GROUP_DESCRIBE
from tests.server.broker_harness import BrokerHarness
from tests.server.test_share_groups import acquired, h, heartbeat, overrides, produce, share_fetch, tid

__all__ = ["h"]  # the fixture


def share_records(h: BrokerHarness) -> list[tuple[type, bool]]:
    """(key class, tombstone?) of every share group record in __consumer_offsets, oldest first."""
    pairs = h.broker.group_service.offsets_topic.read_all()
    out = []
    for pair in pairs:
        decoded = sr.decode(pair)
        if decoded is not None:
            out.append((type(decoded[0]), decoded[1] is None))
    return out


def test_the_group_and_its_members_epochs_survive_a_restart(h: BrokerHarness) -> None:
    assert heartbeat(h, "a", 0).member_epoch == 2  # joined (1), its partitions initialized (2)
    assert heartbeat(h, "b", 0).member_epoch == 3
    assert heartbeat(h, "a", 2).member_epoch == 3  # a's target shrank when b joined
    g = h.broker.share_service.group("g")
    assert g is not None and g.initialized == {tid(h): {0, 1}}
    assignments = {m: sorted(x.assignment[tid(h)]) for m, x in g.members.items()}
    h.restart()
    g = h.broker.share_service.group("g")
    assert g is not None and (g.group_epoch, g.assignment_epoch) == (3, 3)
    assert {m: sorted(x.assignment[tid(h)]) for m, x in g.members.items()} == assignments
    # the members go on with their epochs: no UNKNOWN_MEMBER_ID, no new epoch, no new assignment
    for member in ("a", "b"):
        r = heartbeat(h, member, 3)
        assert (r.error_code, r.member_epoch, r.assignment) == (0, 3, None)
    d = h.call(SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["g"], "include_authorized_operations": False})
    assert d.groups[0].group_epoch == 3 and d.groups[0].assignment_epoch == 3
    assert {m.member_id: m.member_epoch for m in d.groups[0].members} == {"a": 3, "b": 3}
    assert d.groups[0].members[0].client_id == "test" and d.groups[0].members[0].subscribed_topic_names == [
        "t"
    ]
    # a member that left before the restart stays gone
    assert heartbeat(h, "b", -1).member_epoch == -1
    h.restart()
    g = h.broker.share_service.group("g")
    assert g is not None and set(g.members) == {"a"} and g.group_epoch == 4
    assert heartbeat(h, "a", 3).member_epoch == 4  # the epoch b's leave made
    assert heartbeat(h, "b", 3).error_code == E.UNKNOWN_MEMBER_ID


def test_delete_groups_writes_tombstones_and_the_group_stays_deleted(h: BrokerHarness) -> None:
    overrides(h, {"share.auto.offset.reset": "earliest"})
    produce(h, b"x")
    heartbeat(h, "a", 0)
    assert acquired(share_fetch(h, "a", 0)) == [(0, 0, 1)]
    heartbeat(h, "a", -1)
    r = h.call(DELETE_GROUPS, 2, {"groups_names": ["g"]})
    assert [x.error_code for x in r.results] == [0]
    written = share_records(h)
    tombstones = [k.__name__ for k, dead in written[-3:] if dead]
    assert tombstones == [
        "ShareGroupTargetAssignmentMetadataKey",
        "ShareGroupStatePartitionMetadataKey",
        "ShareGroupMetadataKey",
    ]
    # before the tombstones: the topics written as deleting
    assert (sr.t.ShareGroupStatePartitionMetadataKey, False) in written[:-3]
    h.restart()
    assert h.broker.share_service.group("g") is None
    assert h.broker.metadata.topic(CONSUMER_OFFSETS) is not None


def test_alter_and_delete_offsets_are_written_as_the_groups_initialized_partitions(h: BrokerHarness) -> None:
    r = h.call(ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 1, "start_offset": 0}]}]})  # fmt: skip
    assert r.error_code == 0
    h.restart()
    g = h.broker.share_service.group("g")
    assert g is not None and g.initialized == {tid(h): {1}}  # from the group's records
    r = h.call(DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": [{"topic_name": "t"}]})
    assert r.error_code == 0 and [t.error_code for t in r.responses] == [0]
    h.restart()
    g = h.broker.share_service.group("g")
    assert g is not None and g.initialized == {}
    # the next member's partitions are initialized again before they are assigned
    a = heartbeat(h, "a", 0)
    assert sorted(a.assignment.topic_partitions[0].partitions) == [0, 1]
    assert h.broker.share_service.group("g").initialized == {tid(h): {0, 1}}  # type: ignore[union-attr]
