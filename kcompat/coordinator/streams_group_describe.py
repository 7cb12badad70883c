"""StreamsGroupDescribe v0: a streams group's topology, members and their tasks.

Classic, consumer and unknown groups get GROUP_ID_NOT_FOUND, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kcompat.coordinator.streams_group import StreamsGroup, StreamsMember, TaskSet
from kcompat.coordinator.streams_topology import TopicInfo
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types import streams_group_describe as sgd

# AUTHORIZED_OPERATIONS_OMITTED (the handler fills them in when asked)
_OMITTED = -(2**31)


def _topic(t: TopicInfo, partitions: int) -> sgd.TopicInfo:
    return sgd.TopicInfo(
        name=t.name,
        partitions=partitions,
        replication_factor=t.replication_factor,
        topic_configs=[sgd.KeyValue(key=k, value=v) for k, v in t.configs],
    )


def _assignment(t: TaskSet) -> sgd.Assignment:
    def ids(tasks: dict[str, set[int]]) -> list[sgd.TaskIds]:
        return [sgd.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]

    return sgd.Assignment(
        active_tasks=ids(t.active), standby_tasks=ids(t.standby), warmup_tasks=ids(t.warmup)
    )


def _member(g: StreamsGroup, m: StreamsMember) -> sgd.Member:
    return sgd.Member(
        member_id=m.member_id,
        member_epoch=m.member_epoch,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        client_id=m.client_id,
        client_host=m.client_host,
        topology_epoch=m.topology_epoch,
        process_id=m.process_id,
        user_endpoint=None
        if m.user_endpoint is None
        else sgd.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]),
        client_tags=[sgd.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())],
        task_offsets=[sgd.TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in m.task_offsets],
        task_end_offsets=[
            sgd.TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in m.task_end_offsets
        ],
        assignment=_assignment(m.assigned),
        target_assignment=_assignment(g.target.get(m.member_id, TaskSet())),
        is_classic=False,
    )


def _topology(g: StreamsGroup) -> sgd.Topology | None:
    if g.topology is None:
        return None
    tasks = g.configured.tasks if g.configured is not None else {}
    internal = g.configured.internal if g.configured is not None else {}
    subs = []
    for s in g.topology.subtopologies:
        n = tasks.get(s.subtopology_id, 0)
        subs.append(
            sgd.Subtopology(
                subtopology_id=s.subtopology_id,
                source_topics=list(s.source_topics),
                repartition_sink_topics=list(s.repartition_sink_topics),
                state_changelog_topics=[_topic(t, n) for t in s.state_changelog_topics],
                repartition_source_topics=[
                    _topic(t, internal.get(t.name, t.partitions)) for t in s.repartition_source_topics
                ],
            )
        )
    return sgd.Topology(epoch=g.topology.epoch, subtopologies=subs)


def describe_streams_groups(
    groups: Mapping[str, object], group_ids: Sequence[str]
) -> list[sgd.DescribedGroup]:
    out = []
    for gid in group_ids:
        g = groups.get(gid)
        if not isinstance(g, StreamsGroup):
            out.append(
                sgd.DescribedGroup(
                    error_code=int(E.GROUP_ID_NOT_FOUND),
                    error_message=f"Group {gid} not found.",
                    group_id=gid,
                    group_state="Dead",
                    topology=None,
                    authorized_operations=_OMITTED,
                )
            )
            continue
        out.append(
            sgd.DescribedGroup(
                group_id=gid,
                group_state=g.state().value,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                topology=_topology(g),
                members=[_member(g, m) for _, m in sorted(g.members.items())],
                authorized_operations=_OMITTED,
            )
        )
    return out
