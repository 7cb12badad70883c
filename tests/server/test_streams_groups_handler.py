"""StreamsGroupHeartbeat and StreamsGroupDescribe through the broker: the internal topics are
created by the broker with the partition counts and configs the coordinator worked out, the
describe answer carries the topology and the members, and the console lists the group."""

from __future__ import annotations

from typing import Any

from kcompat.server.admin.console import views
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.streams_group_describe import STREAMS_GROUP_DESCRIBE
from kcompat.wire.messages.streams_group_heartbeat import STREAMS_GROUP_HEARTBEAT

from .broker_harness import HarnessFactory


def heartbeat(h: Any, epoch: int, **fields: Any) -> Any:
    body = {"group_id": "app", "member_id": "m1", "member_epoch": epoch, "topology": None,
            "user_endpoint": None, **fields}  # fmt: skip
    return h.call(STREAMS_GROUP_HEARTBEAT, 0, body)


JOIN = {
    "rebalance_timeout_ms": 30000, "process_id": "p1", "active_tasks": [], "standby_tasks": [], "warmup_tasks": [],
    "topology": {"epoch": 0, "subtopologies": [{
        "subtopology_id": "0", "source_topics": ["in"],
        "state_changelog_topics": [{"name": "app-counts-changelog",
                                    "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
    }]},
}  # fmt: skip


def test_the_broker_creates_the_internal_topics_and_describes_the_group(
    broker_harness: HarnessFactory,
) -> None:
    h = broker_harness(
        {"group.streams.initial.rebalance.delay.ms": "0", "group.streams.assignment.interval.ms": "0"}
    )
    body = {"topics": [{"name": "in", "num_partitions": 3, "replication_factor": 1}], "timeout_ms": 100}
    assert h.call(CREATE_TOPICS, 7, body).topics[0].error_code == 0
    joined = heartbeat(h, 0, **JOIN)
    assert joined.error_code == 0 and [s.status_code for s in joined.status] == [3]  # MISSING_INTERNAL_TOPICS
    changelog = h.broker.metadata.topic("app-counts-changelog")
    assert changelog is not None and changelog.partitions == 3
    assert h.broker.metadata.log_config(changelog).compact
    ready = heartbeat(h, joined.member_epoch)
    assert ready.error_code == 0 and ready.status is None
    assert [(t.subtopology_id, t.partitions) for t in ready.active_tasks] == [("0", [0, 1, 2])]
    described = h.call(STREAMS_GROUP_DESCRIBE, 0, {"group_ids": ["app", "nope"]}).groups
    assert (described[0].error_code, described[0].group_state, described[0].topology.epoch) == (
        0,
        "Stable",
        0,
    )
    assert [m.process_id for m in described[0].members] == ["p1"]
    assert described[0].topology.subtopologies[0].state_changelog_topics[0].partitions == 3
    assert described[1].error_code == 69  # GROUP_ID_NOT_FOUND
    [row] = [g for g in views.groups(h.broker) if g.group_id == "app"]
    assert (row.kind, row.state) == ("streams", "STABLE")


def test_the_first_assignment_waits_kafkas_default_initial_delay(broker_harness: HarnessFactory) -> None:
    """group.streams.initial.rebalance.delay.ms is Kafka's 3000 unless set: a new group's first
    member hears ASSIGNMENT_DELAYED (5) and gets no tasks yet."""
    h = broker_harness()
    body = {"topics": [{"name": "in", "num_partitions": 3, "replication_factor": 1}], "timeout_ms": 100}
    assert h.call(CREATE_TOPICS, 7, body).topics[0].error_code == 0
    joined = heartbeat(h, 0, **JOIN)
    assert [s.status_code for s in joined.status] == [3, 5] and joined.member_epoch == 1
    again = heartbeat(h, 1)
    assert [s.status_code for s in again.status] == [5] and not again.active_tasks


def test_a_new_target_waits_kafkas_default_assignment_interval(broker_harness: HarnessFactory) -> None:
    """group.streams.assignment.interval.ms is Kafka's 1000 unless set: the internal topics made at
    the join change the group, and the heartbeat right after hears ASSIGNMENT_DELAYED (5) for the
    interval, with no tasks yet."""
    h = broker_harness({"group.streams.initial.rebalance.delay.ms": "0"})
    body = {"topics": [{"name": "in", "num_partitions": 3, "replication_factor": 1}], "timeout_ms": 100}
    assert h.call(CREATE_TOPICS, 7, body).topics[0].error_code == 0
    joined = heartbeat(h, 0, **JOIN)
    assert [s.status_code for s in joined.status] == [3]  # MISSING_INTERNAL_TOPICS: the first target
    again = heartbeat(h, joined.member_epoch)
    assert [(s.status_code, s.status_detail) for s in again.status] == [
        (5, "Assignment delayed due to the configured assignment interval.")
    ]
    assert not again.active_tasks
