"""KIP-848 consumer groups through Broker.handle: ConsumerGroupHeartbeat v0/v1 with the server-side
assignors, ConsumerGroupDescribe, OffsetCommit/OffsetFetch v9 with member epochs, and restarts."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.consumer_group_describe import CONSUMER_GROUP_DESCRIBE
from kcompat.wire.messages.consumer_group_heartbeat import CONSUMER_GROUP_HEARTBEAT
from kcompat.wire.messages.describe_groups import DESCRIBE_GROUPS
from kcompat.wire.messages.join_group import JOIN_GROUP
from kcompat.wire.messages.list_groups import LIST_GROUPS
from kcompat.wire.messages.offset_commit import OFFSET_COMMIT
from kcompat.wire.messages.offset_fetch import OFFSET_FETCH
from tests.server.broker_harness import HarnessFactory
from tests.server.groups_harness import GroupHarness, join_body, join_new, sync


@pytest.fixture
def h(broker_harness: HarnessFactory) -> GroupHarness:
    harness = broker_harness(kind=GroupHarness)
    harness.create_topic("t", 6)
    return harness


class Member:
    """A KIP-848 consumer as the Java client runs it: heartbeat, own what it was given, ack it."""

    def __init__(
        self, h: GroupHarness, group: str, assignor: str | None = "uniform", version: int = 1
    ) -> None:
        self.h, self.group, self.assignor, self.version = h, group, assignor, version
        self.member_id = str(uuid.uuid4()) if version >= 1 else ""
        self.epoch = 0
        self.owned: dict[uuid.UUID, list[int]] = {}

    def heartbeat(self, **override: Any) -> Any:
        body: dict[str, Any] = {"group_id": self.group, "member_id": self.member_id, "member_epoch": self.epoch,
                                "topic_partitions": [{"topic_id": t, "partitions": p} for t, p in self.owned.items()]}  # fmt: skip
        if self.epoch == 0:
            body.update(
                rebalance_timeout_ms=10_000, subscribed_topic_names=["t"], server_assignor=self.assignor
            )
        body.update(override)
        r = self.h.call(CONSUMER_GROUP_HEARTBEAT, self.version, body)
        if r.error_code == 0:
            self.member_id, self.epoch = r.member_id, r.member_epoch
            if r.assignment is not None:
                self.owned = {tp.topic_id: sorted(tp.partitions) for tp in r.assignment.topic_partitions}
        return r

    def partitions(self) -> list[int]:
        return sorted(p for ps in self.owned.values() for p in ps)


def converge(members: list[Member], rounds: int = 10) -> None:
    for _ in range(rounds):
        for m in members:
            assert m.heartbeat().error_code == 0
    owned = sorted(p for m in members for p in m.partitions())
    assert owned == list(range(6)), owned  # each partition exactly once


@pytest.mark.parametrize("assignor", ["uniform", "range", "roundrobin"])
def test_three_members_get_two_partitions_each(h: GroupHarness, assignor: str) -> None:
    members = [Member(h, "g", assignor) for _ in range(3)]
    converge(members)
    assert [len(m.partitions()) for m in members] == [2, 2, 2]
    fourth = Member(h, "g", assignor)
    converge([*members, fourth])
    assert sorted(len(m.partitions()) for m in [*members, fourth]) == [1, 1, 2, 2]
    leave = members[0].heartbeat(member_epoch=-1)
    assert (leave.error_code, leave.member_epoch) == (0, -1)
    converge([*members[1:], fourth])
    assert [len(m.partitions()) for m in [*members[1:], fourth]] == [2, 2, 2]


def test_v0_gets_a_member_id_from_the_broker(h: GroupHarness) -> None:
    m = Member(h, "g", version=0)
    r = m.heartbeat()
    assert r.error_code == 0 and r.member_id and r.member_epoch >= 1 and r.heartbeat_interval_ms == 5000


def test_bad_heartbeats(h: GroupHarness) -> None:
    m = Member(h, "g")
    converge([m])
    assert m.heartbeat(member_id="stranger").error_code == E.UNKNOWN_MEMBER_ID
    assert m.heartbeat(member_epoch=m.epoch + 7).error_code == E.FENCED_MEMBER_EPOCH
    assert Member(h, "g", "nope").heartbeat().error_code == E.UNSUPPORTED_ASSIGNOR
    r = Member(h, "g").heartbeat(member_id="")
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "MemberId can't be empty.")
    assert m.heartbeat().error_code == 0  # still a member, with its partitions
    assert m.partitions() == list(range(6))


def test_consumer_group_describe_and_the_classic_apis(h: GroupHarness) -> None:
    members = [Member(h, "g") for _ in range(2)]
    converge(members)
    classic = join_new(h, "classic")
    gen = h.call(JOIN_GROUP, 9, join_body("classic", classic)).generation_id
    sync(h, "classic", classic, gen)
    r = h.call(
        CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["g", "classic"], "include_authorized_operations": False}
    )
    g, c = r.groups
    assert [m.member_type for m in g.members] == [1, 1]  # v1 (KIP-1099): consumer members
    assert (g.error_code, g.group_state, g.assignor_name) == (0, "Stable", "uniform")
    assert sorted(m.member_id for m in g.members) == sorted(m.member_id for m in members)
    topic_id = h.broker.metadata.topic("t").topic_id
    for d in g.members:
        assert [(tp.topic_id, tp.topic_name) for tp in d.assignment.topic_partitions] == [(topic_id, "t")]
        assert len(d.assignment.topic_partitions[0].partitions) == 3
        assert d.subscribed_topic_names == ["t"] and d.client_id == "test"
    assert c.error_code == E.GROUP_ID_NOT_FOUND  # the Java Admin then falls back to DescribeGroups
    dg = h.call(DESCRIBE_GROUPS, 5, {"groups": ["g"]}).groups[0]
    assert (dg.error_code, dg.group_state) == (0, "Dead")
    dg = h.call(DESCRIBE_GROUPS, 6, {"groups": ["g"]}).groups[0]  # KIP-1043
    assert (dg.error_code, dg.error_message) == (E.GROUP_ID_NOT_FOUND, "Group g is not a classic group.")
    listed = {
        x.group_id: (x.group_type, x.group_state) for x in h.call(LIST_GROUPS, 5, {"types_filter": []}).groups
    }
    assert listed == {"g": ("consumer", "Stable"), "classic": ("classic", "Stable")}


def test_commit_and_fetch_with_member_epochs(h: GroupHarness) -> None:
    m = Member(h, "g")
    converge([m])

    def commit(epoch: int, version: int = 9, member: str | None = None) -> int:
        body = {"group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": member or m.member_id,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42}]}]}  # fmt: skip
        return int(h.call(OFFSET_COMMIT, version, body).topics[0].partitions[0].error_code)

    assert commit(m.epoch) == 0
    assert commit(m.epoch - 1) == E.STALE_MEMBER_EPOCH
    assert commit(m.epoch + 1) == E.FENCED_MEMBER_EPOCH
    assert commit(m.epoch, member="stranger") == E.UNKNOWN_MEMBER_ID
    assert commit(m.epoch, version=8) == E.UNSUPPORTED_VERSION

    def fetch(epoch: int, member: str | None) -> Any:
        body = {"groups": [{"group_id": "g", "member_id": member, "member_epoch": epoch,
                            "topics": [{"name": "t", "partition_indexes": [0]}]}]}  # fmt: skip
        return h.call(OFFSET_FETCH, 9, body).groups[0]

    got = fetch(m.epoch, m.member_id)
    assert (got.error_code, got.topics[0].partitions[0].committed_offset) == (0, 42)
    assert fetch(m.epoch - 1, m.member_id).error_code == E.STALE_MEMBER_EPOCH
    assert fetch(-1, None).topics[0].partitions[0].committed_offset == 42  # an admin's fetch


def test_members_and_epochs_survive_a_restart(h: GroupHarness) -> None:
    members = [Member(h, "g") for _ in range(3)]
    converge(members)
    before = {m.member_id: (m.epoch, m.partitions()) for m in members}
    h.restart()
    for m in members:
        r = m.heartbeat()
        assert r.error_code == 0 and r.member_epoch == before[m.member_id][0]
    assert {m.member_id: (m.epoch, m.partitions()) for m in members} == before


def test_consumer_protocol_switched_off(broker_harness: HarnessFactory) -> None:
    h = broker_harness({"group.coordinator.rebalance.protocols": "classic"}, kind=GroupHarness)
    h.create_topic("t", 6)
    r = Member(h, "g").heartbeat()
    assert r.error_code == E.UNSUPPORTED_VERSION
    assert h.call(LIST_GROUPS, 5, {"types_filter": []}).groups == []


def test_group_consumer_assignors_limits_what_members_may_pick(broker_harness: HarnessFactory) -> None:
    h = broker_harness({"group.consumer.assignors": "range"}, kind=GroupHarness)
    h.create_topic("t", 6)
    assert Member(h, "g", "uniform").heartbeat().error_code == E.UNSUPPORTED_ASSIGNOR
    assert Member(h, "g", "range").heartbeat().error_code == E.NONE
