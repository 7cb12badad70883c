"""StreamsGroupHeartbeat's request and response structs and the coordinator's values: the topology,
task lists, a member as a heartbeat updates it, the endpoint-to-partitions map members use for
interactive queries, and Kafka's validation of a heartbeat's fields (its INVALID_REQUEST messages)."""

from __future__ import annotations

from dataclasses import replace

from kcompat.coordinator.streams_group import StreamsGroup, StreamsMember, TaskSet
from kcompat.coordinator.streams_topology import StreamsTopology, Subtopology, TopicInfo
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types import streams_group_heartbeat as sgh

LEAVE = -1
STATIC_LEAVE = -2


def topology_of(t: sgh.Topology) -> StreamsTopology:
    def info(i: sgh.TopicInfo) -> TopicInfo:
        return TopicInfo(
            i.name, i.partitions, i.replication_factor, tuple((kv.key, kv.value) for kv in i.topic_configs)
        )

    return StreamsTopology(
        t.epoch,
        tuple(
            Subtopology(
                s.subtopology_id,
                tuple(s.source_topics),
                tuple(s.source_topic_regex),
                tuple(info(i) for i in s.state_changelog_topics),
                tuple(s.repartition_sink_topics),
                tuple(info(i) for i in s.repartition_source_topics),
                tuple(
                    (tuple(g.source_topics), tuple(g.repartition_source_topics)) for g in s.copartition_groups
                ),
            )
            for s in sorted(t.subtopologies, key=lambda s: s.subtopology_id)
        ),
    )


def tasks_of(ids: list[sgh.TaskIds] | None) -> dict[str, set[int]] | None:
    if ids is None:
        return None
    out: dict[str, set[int]] = {}
    for t in ids:
        if t.partitions:
            out.setdefault(t.subtopology_id, set()).update(t.partitions)
    return out


def task_ids(tasks: dict[str, set[int]]) -> list[sgh.TaskIds]:
    return [sgh.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


def endpoints(group: StreamsGroup) -> list[sgh.EndpointToPartitions]:
    """The partitions each member with an endpoint serves (interactive queries)."""
    out = []
    subs = {s.subtopology_id: s for s in group.topology.subtopologies} if group.topology else {}
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        if m.user_endpoint is None:
            continue

        def parts(tasks: dict[str, set[int]]) -> list[sgh.TopicPartition]:
            by_topic: dict[str, set[int]] = {}
            for s, ps in tasks.items():
                sub = subs.get(s)
                if sub is None:
                    continue
                for t in [*sub.source_topics, *(r.name for r in sub.repartition_source_topics)]:
                    by_topic.setdefault(t, set()).update(ps)
            return [sgh.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]

        out.append(
            sgh.EndpointToPartitions(
                user_endpoint=sgh.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]),
                active_partitions=parts(m.assigned.active),
                standby_partitions=parts(m.assigned.standby),
            )
        )
    return out


def _unsupported(req: sgh.StreamsGroupHeartbeatRequest) -> str | None:
    """Kafka 4.3.1's throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures: checked before
    the fields themselves. Streams 4.3.1 sends none of these (it has no static members on this
    protocol and leaves task offsets and warm-up tasks out)."""
    if req.instance_id is not None:
        return "Static membership is not yet supported."
    if req.task_offsets is not None:
        return "TaskOffsets are not supported yet."
    if req.task_end_offsets is not None:
        return "TaskEndOffsets are not supported yet."
    if req.warmup_tasks:
        return "WarmupTasks are not supported yet."
    if req.topology is not None and any(s.source_topic_regex for s in req.topology.subtopologies):
        return "Regular expressions for source topics are not supported yet."
    return None


def _blank(s: str | None) -> bool:
    return s is not None and not s.strip()


def validate(req: sgh.StreamsGroupHeartbeatRequest) -> tuple[int, str] | None:
    """Kafka 4.3.1's checks of a heartbeat's fields, in its order, with its codes and messages: the
    unsupported features first, then throwIfStreamsGroupHeartbeatRequestIsInvalid."""
    if (unsupported := _unsupported(req)) is not None:
        return E.INVALID_REQUEST, unsupported
    if (invalid := _invalid(req)) is not None:
        return E.INVALID_REQUEST, invalid
    if req.member_epoch == 0 and req.topology is not None:
        for s in req.topology.subtopologies:
            for t in s.state_changelog_topics:
                if t.partitions != 0:
                    return (
                        E.STREAMS_INVALID_TOPOLOGY,
                        f"Changelog topic {t.name} must have an undefined partition count, "
                        f"but it is set to {t.partitions}.",
                    )
    return None


def _invalid(req: sgh.StreamsGroupHeartbeatRequest) -> str | None:
    if _blank(req.member_id):
        return "MemberId can't be empty."
    if _blank(req.group_id):
        return "GroupId can't be empty."
    if _blank(req.instance_id):
        return "InstanceId can't be empty."
    if _blank(req.rack_id):
        return "RackId can't be empty."
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        # null is refused too: a join lists each task type, empty.
        for name, ids in (
            ("ActiveTasks", req.active_tasks),
            ("StandbyTasks", req.standby_tasks),
            ("WarmupTasks", req.warmup_tasks),
        ):
            if ids is None or ids:
                return f"{name} must be empty when (re-)joining."
        if req.topology is None:
            return "Topology must be non-null when (re-)joining."
        # the changelog partition check (STREAMS_INVALID_TOPOLOGY) comes after the rest, in validate
    elif req.member_epoch == STATIC_LEAVE:
        if req.instance_id is None:
            return "InstanceId can't be null."
    elif req.member_epoch < STATIC_LEAVE:
        return f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2."
    lists = (req.active_tasks, req.standby_tasks, req.warmup_tasks)
    if any(ids is not None for ids in lists) and any(ids is None for ids in lists):
        return "If one task-type is non-null, all must be non-null."
    if req.member_epoch != 0 and req.topology is not None:
        return "Topology can only be provided when (re-)joining."
    return None


def invalid_tasks(group: StreamsGroup, req: sgh.StreamsGroupHeartbeatRequest) -> str | None:
    """Kafka's check of the tasks a member says it owns against the configured topology."""
    if group.configured is None or not group.configured.ready:
        return None
    counts = group.configured.tasks
    for ids in (req.active_tasks, req.standby_tasks, req.warmup_tasks):
        for t in ids or []:
            n = counts.get(t.subtopology_id)
            if n is None:
                return f"Subtopology {t.subtopology_id} does not exist in the topology."
            for p in t.partitions:
                if not 0 <= p < n:
                    return (
                        f"Task {p} for subtopology {t.subtopology_id} is invalid. "
                        f"Number of tasks for this subtopology: {n}"
                    )
    return None


def member_metadata(m: StreamsMember) -> tuple[object, ...]:
    """What a StreamsGroupMemberMetadata record holds."""
    return (
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.rebalance_timeout_ms,
        m.topology_epoch,
        m.process_id,
        m.user_endpoint,
        sorted(m.client_tags.items()),
    )


def updated_member(
    member: StreamsMember,
    req: sgh.StreamsGroupHeartbeatRequest,
    client_id: str,
    client_host: str,
    topology: StreamsTopology | None,
) -> StreamsMember:
    """The member with what a heartbeat set (null fields mean "unchanged")."""
    owned = member.owned
    active, standby, warmup = (
        tasks_of(req.active_tasks),
        tasks_of(req.standby_tasks),
        tasks_of(req.warmup_tasks),
    )
    if active is not None or standby is not None or warmup is not None:
        base = owned or TaskSet()
        owned = TaskSet(
            active if active is not None else base.active,
            standby if standby is not None else base.standby,
            warmup if warmup is not None else base.warmup,
        )
    updated = replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        client_id=client_id or member.client_id,
        client_host=client_host or member.client_host,
        rebalance_timeout_ms=req.rebalance_timeout_ms
        if req.rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        topology_epoch=topology.epoch if topology is not None else member.topology_epoch,
        process_id=req.process_id if req.process_id is not None else member.process_id,
        user_endpoint=(req.user_endpoint.host, req.user_endpoint.port)
        if req.user_endpoint is not None
        else member.user_endpoint,
        client_tags={kv.key: kv.value for kv in req.client_tags}
        if req.client_tags is not None
        else member.client_tags,
        task_offsets=[(t.subtopology_id, t.partition, t.offset) for t in req.task_offsets]
        if req.task_offsets is not None
        else member.task_offsets,
        task_end_offsets=[(t.subtopology_id, t.partition, t.offset) for t in req.task_end_offsets]
        if req.task_end_offsets is not None
        else member.task_end_offsets,
        owned=owned,
    )
    if req.member_epoch == 0 and updated.member_epoch == STATIC_LEAVE:
        updated.member_epoch = updated.previous_member_epoch
    return updated
