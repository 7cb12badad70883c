"""KIP-1071 streams groups' heartbeat: StreamsGroupHeartbeat v0 (StreamsGroupDescribe is in
streams_group_describe.py).

A heartbeat joins (member epoch 0, with the topology), heartbeats, or leaves (-1; a static member's
-2 keeps its tasks until its session expires). The first member's topology becomes the group's; a
member joining with another one at the same or a later epoch is refused, one at an older epoch is
told STALE_TOPOLOGY. Each heartbeat configures the topology against the topics (streams_topology.py):
internal topics still missing come back for the broker to create. When membership or the topics
changed, the group epoch is bumped and the target assignment recomputed (streams_assignor.py);
the member then moves one reconciliation step towards it (streams_group.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import partial

from kcompat.coordinator.classic_group import ClassicGroup
from kcompat.coordinator.classic_state import ClassicGroupState, GroupEvent
from kcompat.coordinator.group_store import GroupStore
from kcompat.coordinator.result import Effects, Timer
from kcompat.coordinator.streams_assignor import AssignorMember, assign
from kcompat.coordinator.streams_group import (
    StreamsGroup,
    StreamsMember,
    StreamsMemberState,
    TaskSet,
    reconcile,
)
from kcompat.coordinator.streams_group_records import (
    emit_current_assignment,
    emit_group_epoch,
    emit_member_metadata,
    emit_member_tombstones,
    emit_target,
    emit_topology,
)
from kcompat.coordinator.streams_topology import (
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    InternalTopic,
    InvalidTopology,
    StreamsTopology,
    Subtopology,
    TopicInfo,
    configure,
)
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types import streams_group_heartbeat as sgh

LEAVE = -1
STATIC_LEAVE = -2
# Kafka 4.3.1's defaults of group.streams.* and the constants it sends members.
SESSION_TIMEOUT_MS = 45_000
HEARTBEAT_INTERVAL_MS = 5000
ACCEPTABLE_RECOVERY_LAG = 10_000
TASK_OFFSET_INTERVAL_MS = 60_000


@dataclass
class StreamsHeartbeatResult:
    response: sgh.StreamsGroupHeartbeatResponse
    create: list[InternalTopic] = field(default_factory=list)  # internal topics the broker must create


def _error(code: int, message: str, member_id: str = "") -> StreamsHeartbeatResult:
    return StreamsHeartbeatResult(
        sgh.StreamsGroupHeartbeatResponse(
            error_code=int(code), error_message=message, member_id=member_id, status=None
        )
    )


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


def _tasks(ids: list[sgh.TaskIds] | None) -> dict[str, set[int]] | None:
    if ids is None:
        return None
    out: dict[str, set[int]] = {}
    for t in ids:
        if t.partitions:
            out.setdefault(t.subtopology_id, set()).update(t.partitions)
    return out


def task_ids(tasks: dict[str, set[int]]) -> list[sgh.TaskIds]:
    return [sgh.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


class StreamsGroupProtocol:
    def __init__(self, store: GroupStore) -> None:
        self.store = store

    def session_timeout_ms(self, group_id: str) -> int:
        return self.store.group_int(group_id, "streams.session.timeout.ms", SESSION_TIMEOUT_MS)

    def timers(self, g: StreamsGroup) -> Iterable[Timer]:
        for m in g.members.values():
            if m.session_deadline is not None:
                yield m.session_deadline, partial(self._fence, g, m)
            if m.rebalance_deadline is not None:
                yield m.rebalance_deadline, partial(self._fence, g, m)

    def restart_timers(self, g: StreamsGroup, now: int) -> None:
        for m in g.members.values():
            m.session_deadline = now + self.session_timeout_ms(g.group_id)

    def streams_group_heartbeat(
        self,
        out: Effects,
        now_ms: int,
        req: sgh.StreamsGroupHeartbeatRequest,
        *,
        client_id: str = "",
        client_host: str = "",
    ) -> StreamsHeartbeatResult:
        error = _validate(req)
        if error is not None:
            return _error(E.INVALID_REQUEST, error, req.member_id)
        if req.member_epoch in (LEAVE, STATIC_LEAVE):
            return self._leave(out, req)
        group = self.store.groups.get(req.group_id)
        if (
            isinstance(group, ClassicGroup)
            and req.member_epoch == 0
            and group.state is ClassicGroupState.EMPTY
        ):
            # An empty classic group (offsets only) makes way for a streams group; its offsets stay.
            group.transition(GroupEvent.DELETE, now_ms)
            del self.store.groups[req.group_id]
            group = None
        if group is None:
            if req.member_epoch != 0:
                return _error(E.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found.", req.member_id)
            group = StreamsGroup(req.group_id)
            self.store.groups[req.group_id] = group
        if not isinstance(group, StreamsGroup):
            return _error(
                E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a streams group.", req.member_id
            )
        return self._heartbeat(out, group, req, now_ms, client_id, client_host)

    def _heartbeat(
        self,
        out: Effects,
        group: StreamsGroup,
        req: sgh.StreamsGroupHeartbeatRequest,
        now: int,
        client_id: str,
        client_host: str,
    ) -> StreamsHeartbeatResult:
        statuses: list[sgh.Status] = []
        joining = req.member_epoch == 0
        topology = topology_of(req.topology) if req.topology is not None else None
        if topology is not None and group.topology is not None and topology != group.topology:
            if topology.epoch < group.topology.epoch:
                statuses.append(
                    sgh.Status(
                        status_code=STALE_TOPOLOGY,
                        status_detail=f"The member's topology epoch {topology.epoch} is behind the group's "
                        f"topology epoch {group.topology.epoch}.",
                    )
                )
            else:
                return _error(E.INVALID_REQUEST, "Topology updates are not supported yet.", req.member_id)
        found = self._member(group, req)
        if isinstance(found, StreamsHeartbeatResult):
            return found
        member, bump = found
        if group.topology is None and topology is not None:
            group.topology = topology
            emit_topology(out, group)
            bump = True
        updated = _updated(member, req, client_id, client_host, topology)
        if updated.process_id != member.process_id or updated.user_endpoint != member.user_endpoint:
            bump = True
        if bump or _metadata(updated) != _metadata(member):
            emit_member_metadata(out, group.group_id, updated)
        group.members[req.member_id] = updated
        if updated.instance_id is not None:
            group.static_members[updated.instance_id] = req.member_id
        if req.shutdown_application:
            group.shutdown_requested = True
        configured = self._configure(group, req.member_id, statuses)
        if isinstance(configured, StreamsHeartbeatResult):
            return configured
        create, changed_topics = configured
        bump = bump or changed_topics
        if bump:
            group.group_epoch += 1
            emit_group_epoch(out, group)
        if group.group_epoch > group.assignment_epoch:
            self._update_target(out, group)
        after = self._reconcile(out, group, req.member_id, now)
        if group.shutdown_requested:
            statuses.append(
                sgh.Status(
                    status_code=SHUTDOWN_APPLICATION,
                    status_detail="A KafkaStreams instance encountered a fatal error and requested a shutdown "
                    "for the entire application.",
                )
            )
        full = joining or req.active_tasks is not None
        changed = after.assigned != member.assigned or after.member_epoch != member.member_epoch
        send = full or changed
        response = sgh.StreamsGroupHeartbeatResponse(
            member_id=req.member_id,
            member_epoch=after.member_epoch,
            heartbeat_interval_ms=self.store.group_int(
                group.group_id, "streams.heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS
            ),
            acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG,
            task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
            status=statuses or None,
            active_tasks=task_ids(after.assigned.active) if send else None,
            standby_tasks=task_ids(after.assigned.standby) if send else None,
            warmup_tasks=task_ids(after.assigned.warmup) if send else None,
            endpoint_information_epoch=group.endpoint_information_epoch,
            partitions_by_user_endpoint=self._endpoints(group)
            if req.endpoint_information_epoch != group.endpoint_information_epoch
            else None,
        )
        return StreamsHeartbeatResult(response, create)

    def _member(
        self, group: StreamsGroup, req: sgh.StreamsGroupHeartbeatRequest
    ) -> tuple[StreamsMember, bool] | StreamsHeartbeatResult:
        """The member a heartbeat is from (new on a join: a group epoch bump), or the error answer."""
        joining = req.member_epoch == 0
        member = group.members.get(req.member_id)
        bump = False
        if member is None:
            if not joining:
                return _error(
                    E.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {req.group_id}.",
                    req.member_id,
                )
            if req.process_id is None:
                return _error(E.INVALID_REQUEST, "ProcessId can't be null.", req.member_id)
            member = StreamsMember(req.member_id)
            bump = True
        elif not joining:
            if req.member_epoch > member.member_epoch:
                return _error(
                    E.FENCED_MEMBER_EPOCH,
                    "The streams group member has a greater member epoch than expected.",
                    req.member_id,
                )
            if req.member_epoch < member.member_epoch and req.member_epoch != member.previous_member_epoch:
                return _error(
                    E.FENCED_MEMBER_EPOCH,
                    "The streams group member has a smaller member epoch than expected.",
                    req.member_id,
                )
        return member, bump

    def _configure(
        self, group: StreamsGroup, member_id: str, statuses: list[sgh.Status]
    ) -> tuple[list[InternalTopic], bool] | StreamsHeartbeatResult:
        """Configure the group's topology against the topics now: the internal topics to create and
        whether the configuration changed (a group epoch bump); its statuses go into `statuses`."""
        if group.topology is None:
            return [], False
        partitions = {name: n for name, (_, n) in self.store.topic_metadata().items()}
        try:
            configured = configure(group.topology, partitions)
        except InvalidTopology as e:
            return _error(E.STREAMS_INVALID_TOPOLOGY, str(e), member_id)
        # None after a load: the replayed group is taken as configured as it was (no rebalance).
        changed = group.configured is not None and configured != group.configured
        group.configured = configured
        statuses.extend(sgh.Status(status_code=c, status_detail=d) for c, d in configured.statuses)
        return configured.missing_internal, changed

    def _update_target(self, out: Effects, group: StreamsGroup) -> None:
        configured = group.configured
        tasks = configured.tasks if configured is not None and configured.ready else {}
        standby = self.store.group_int(group.group_id, "streams.num.standby.replicas", 0)
        group.target = assign(
            tasks,
            {mid: AssignorMember(m.process_id, m.assigned) for mid, m in group.members.items()},
            standby,
        )
        group.assignment_epoch = group.group_epoch
        group.endpoint_information_epoch += 1
        emit_target(out, group)

    def _reconcile(self, out: Effects, group: StreamsGroup, member_id: str, now: int) -> StreamsMember:
        before = group.members[member_id]
        after = reconcile(
            before, group.assignment_epoch, group.target.get(member_id, TaskSet()), group.active_owners()
        )
        if after is not before:
            emit_current_assignment(out, group.group_id, after)
        group.members[member_id] = after
        after.session_deadline = now + self.session_timeout_ms(group.group_id)
        if after.state is StreamsMemberState.UNREVOKED_TASKS:
            if before.state is not StreamsMemberState.UNREVOKED_TASKS:
                after.rebalance_deadline = now + max(after.rebalance_timeout_ms, 0)
        else:
            after.rebalance_deadline = None
        return after

    @staticmethod
    def _endpoints(group: StreamsGroup) -> list[sgh.EndpointToPartitions]:
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
                return [
                    sgh.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())
                ]

            out.append(
                sgh.EndpointToPartitions(
                    user_endpoint=sgh.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]),
                    active_partitions=parts(m.assigned.active),
                    standby_partitions=parts(m.assigned.standby),
                )
            )
        return out

    def _leave(self, out: Effects, req: sgh.StreamsGroupHeartbeatRequest) -> StreamsHeartbeatResult:
        group = self.store.groups.get(req.group_id)
        if not isinstance(group, StreamsGroup):
            return _error(E.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found.", req.member_id)
        member = group.members.get(req.member_id)
        if member is None:
            return _error(
                E.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
                req.member_id,
            )
        if req.member_epoch == STATIC_LEAVE:
            left = replace(member, member_epoch=STATIC_LEAVE, previous_member_epoch=member.member_epoch)
            left.rebalance_deadline = None
            group.members[member.member_id] = left
            emit_current_assignment(out, group.group_id, left)
        else:
            self._remove(out, group, member)
        return StreamsHeartbeatResult(
            sgh.StreamsGroupHeartbeatResponse(
                member_id=req.member_id, member_epoch=req.member_epoch, status=None
            )
        )

    def _fence(self, group: StreamsGroup, member: StreamsMember, out: Effects, now: int) -> None:
        if group.members.get(member.member_id) is member:
            self._remove(out, group, member)

    def _remove(self, out: Effects, group: StreamsGroup, member: StreamsMember) -> None:
        del group.members[member.member_id]
        emit_member_tombstones(out, group.group_id, member.member_id)
        group.target.pop(member.member_id, None)
        if (
            member.instance_id is not None
            and group.static_members.get(member.instance_id) == member.member_id
        ):
            del group.static_members[member.instance_id]
        if not group.members:
            group.shutdown_requested = False
        group.group_epoch += 1
        emit_group_epoch(out, group)
        self._update_target(out, group)


def _validate(req: sgh.StreamsGroupHeartbeatRequest) -> str | None:
    """Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid, its messages."""
    if not req.group_id:
        return "GroupId can't be empty."
    if not req.member_id:
        return "MemberId can't be empty."
    if req.instance_id is not None and not req.instance_id:
        return "InstanceId can't be empty."
    if req.rack_id is not None and not req.rack_id:
        return "RackId can't be empty."
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if any(t.partitions for t in req.active_tasks or []) or any(
            t.partitions for t in (req.standby_tasks or []) + (req.warmup_tasks or [])
        ):
            return "ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining."
        if req.topology is None:
            return "Topology must be non-null when (re-)joining."
        if not req.topology.subtopologies:
            return "Topology must not be empty when (re-)joining."
    elif req.member_epoch == STATIC_LEAVE:
        if req.instance_id is None:
            return "InstanceId can't be null."
    elif req.member_epoch < STATIC_LEAVE:
        return f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2."
    elif req.topology is not None:
        return "Topology can only be provided when (re-)joining."
    return None


def _metadata(m: StreamsMember) -> tuple[object, ...]:
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


def _updated(
    member: StreamsMember,
    req: sgh.StreamsGroupHeartbeatRequest,
    client_id: str,
    client_host: str,
    topology: StreamsTopology | None,
) -> StreamsMember:
    """The member with what a heartbeat set (null fields mean "unchanged")."""
    owned = member.owned
    active, standby, warmup = _tasks(req.active_tasks), _tasks(req.standby_tasks), _tasks(req.warmup_tasks)
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
