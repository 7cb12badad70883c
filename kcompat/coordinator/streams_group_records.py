"""What a streams group writes to `__consumer_offsets` and how it is rebuilt from those records
(Kafka's StreamsCoordinatorRecordHelpers and its replay): the group epoch, the topology, each
member's metadata, target and current assignment, and the tombstones when members or the group go.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kcompat.coordinator.result import Effects
from kcompat.coordinator.streams_group import StreamsGroup, StreamsMember, StreamsMemberState, Tasks, TaskSet
from kcompat.coordinator.streams_records import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
    StreamsRecordKey,
    StreamsRecordValue,
)
from kcompat.coordinator.streams_topology import StreamsTopology, Subtopology, TopicInfo


def _task_ids(tasks: Mapping[str, set[int]]) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items()) if ps]


def _tasks(ids: list[dict[str, Any]]) -> Tasks:
    return {t["subtopology_id"]: set(t["partitions"]) for t in ids if t["partitions"]}


def emit_group_epoch(out: Effects, g: StreamsGroup) -> None:
    validated = (
        g.topology.epoch if g.topology is not None and g.configured is not None and g.configured.ready else -1
    )
    out.emit(
        StreamsGroupMetadataKey(g.group_id),
        StreamsGroupMetadataValue(
            {"epoch": g.group_epoch, "metadata_hash": 0, "validated_topology_epoch": validated}
        ),
    )


def emit_topology(out: Effects, g: StreamsGroup) -> None:
    t = g.topology
    assert t is not None

    def info(i: TopicInfo) -> dict[str, Any]:
        configs = [{"key": k, "value": v} for k, v in i.configs]
        return {
            "name": i.name,
            "partitions": i.partitions,
            "replication_factor": i.replication_factor,
            "topic_configs": configs,
        }

    subs = [
        {
            "subtopology_id": s.subtopology_id,
            "source_topics": list(s.source_topics),
            "source_topic_regex": list(s.source_topic_regex),
            "state_changelog_topics": [info(i) for i in s.state_changelog_topics],
            "repartition_sink_topics": list(s.repartition_sink_topics),
            "repartition_source_topics": [info(i) for i in s.repartition_source_topics],
            "copartition_groups": [
                {"source_topics": list(src), "source_topic_regex": [], "repartition_source_topics": list(rep)}
                for src, rep in s.copartition_groups
            ],
        }
        for s in t.subtopologies
    ]
    out.emit(
        StreamsGroupTopologyKey(g.group_id),
        StreamsGroupTopologyValue({"epoch": t.epoch, "subtopologies": subs}),
    )


def emit_member_metadata(out: Effects, gid: str, m: StreamsMember) -> None:
    endpoint = None if m.user_endpoint is None else {"host": m.user_endpoint[0], "port": m.user_endpoint[1]}
    out.emit(
        StreamsGroupMemberMetadataKey(gid, m.member_id),
        StreamsGroupMemberMetadataValue(
            {
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "topology_epoch": m.topology_epoch,
                "process_id": m.process_id,
                "user_endpoint": endpoint,
                "client_tags": [{"key": k, "value": v} for k, v in sorted(m.client_tags.items())],
            }
        ),
    )


def emit_target(out: Effects, g: StreamsGroup) -> None:
    for mid, t in sorted(g.target.items()):
        out.emit(
            StreamsGroupTargetAssignmentMemberKey(g.group_id, mid),
            StreamsGroupTargetAssignmentMemberValue(
                {
                    "active_tasks": _task_ids(t.active),
                    "standby_tasks": _task_ids(t.standby),
                    "warmup_tasks": _task_ids(t.warmup),
                }
            ),
        )
    out.emit(
        StreamsGroupTargetAssignmentMetadataKey(g.group_id),
        StreamsGroupTargetAssignmentMetadataValue(
            {"assignment_epoch": g.assignment_epoch, "assignment_timestamp": g.assignment_timestamp}
        ),
    )


def emit_current_assignment(out: Effects, gid: str, m: StreamsMember) -> None:
    out.emit(
        StreamsGroupCurrentMemberAssignmentKey(gid, m.member_id),
        StreamsGroupCurrentMemberAssignmentValue(
            {
                "member_epoch": m.member_epoch,
                "previous_member_epoch": m.previous_member_epoch,
                "state": int(m.state),
                "active_tasks": _task_ids(m.assigned.active),
                "standby_tasks": _task_ids(m.assigned.standby),
                "warmup_tasks": _task_ids(m.assigned.warmup),
                "active_tasks_pending_revocation": _task_ids(m.pending_revocation),
                "standby_tasks_pending_revocation": [],
                "warmup_tasks_pending_revocation": [],
            }
        ),
    )


def emit_member_tombstones(out: Effects, gid: str, member_id: str) -> None:
    out.emit(StreamsGroupCurrentMemberAssignmentKey(gid, member_id), None)
    out.emit(StreamsGroupTargetAssignmentMemberKey(gid, member_id), None)
    out.emit(StreamsGroupMemberMetadataKey(gid, member_id), None)


def delete_streams_group_records(out: Effects, g: StreamsGroup) -> None:
    for mid in sorted(g.members):
        emit_member_tombstones(out, g.group_id, mid)
    out.emit(StreamsGroupTargetAssignmentMetadataKey(g.group_id), None)
    out.emit(StreamsGroupTopologyKey(g.group_id), None)
    out.emit(StreamsGroupMetadataKey(g.group_id), None)


def replay_streams_record(
    groups: dict[str, Any], key: StreamsRecordKey, value: StreamsRecordValue | None
) -> None:
    """Apply one record to the group it names (created by its first record, deleted by the
    metadata tombstone), as Kafka's GroupMetadataManager replays them."""
    gid = key.group_id
    g = groups.get(gid)
    if not isinstance(g, StreamsGroup):
        if value is None:
            return
        g = groups[gid] = StreamsGroup(gid)
    f = value.fields if value is not None else None
    if isinstance(key, StreamsGroupMetadataKey):
        if f is None:
            del groups[gid]
        else:
            g.group_epoch = f["epoch"]
    elif isinstance(key, StreamsGroupTopologyKey):
        g.topology = None if f is None else _topology(f)
    elif isinstance(key, StreamsGroupTargetAssignmentMetadataKey):
        g.assignment_epoch = 0 if f is None else f["assignment_epoch"]
        g.assignment_timestamp = 0 if f is None else f.get("assignment_timestamp", 0)
    elif isinstance(key, StreamsGroupTargetAssignmentMemberKey):
        if f is None:
            g.target.pop(key.member_id, None)
        else:
            g.target[key.member_id] = TaskSet(
                _tasks(f["active_tasks"]), _tasks(f["standby_tasks"]), _tasks(f["warmup_tasks"])
            )
    else:
        _replay_member(g, key, f)


def _replay_member(g: StreamsGroup, key: StreamsRecordKey, f: dict[str, Any] | None) -> None:
    mid = getattr(key, "member_id", "")
    if f is None:
        if isinstance(key, StreamsGroupMemberMetadataKey):
            old = g.members.pop(mid, None)
            if old is not None and old.instance_id is not None:
                g.static_members.pop(old.instance_id, None)
        return
    m = g.members.setdefault(mid, StreamsMember(mid))
    if isinstance(key, StreamsGroupMemberMetadataKey):
        endpoint = f["user_endpoint"]
        m.instance_id, m.rack_id = f["instance_id"], f["rack_id"]
        m.client_id, m.client_host = f["client_id"], f["client_host"]
        m.rebalance_timeout_ms, m.topology_epoch = f["rebalance_timeout_ms"], f["topology_epoch"]
        m.process_id = f["process_id"]
        m.user_endpoint = None if endpoint is None else (endpoint["host"], endpoint["port"])
        m.client_tags = {kv["key"]: kv["value"] for kv in f["client_tags"]}
        if m.instance_id is not None:
            g.static_members[m.instance_id] = mid
    else:
        m.member_epoch, m.previous_member_epoch = f["member_epoch"], f["previous_member_epoch"]
        m.state = _member_state(f["state"])
        m.assigned = TaskSet(_tasks(f["active_tasks"]), _tasks(f["standby_tasks"]), _tasks(f["warmup_tasks"]))
        m.pending_revocation = _tasks(f["active_tasks_pending_revocation"])


def _member_state(value: int) -> StreamsMemberState:
    """A record's state byte; one this version does not know (Kafka's UNKNOWN, 127) is taken as
    UNRELEASED_TASKS, the state whose next heartbeat recomputes the member from its tasks."""
    try:
        return StreamsMemberState(value)
    except ValueError:
        return StreamsMemberState.UNRELEASED_TASKS


def _topology(f: dict[str, Any]) -> StreamsTopology:
    def info(i: dict[str, Any]) -> TopicInfo:
        configs = tuple((kv["key"], kv["value"]) for kv in i["topic_configs"])
        return TopicInfo(i["name"], i["partitions"], i["replication_factor"], configs)

    return StreamsTopology(
        f["epoch"],
        tuple(
            Subtopology(
                s["subtopology_id"],
                tuple(s["source_topics"]),
                tuple(s["source_topic_regex"]),
                tuple(info(i) for i in s["state_changelog_topics"]),
                tuple(s["repartition_sink_topics"]),
                tuple(info(i) for i in s["repartition_source_topics"]),
                tuple(
                    (tuple(c["source_topics"]), tuple(c["repartition_source_topics"]))
                    for c in s["copartition_groups"]
                ),
            )
            for s in sorted(f["subtopologies"], key=lambda s: s["subtopology_id"])  # as topology_of
        ),
    )
