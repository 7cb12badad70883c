"""Share groups' services are built by the first share request (issue 31: a start with no share
state loads none of their modules), and at start when there is share state to load or share
members whose sessions must time out."""

from __future__ import annotations

import pytest

from kcompat.storage.topic_store import SHARE_GROUP_STATE
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.list_groups import LIST_GROUPS
from kcompat.wire.messages.share_group_heartbeat import SHARE_GROUP_HEARTBEAT
from tests.server.broker_harness import BrokerHarness, HarnessFactory
from tests.server.test_share_groups import heartbeat


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    props = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
             "group.share.min.session.timeout.ms": "100", "group.share.session.timeout.ms": "300"}  # fmt: skip
    harness: BrokerHarness = broker_harness(props)
    resp = harness.call(CREATE_TOPICS, 7, {"topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1,
                                                       "configs": []}], "timeout_ms": 1000})  # fmt: skip
    assert resp.topics[0].error_code == 0
    return harness


def listed(h: BrokerHarness) -> dict[str, str]:
    r = h.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert r.error_code == 0
    return {g.group_id: g.group_type for g in r.groups}


def test_the_first_share_request_builds_them(h: BrokerHarness) -> None:
    assert listed(h) == {}  # a groups request: no share group, nothing built
    assert not h.broker.share_services.built
    assert heartbeat(h, "a", 0).member_epoch == 2  # joined, its partitions' state initialized
    assert h.broker.share_services.built
    assert listed(h) == {"g": "share"}
    assert h.broker.metadata.topic(SHARE_GROUP_STATE) is not None


def test_share_state_is_loaded_at_start(h: BrokerHarness) -> None:
    assert heartbeat(h, "a", 0).member_epoch == 2
    states = dict(h.broker.share_coordinator.shard.states)
    assert states  # the two share-partitions' state
    h.restart()
    assert h.broker.share_services.built  # before any request: __share_group_state is in the log dir
    assert dict(h.broker.share_coordinator.shard.states).keys() == states.keys()
    assert heartbeat(h, "a", 2).error_code == 0


def test_share_members_replayed_at_start_are_timed_out(h: BrokerHarness) -> None:
    # A member subscribed to a topic that does not exist: no share state is written, only the
    # group's records in __consumer_offsets; its session must still time out after a restart.
    r = h.call(SHARE_GROUP_HEARTBEAT, 1, {"group_id": "g2", "member_id": "m", "member_epoch": 0,
                                          "subscribed_topic_names": ["missing"]})  # fmt: skip
    assert r.error_code == 0
    assert h.broker.metadata.topic(SHARE_GROUP_STATE) is None
    h.restart()
    assert h.broker.share_services.built  # the expiry loop runs
    assert h.broker.group_service.share_deadline_ms() is not None
    h.sleep(0.6)  # past group.share.session.timeout.ms: the expiry loop removes the member
    group = h.broker.group_service.share_group("g2")
    assert group is not None and not group.members
