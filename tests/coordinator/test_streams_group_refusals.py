"""StreamsGroupHeartbeat's refusals as Kafka 4.3.1 makes them (GroupCoordinatorService, read from
kafka-group-coordinator-4.3.1.jar): the unsupported features first (static membership, task offsets,
task end offsets, warm-up tasks, source topic regexes), then the field checks, in that order."""

from __future__ import annotations

import pytest

from kcompat.coordinator.streams_topology import summarize_topics
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types import streams_group_heartbeat as sgh

from .test_streams_group import Streams, statuses, topology

OFFSET = [sgh.TaskOffset(subtopology_id="0", partition=0, offset=5)]
WARMUP = [sgh.TaskIds(subtopology_id="0", partitions=[1])]


def regex_topology() -> sgh.Topology:
    t = topology()
    t.subtopologies[0].source_topic_regex = ["in.*"]
    return t


def changelog_with_partitions() -> sgh.Topology:
    t = topology()
    t.subtopologies[1].state_changelog_topics[0].partitions = 4
    return t


INVALID = E.INVALID_REQUEST
CASES = [
    # the unsupported features, each ahead of every later check
    ({"instance_id": "i1"}, 0, INVALID, "Static membership is not yet supported."),
    ({"instance_id": ""}, 0, INVALID, "Static membership is not yet supported."),
    ({"instance_id": "i1", "task_offsets": OFFSET}, 0, INVALID, "Static membership is not yet supported."),
    ({"instance_id": "i1"}, -2, INVALID, "Static membership is not yet supported."),
    ({"task_offsets": []}, 0, INVALID, "TaskOffsets are not supported yet."),
    ({"task_offsets": OFFSET, "task_end_offsets": OFFSET}, 0, INVALID, "TaskOffsets are not supported yet."),
    ({"task_end_offsets": OFFSET}, 1, INVALID, "TaskEndOffsets are not supported yet."),
    ({"task_end_offsets": [], "warmup_tasks": WARMUP}, 0, INVALID, "TaskEndOffsets are not supported yet."),
    ({"warmup_tasks": WARMUP}, 0, INVALID, "WarmupTasks are not supported yet."),
    ({"warmup_tasks": WARMUP, "topology": regex_topology()}, 0, INVALID, "WarmupTasks are not supported yet."),
    ({"topology": regex_topology(), "member_id": ""}, 0, INVALID,
     "Regular expressions for source topics are not supported yet."),
    # then the fields, in Kafka's order: MemberId before GroupId, blank as empty
    ({"member_id": " ", "group_id": ""}, 0, INVALID, "MemberId can't be empty."),
    ({"group_id": " "}, 0, INVALID, "GroupId can't be empty."),
    ({"rack_id": " "}, 0, INVALID, "RackId can't be empty."),
    ({"rebalance_timeout_ms": -1}, 0, INVALID, "RebalanceTimeoutMs must be provided in first request."),
    ({"active_tasks": None}, 0, INVALID, "ActiveTasks must be empty when (re-)joining."),
    ({"standby_tasks": WARMUP}, 0, INVALID, "StandbyTasks must be empty when (re-)joining."),
    ({"warmup_tasks": None}, 0, INVALID, "WarmupTasks must be empty when (re-)joining."),
    ({"topology": None}, 0, INVALID, "Topology must be non-null when (re-)joining."),
    ({"topology": changelog_with_partitions()}, 0, E.STREAMS_INVALID_TOPOLOGY,
     "Changelog topic app-counts-changelog must have an undefined partition count, but it is set to 4."),
    ({}, -2, INVALID, "InstanceId can't be null."),
    ({}, -3, INVALID, "MemberEpoch is -3, but must be greater than or equal to -2."),
    ({"active_tasks": [], "standby_tasks": []}, 1, INVALID, "If one task-type is non-null, all must be non-null."),
    ({"topology": topology()}, 1, INVALID, "Topology can only be provided when (re-)joining."),
    ({"topology": topology()}, -1, INVALID, "Topology can only be provided when (re-)joining."),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "epoch", "code", "message"), CASES)
def test_refused_as_kafka_refuses(fields: dict[str, object], epoch: int, code: int, message: str) -> None:
    s = Streams()
    member = str(fields.pop("member_id", "m1"))
    group = str(fields.pop("group_id", "app"))
    if epoch == 0:
        for k, v in (("topology", topology()), ("process_id", "p1"), ("rebalance_timeout_ms", 30_000)):
            fields.setdefault(k, v)
        for k in ("active_tasks", "standby_tasks", "warmup_tasks"):
            fields.setdefault(k, [])
    req = sgh.StreamsGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch, **fields)  # type: ignore[arg-type]
    result = s.coordinator.streams_group_heartbeat(s.now, req)
    assert result.response is not None
    r = result.response.response
    assert (r.error_code, r.error_message) == (code, message)
    assert not result.records and not result.response.create  # refused before the group is touched
    assert "app" not in s.coordinator._store.groups


def test_empty_warmup_and_empty_topology_are_accepted() -> None:
    """Kafka refuses warm-up tasks only when some are listed, and has no check of an empty
    topology: a join with no subtopologies is a group with no tasks."""
    s = Streams()
    r, _ = s.hb("m1", 0, topology=sgh.Topology(epoch=0, subtopologies=[]))
    assert r.error_code == 0 and r.member_epoch == 1 and not r.active_tasks and statuses(r) == []
    r2, _ = s.hb("m1", 1, active_tasks=[], standby_tasks=[], warmup_tasks=[])
    assert r2.error_code == 0 and r2.member_epoch == 1


@pytest.mark.parametrize(
    ("names", "text"),
    [
        ([], "<none>"),
        (["a-changelog"], "a-changelog"),
        (["a", "b", "c"], "a, b, c"),
        (["a", "b", "c", "d", "e"], "a, b, c and 2 additional topics"),
    ],
)
def test_missing_topics_are_summarized_as_kafka_does(names: list[str], text: str) -> None:
    """Kafka 4.3.1's status detail, e.g. "Internal topics are missing: app-counts-changelog" (a
    real 4.3.1 broker's answer to a raw heartbeat: no brackets)."""
    assert summarize_topics(names) == text


def test_the_missing_topic_statuses_read_as_kafkas() -> None:
    s = Streams()
    r, _ = s.hb("m1", 0)
    assert [(x.status_code, x.status_detail) for x in r.status or []] == [
        (3, "Internal topics are missing: app-counts-changelog, app-words-repartition")
    ]
    t = Streams()
    r, _ = t.hb("m1", 0, topology=topology(source="nope"))
    assert [(x.status_code, x.status_detail) for x in r.status or []] == [
        (1, "Source topics nope are missing.")
    ]
