"""KIP-1071 streams groups' heartbeat: StreamsGroupHeartbeat v0 (StreamsGroupDescribe is in
streams_group_describe.py).

A heartbeat joins (member epoch 0, with the topology), heartbeats, or leaves (-1; a static member's
-2 keeps its tasks until its session expires). The first member's topology becomes the group's; a
member joining with another one at the same or a later epoch is refused, one at an older epoch is
told STALE_TOPOLOGY. Each heartbeat configures the topology against the topics (streams_topology.py):
internal topics still missing come back for the broker to create. When membership or the topics
changed, the group epoch is bumped and the target assignment recomputed (streams_assignor.py);
the member then moves one reconciliation step towards it (streams_group.py). A member joining an
empty group starts streams.initial.rebalance.delay.ms: until its timer fires no target is computed
and heartbeats hear ASSIGNMENT_DELAYED, so that members starting together get one assignment. After
that a new target is computed at most once per streams.assignment.interval.ms (ASSIGNMENT_DELAYED
meanwhile, the members staying on the last target).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
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
    ASSIGNMENT_DELAYED,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    InternalTopic,
    InvalidTopology,
    StreamsHeartbeatResult,
    StreamsTopology,
    configure,
)
from kcompat.coordinator.streams_wire import (
    LEAVE,
    STATIC_LEAVE,
    endpoints,
    invalid_tasks,
    member_metadata,
    task_ids,
    topology_of,
    updated_member,
    validate,
)
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types import streams_group_heartbeat as sgh

# Kafka 4.3.1's defaults of group.streams.* and the constants it sends members.
SESSION_TIMEOUT_MS = 45_000
HEARTBEAT_INTERVAL_MS = 5000
ACCEPTABLE_RECOVERY_LAG = 10_000
TASK_OFFSET_INTERVAL_MS = 60_000


DELAYED_STATUS = sgh.Status(
    status_code=ASSIGNMENT_DELAYED,
    status_detail="Assignment delayed due to the configured initial rebalance delay.",
)
INTERVAL_STATUS = sgh.Status(
    status_code=ASSIGNMENT_DELAYED,
    status_detail="Assignment delayed due to the configured assignment interval.",
)
SHUTDOWN_STATUS = sgh.Status(
    status_code=SHUTDOWN_APPLICATION,
    status_detail="A KafkaStreams instance encountered a fatal error and requested a shutdown for the entire "
    "application.",
)


def _error(code: int, message: str, member_id: str = "") -> StreamsHeartbeatResult:
    return StreamsHeartbeatResult(
        sgh.StreamsGroupHeartbeatResponse(
            error_code=int(code), error_message=message, member_id=member_id, status=None
        )
    )


def _store_member(
    out: Effects, group: StreamsGroup, before: StreamsMember, m: StreamsMember, bump: bool
) -> bool:
    """Keep the member as the heartbeat left it; True when the group epoch must be bumped."""
    bump = bump or m.process_id != before.process_id or m.user_endpoint != before.user_endpoint
    if bump or member_metadata(m) != member_metadata(before):
        emit_member_metadata(out, group.group_id, m)
    group.members[m.member_id] = m
    if m.instance_id is not None:
        group.static_members[m.instance_id] = m.member_id
    return bump


def _check_topology(
    group: StreamsGroup, topology: StreamsTopology | None, statuses: list[sgh.Status], member_id: str
) -> StreamsHeartbeatResult | None:
    """A joining member's topology against the group's: an older one is STALE_TOPOLOGY, another one
    at the same or a later epoch is refused (Kafka 4.3 does not update a group's topology)."""
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
            return _error(E.INVALID_REQUEST, "Topology updates are not supported yet.", member_id)
    return None


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
        if g.initial_rebalance_deadline is not None:
            yield g.initial_rebalance_deadline, partial(self._initial_rebalance, g)

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
        if (refused := validate(req)) is not None:
            return _error(refused[0], refused[1], req.member_id)
        if req.member_epoch in (LEAVE, STATIC_LEAVE):
            return self._leave(out, req, now_ms)
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
        was_empty = not group.members
        topology = topology_of(req.topology) if req.topology is not None else None
        if (refused := _check_topology(group, topology, statuses, req.member_id)) is not None:
            return refused
        found = self._member(group, req)
        if isinstance(found, StreamsHeartbeatResult):
            return found
        member, bump = found
        new_topology = group.topology is None and topology is not None
        if new_topology:
            group.topology = topology
        configured = self._configure(group, req.member_id, statuses)
        if isinstance(configured, StreamsHeartbeatResult):
            if new_topology:
                group.topology = None
                if not group.members and group.group_epoch == 0:
                    del self.store.groups[group.group_id]  # made for this join only
            return configured
        create, changed_topics = configured
        bump = bump or changed_topics or new_topology
        if new_topology:
            emit_topology(out, group)
        if (invalid := invalid_tasks(group, req)) is not None:
            return _error(E.INVALID_REQUEST, invalid, req.member_id)
        updated = updated_member(member, req, client_id, client_host, topology)
        bump = _store_member(out, group, member, updated, bump)
        if req.shutdown_application:
            group.shutdown_requested = True
        if bump:
            group.group_epoch += 1
            emit_group_epoch(out, group)
        if was_empty:
            self._start_initial_delay(group, now)
        delayed = self._maybe_update_target(out, group, now, statuses)
        after = self._reconcile(out, group, req.member_id, now, delayed)
        if group.shutdown_requested:
            statuses.append(SHUTDOWN_STATUS)
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
            partitions_by_user_endpoint=endpoints(group)
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

    def _start_initial_delay(self, group: StreamsGroup, now: int) -> None:
        """A member joining an empty group: the first target waits streams.initial.rebalance.delay.ms
        so that members starting together get one assignment (Kafka schedules it if absent)."""
        delay = self.store.group_int(
            group.group_id,
            "streams.initial.rebalance.delay.ms",
            self.store.config.streams_initial_rebalance_delay_ms,
        )
        if delay > 0 and group.initial_rebalance_deadline is None:
            group.initial_rebalance_deadline = now + delay

    def _delayed(self, group: StreamsGroup, now: int) -> bool:
        deadline = group.initial_rebalance_deadline
        return deadline is not None and now < deadline

    def _maybe_update_target(
        self, out: Effects, group: StreamsGroup, now: int, statuses: list[sgh.Status]
    ) -> bool:
        """Kafka's maybeUpdateStreamsTargetAssignment: no target while the initial delay runs (True:
        the member gets no tasks) or within the assignment interval (the member keeps the last one)."""
        if self._delayed(group, now):
            statuses.append(DELAYED_STATUS)
            return True
        if group.group_epoch > group.assignment_epoch:
            if self._interval_over(group, now):
                self._update_target(out, group, now)
            else:
                statuses.append(INTERVAL_STATUS)
        return False

    def _interval_over(self, group: StreamsGroup, now: int) -> bool:
        """Kafka's canComputeNextTargetAssignment: a new target at most once per
        streams.assignment.interval.ms (group config, else the broker's). Kafka sets no timer for
        its end: the first heartbeat after it computes the target, and only heartbeats carry it."""
        interval = self.store.group_int(
            group.group_id, "streams.assignment.interval.ms", self.store.config.streams_assignment_interval_ms
        )
        last = group.assignment_timestamp
        return last == 0 or interval == 0 or now >= last + interval

    def _initial_rebalance(self, group: StreamsGroup, out: Effects, now: int) -> None:
        """The initial delay is over: the target for every member that joined meanwhile."""
        group.initial_rebalance_deadline = None
        if self.store.groups.get(group.group_id) is not group or not group.members:
            return
        if (
            group.configured is not None
            and group.group_epoch > group.assignment_epoch
            and self._interval_over(group, now)
        ):
            self._update_target(out, group, now)

    def _update_target(self, out: Effects, group: StreamsGroup, now: int) -> None:
        configured = group.configured
        tasks = configured.tasks if configured is not None and configured.ready else {}
        standby = self.store.group_int(group.group_id, "streams.num.standby.replicas", 0)
        subs = group.topology.subtopologies if group.topology is not None else ()
        group.target = assign(
            tasks,
            {mid: AssignorMember(m.process_id, m.assigned) for mid, m in group.members.items()},
            standby,
            stateful={s.subtopology_id for s in subs if s.state_changelog_topics},
        )
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp = now
        group.endpoint_information_epoch += 1
        emit_target(out, group)

    def _reconcile(
        self, out: Effects, group: StreamsGroup, member_id: str, now: int, delayed: bool
    ) -> StreamsMember:
        before = group.members[member_id]
        if delayed:
            # Kafka's answer while the initial delay runs: no tasks, at an epoch of at least 1, so
            # that the member's next heartbeats are not taken for joins (epoch 0 is a join).
            epoch, target = max(1, group.assignment_epoch), TaskSet()
        else:
            epoch, target = group.assignment_epoch, group.target.get(member_id, TaskSet())
        after = reconcile(before, epoch, target, group.active_owners())
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

    def _leave(self, out: Effects, req: sgh.StreamsGroupHeartbeatRequest, now: int) -> StreamsHeartbeatResult:
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
            self._remove(out, group, member, now)
        return StreamsHeartbeatResult(
            sgh.StreamsGroupHeartbeatResponse(
                member_id=req.member_id, member_epoch=req.member_epoch, status=None
            )
        )

    def _fence(self, group: StreamsGroup, member: StreamsMember, out: Effects, now: int) -> None:
        if group.members.get(member.member_id) is member:
            self._remove(out, group, member, now)

    def _remove(self, out: Effects, group: StreamsGroup, member: StreamsMember, now: int) -> None:
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
        if not self._delayed(group, now) and self._interval_over(group, now):
            self._update_target(out, group, now)  # else the next heartbeat computes it
