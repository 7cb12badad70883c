"""The group coordinator: classic groups, KIP-848 consumer groups and committed offsets, with no I/O.

One GroupCoordinator holds every group of a broker. Each operation takes `now_ms`, first fires any
timer that is due (so a late tick loses nothing), then does its work, and returns a
CoordinatorResult (see result.py and the package docstring). Errors are Kafka's error codes in
the responses; nothing here raises for bad client input.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from kcompat.coordinator import records as rec
from kcompat.coordinator.assignors import ASSIGNORS, MemberSubscription
from kcompat.coordinator.classic_group import ClassicGroup, ClassicMember
from kcompat.coordinator.classic_state import (
    HEARTBEAT,
    KNOWN_MEMBER_JOIN,
    SYNC,
    ClassicGroupState,
    GroupEvent,
    HeartbeatOutcome,
    KnownMemberJoinOutcome,
    SyncOutcome,
    can_rebalance,
)
from kcompat.coordinator.config import CoordinatorConfig
from kcompat.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    copy_assignment,
    is_subset,
    reconcile,
)
from kcompat.coordinator.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from kcompat.coordinator.messages import (
    ConsumerGroupDescribedGroup,
    ConsumerGroupDescribedMember,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeletableGroupResult,
    DescribedGroup,
    DescribedGroupMember,
    HeartbeatResponse,
    JoinGroupProtocol,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    ListedGroup,
    MemberIdentity,
    OffsetCommitRequestTopic,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
    OffsetFetchRequestGroup,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    SyncGroupAssignment,
    SyncGroupResponse,
    TopicPartitions,
)
from kcompat.coordinator.records import OffsetCommitValue, Record
from kcompat.coordinator.result import Completion, CoordinatorResult, TickResult
from kcompat.wire.error_codes import ErrorCode as E

T = TypeVar("T")
Group = ClassicGroup | ConsumerGroup
TopicMetadataFn = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]


class GroupCoordinator:
    """Every group of one broker. See the package docstring for how a server drives it."""

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        topic_metadata: TopicMetadataFn | None = None,
        new_uuid: Callable[[], uuid.UUID] = uuid.uuid4,
    ) -> None:
        self.config = config or CoordinatorConfig()
        # topic name -> (topic id, partition count), asked for by KIP-848 groups.
        self.topic_metadata: TopicMetadataFn = topic_metadata or dict
        self._new_uuid = new_uuid
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
        self._next_token = 1
        self._next_expiry_check: int | None = None
        self._records: list[Record] = []
        self._completions: list[Completion] = []
        self._now = 0

    # ============================================================================ plumbing
    def _begin(self, now_ms: int) -> None:
        self._records = []
        self._completions = []
        self._now = now_ms
        self._fire_due(now_ms)

    def _done(self, response: T | None = None, token: int | None = None) -> CoordinatorResult[T]:
        self._fire_due(self._now)  # what this call made due at once (a zero initial delay, say)
        completions = self._completions
        if token is not None:
            mine = [c for c in completions if c.token == token]
            if mine:  # answered within this very call
                response, token = mine[0].response, None
                completions = [c for c in completions if c.token != mine[0].token]
        result: CoordinatorResult[T] = CoordinatorResult(response, token, self._records, completions)
        self._records, self._completions = [], []
        return result

    def _token(self) -> int:
        self._next_token += 1
        return self._next_token - 1

    def _complete(self, token: int | None, response: Any) -> None:
        if token is not None:
            self._completions.append(Completion(token, response))

    def _emit(self, key: rec.RecordKey, value: rec.RecordValue | None) -> None:
        self._records.append(rec.make(key, value))

    def _member_id(self, client_id: str) -> str:
        return f"{client_id}-{self._new_uuid()}"

    # ============================================================================== timers
    def tick(self, now_ms: int) -> TickResult:
        """Fire every timer due at `now_ms`; call again at `next_deadline_ms` (None = nothing pending)."""
        self._begin(now_ms)
        out = TickResult(self._records, self._completions, self.next_deadline_ms())
        self._records, self._completions = [], []
        return out

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d, _ in self._timers()]
        return min(deadlines) if deadlines else None

    def _timers(self) -> Iterable[tuple[int, Callable[[int], None]]]:
        if self._next_expiry_check is not None:
            yield self._next_expiry_check, self._expire_offsets
        for g in self.groups.values():
            if isinstance(g, ClassicGroup):
                yield from self._classic_timers(g)
            else:
                yield from self._consumer_timers(g)

    def _classic_timers(self, g: ClassicGroup) -> Iterable[tuple[int, Callable[[int], None]]]:
        if g.join_deadline is not None:
            yield g.join_deadline, lambda now: self._on_join_timer(g, now)
        if g.sync_deadline is not None:
            yield g.sync_deadline, lambda now: self._on_sync_timeout(g, now)
        for m in g.members.values():
            if m.session_deadline is not None:
                yield m.session_deadline, partial(self._on_session_timeout, g, m)
        for mid, deadline in g.pending_members.items():
            yield deadline, partial(self._on_pending_timeout, g, mid)

    def _consumer_timers(self, g: ConsumerGroup) -> Iterable[tuple[int, Callable[[int], None]]]:
        for cm in g.members.values():
            if cm.session_deadline is not None:
                yield cm.session_deadline, partial(self._fence_consumer_member, g, cm)
            if cm.rebalance_deadline is not None:
                yield cm.rebalance_deadline, partial(self._fence_consumer_member, g, cm)

    def _fire_due(self, now_ms: int) -> None:
        if self._next_expiry_check is None:
            self._next_expiry_check = now_ms + self.config.offsets_retention_check_interval_ms
        while True:
            due = [(d, fire) for d, fire in self._timers() if d <= now_ms]
            if not due:
                return
            # The earliest first, at its own time, so that timers see the order they would have run in.
            deadline, fire = min(due, key=lambda x: x[0])
            fire(max(deadline, 0))

    # ======================================================================= classic groups
    def join_group(
        self,
        now_ms: int,
        *,
        group_id: str,
        member_id: str,
        protocol_type: str,
        protocols: Sequence[JoinGroupProtocol],
        session_timeout_ms: int,
        rebalance_timeout_ms: int = -1,
        group_instance_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        require_known_member_id: bool = True,
    ) -> CoordinatorResult[JoinGroupResponse]:
        """JoinGroup. `require_known_member_id` is true for request v4+ (answer MEMBER_ID_REQUIRED first).

        Usually deferred: the result's `token` is answered by a later call's completions once the
        join phase ends (every member rejoined, or the rebalance timeout passed).
        """
        self._begin(now_ms)
        if rebalance_timeout_ms == -1:  # v0 has no rebalance timeout: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        protocols = list(protocols)

        def fail(code: int, mid: str = member_id) -> CoordinatorResult[JoinGroupResponse]:
            return self._done(JoinGroupResponse(code, member_id=mid))

        if not group_id:
            return fail(E.INVALID_GROUP_ID)
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return fail(E.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            if group.members:
                # Kafka 4.x would convert the classic member into the consumer group (online migration).
                return fail(E.INCONSISTENT_GROUP_PROTOCOL)
            self._delete_consumer_group_records(group)
            del self.groups[group_id]
            group = None
        if group is None:
            if member_id:
                return fail(E.UNKNOWN_MEMBER_ID)
            group = ClassicGroup(group_id, current_state_timestamp=now_ms)
            self.groups[group_id] = group
        if not self._accept_joining_member(group, member_id):
            if member_id in group.members:
                self._remove_member_and_update(group, group.members[member_id], now_ms)
            return fail(E.GROUP_MAX_SIZE_REACHED, "")
        args = (group_instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
        if not member_id:
            return self._join_unknown_member(group, now_ms, require_known_member_id, *args)
        return self._join_known_member(group, now_ms, member_id, *args)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.group_max_size
        member = group.members.get(member_id)
        if group.state in (ClassicGroupState.EMPTY, ClassicGroupState.DEAD):
            return True
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join) or group.num_awaiting_join() < limit
        return member is not None or len(group.members) < limit

    def _join_unknown_member(
        self,
        group: ClassicGroup,
        now: int,
        require_known_member_id: bool,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout: int,
        session_timeout: int,
        protocol_type: str,
        protocols: list[JoinGroupProtocol],
    ) -> CoordinatorResult[JoinGroupResponse]:
        if group.state is ClassicGroupState.DEAD:
            return self._done(JoinGroupResponse(E.COORDINATOR_NOT_AVAILABLE))
        if not group.supports_protocols(protocol_type, protocols):
            return self._done(JoinGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL))
        new_id = self._member_id(client_id)
        if instance_id is not None and instance_id in group.static_members:
            return self._replace_static_member(
                group, now, instance_id, new_id, rebalance_timeout, session_timeout, protocols
            )
        if instance_id is None and require_known_member_id:
            # The client must come back with this id; until it does (or its session passes) the
            # join phase waits for it.
            group.pending_members[new_id] = now + session_timeout
            return self._done(JoinGroupResponse(E.MEMBER_ID_REQUIRED, member_id=new_id))
        member = ClassicMember(
            new_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout, protocol_type, protocols
        )
        return self._add_member_and_rebalance(group, member, now)

    def _join_known_member(
        self,
        group: ClassicGroup,
        now: int,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout: int,
        session_timeout: int,
        protocol_type: str,
        protocols: list[JoinGroupProtocol],
    ) -> CoordinatorResult[JoinGroupResponse]:
        if group.state is ClassicGroupState.DEAD:
            return self._done(JoinGroupResponse(E.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
        if not group.supports_protocols(protocol_type, protocols):
            return self._done(JoinGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            member = ClassicMember(
                member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                protocol_type, protocols,
            )
            return self._add_member_and_rebalance(group, member, now)
        error = self._validate_member(group, member_id, instance_id)
        if error:
            return self._done(JoinGroupResponse(error, member_id=member_id))
        member = group.members[member_id]
        outcome = KNOWN_MEMBER_JOIN[group.state]
        if outcome is KnownMemberJoinOutcome.WAIT:
            return self._update_member_and_rebalance(group, member, now, rebalance_timeout, session_timeout, protocols)
        assert outcome is KnownMemberJoinOutcome.REBALANCE_IF_CHANGED, outcome
        unchanged = member.matches(protocols)
        is_leader = group.leader_id == member_id
        if group.state is ClassicGroupState.STABLE:
            unchanged = unchanged and not is_leader  # a rejoining leader always gets a new generation
        if not unchanged:
            return self._update_member_and_rebalance(group, member, now, rebalance_timeout, session_timeout, protocols)
        member.session_deadline = now + member.session_timeout_ms
        return self._done(self._join_response(group, member))

    def _join_response(self, group: ClassicGroup, member: ClassicMember, skip_assignment: bool = False) -> JoinGroupResponse:
        is_leader = group.leader_id == member.member_id
        return JoinGroupResponse(
            E.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            skip_assignment=skip_assignment,
            member_id=member.member_id,
            members=group.current_members() if is_leader else [],
        )

    def _add_member_and_rebalance(self, group: ClassicGroup, member: ClassicMember, now: int) -> CoordinatorResult[JoinGroupResponse]:
        token = self._token()
        member.join_token = token
        member.is_new = True
        # New members cannot heartbeat yet, so a JoinGroup they abandon would keep them forever: Kafka
        # expires them after a fixed join timeout instead.
        member.session_deadline = now + self.config.new_member_join_timeout_ms
        if group.state is ClassicGroupState.PREPARING_REBALANCE and group.initial_delay_remaining is not None:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance_or_complete_join(group, now)
        return self._done(token=token)

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: ClassicMember,
        now: int,
        rebalance_timeout: int,
        session_timeout: int,
        protocols: list[JoinGroupProtocol],
    ) -> CoordinatorResult[JoinGroupResponse]:
        token = self._token()
        # A JoinGroup sent again supersedes the earlier one, which can no longer be answered usefully.
        self._complete(member.join_token, JoinGroupResponse(E.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        member.join_token = token
        self._maybe_prepare_rebalance_or_complete_join(group, now)
        return self._done(token=token)

    def _replace_static_member(
        self,
        group: ClassicGroup,
        now: int,
        instance_id: str,
        new_id: str,
        rebalance_timeout: int,
        session_timeout: int,
        protocols: list[JoinGroupProtocol],
    ) -> CoordinatorResult[JoinGroupResponse]:
        """A static member restarted: it takes over its old member id's place under a new id."""
        old_id = group.static_members[instance_id]
        old = group.members[old_id]
        self._complete(old.join_token, JoinGroupResponse(E.FENCED_INSTANCE_ID, member_id=old_id))
        self._complete(old.sync_token, SyncGroupResponse(E.FENCED_INSTANCE_ID))
        old.join_token = old.sync_token = None
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        member.session_deadline = now + session_timeout
        token = self._token()
        member.join_token = token
        if group.state is ClassicGroupState.STABLE:
            if group.select_protocol() == group.protocol_name:
                # Same protocol for the next generation: no rebalance, just persist the new member id.
                member.join_token = None
                self._emit_group_metadata(group)
                is_leader = group.leader_id == new_id
                return self._done(self._join_response(group, member, skip_assignment=is_leader))
            self._prepare_rebalance(group, now)
        elif group.state is ClassicGroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old id: start over so the new id gets partitions.
            self._prepare_rebalance(group, now)
        else:
            self._maybe_complete_join(group, now)
        return self._done(token=token)

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, now: int) -> None:
        if can_rebalance(group.state):
            self._prepare_rebalance(group, now)
        elif group.state is ClassicGroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now)

    def _prepare_rebalance(self, group: ClassicGroup, now: int) -> None:
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            # Members waiting in SyncGroup must rejoin; the assignment being built is void.
            for m in group.members.values():
                self._complete(m.sync_token, SyncGroupResponse(E.REBALANCE_IN_PROGRESS))
                m.sync_token = None
                m.assignment = b""
        group.sync_deadline = None
        group.pending_sync.clear()
        initial = group.state is ClassicGroupState.EMPTY
        group.transition(GroupEvent.PREPARE_REBALANCE, now)
        if initial:
            # InitialDelayedJoin: wait group.initial.rebalance.delay.ms for more members, extended by
            # that much each time one joins, within the rebalance timeout.
            delay = self.config.group_initial_rebalance_delay_ms
            group.join_deadline = now + delay
            group.initial_delay_ms = delay
            group.initial_delay_remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
        else:
            group.join_deadline = now + group.rebalance_timeout_ms()
            group.initial_delay_remaining = None
            self._maybe_complete_join(group, now)

    def _maybe_complete_join(self, group: ClassicGroup, now: int) -> None:
        if (
            group.state is ClassicGroupState.PREPARING_REBALANCE
            and group.initial_delay_remaining is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group, now)

    def _on_join_timer(self, group: ClassicGroup, now: int) -> None:
        remaining = group.initial_delay_remaining
        if remaining is not None and group.new_member_added and remaining != 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining = max(remaining - group.initial_delay_ms, 0)
            group.initial_delay_ms = delay
            group.join_deadline = now + delay
            return
        self._complete_join(group, now)

    def _complete_join(self, group: ClassicGroup, now: int) -> None:
        group.join_deadline = None
        group.initial_delay_remaining = None
        group.new_member_added = False
        if group.state is not ClassicGroupState.PREPARING_REBALANCE:
            return
        # Dynamic members that did not rejoin are gone; static ones keep their place (KIP-345).
        for m in list(group.members.values()):
            if not m.awaiting_join and m.group_instance_id is None:
                self._complete(m.sync_token, SyncGroupResponse(E.UNKNOWN_MEMBER_ID))
                group.remove(m.member_id)
        if not group.elect_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait another rebalance timeout
            # (their sessions expire meanwhile if they are gone).
            group.join_deadline = now + group.rebalance_timeout_ms()
            return
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.transition(GroupEvent.JOIN_COMPLETE_EMPTY, now)
            self._emit_group_metadata(group)
            return
        group.protocol_name = group.select_protocol()
        group.transition(GroupEvent.JOIN_COMPLETE, now)
        for m in group.members.values():
            self._complete(m.join_token, self._join_response(group, m))
            m.join_token = None
            m.is_new = False
            m.session_deadline = now + m.session_timeout_ms
            group.pending_sync.add(m.member_id)
        group.sync_deadline = now + group.rebalance_timeout_ms()

    def _on_sync_timeout(self, group: ClassicGroup, now: int) -> None:
        group.sync_deadline = None
        if group.state in (ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE) and group.pending_sync:
            for mid in list(group.pending_sync):
                m = group.members.get(mid)
                if m is not None:
                    self._complete(m.join_token, JoinGroupResponse(E.UNKNOWN_MEMBER_ID))
                    self._complete(m.sync_token, SyncGroupResponse(E.UNKNOWN_MEMBER_ID))
                    group.remove(mid)
            self._prepare_rebalance(group, now)

    def _on_session_timeout(self, group: ClassicGroup, member: ClassicMember, now: int) -> None:
        member.session_deadline = None
        if not member.is_new and (member.awaiting_join or member.sync_token is not None):
            return  # members waiting in a rebalance need not heartbeat; the rebalance has its own timeout
        self._remove_member_and_update(group, member, now)

    def _on_pending_timeout(self, group: ClassicGroup, member_id: str, now: int) -> None:
        group.pending_members.pop(member_id, None)
        self._maybe_complete_join(group, now)

    def _remove_member_and_update(self, group: ClassicGroup, member: ClassicMember, now: int) -> None:
        # A member that goes while its JoinGroup waits is told to rejoin from scratch.
        self._complete(member.join_token, JoinGroupResponse(E.UNKNOWN_MEMBER_ID))
        self._complete(member.sync_token, SyncGroupResponse(E.UNKNOWN_MEMBER_ID))
        member.join_token = member.sync_token = None
        group.remove(member.member_id)
        if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now)
        elif group.state is ClassicGroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now)
        if group.sync_deadline is not None and not group.pending_sync:
            group.sync_deadline = None

    @staticmethod
    def _validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is None:
                return E.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return E.FENCED_INSTANCE_ID
            return E.NONE
        return E.NONE if member_id in group.members else E.UNKNOWN_MEMBER_ID

    def sync_group(
        self,
        now_ms: int,
        *,
        group_id: str,
        member_id: str,
        generation_id: int,
        assignments: Sequence[SyncGroupAssignment] = (),
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> CoordinatorResult[SyncGroupResponse]:
        """SyncGroup. Followers (and a leader that syncs first) wait for the leader's assignment."""
        self._begin(now_ms)
        if not group_id:
            return self._done(SyncGroupResponse(E.INVALID_GROUP_ID))
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or not group.members:
            return self._done(SyncGroupResponse(E.UNKNOWN_MEMBER_ID))
        if group.state is ClassicGroupState.DEAD:
            return self._done(SyncGroupResponse(E.COORDINATOR_NOT_AVAILABLE))
        error = self._validate_member(group, member_id, group_instance_id)
        if error:
            return self._done(SyncGroupResponse(error))
        if generation_id != group.generation_id:
            return self._done(SyncGroupResponse(E.ILLEGAL_GENERATION))
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(protocol_name, group.protocol_name):
            return self._done(SyncGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL))
        member = group.members[member_id]
        member.session_deadline = now_ms + member.session_timeout_ms
        outcome = SYNC[group.state]
        if outcome is SyncOutcome.REJOIN:
            return self._done(SyncGroupResponse(E.REBALANCE_IN_PROGRESS))
        if outcome is SyncOutcome.CURRENT_ASSIGNMENT:
            self._synced(group, member_id)
            return self._done(self._sync_response(group, member))
        assert outcome is SyncOutcome.WAIT, outcome
        self._complete(member.sync_token, SyncGroupResponse(E.REBALANCE_IN_PROGRESS))
        token = self._token()
        member.sync_token = token
        self._synced(group, member_id)
        if group.leader_id == member_id:
            given = {a.member_id: bytes(a.assignment) for a in assignments}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")  # Kafka fills in an empty one for the rest
            self._emit_group_metadata(group)
            group.transition(GroupEvent.LEADER_SYNC, now_ms)
            for m in group.members.values():
                self._complete(m.sync_token, self._sync_response(group, m))
                m.sync_token = None
        return self._done(token=token)

    @staticmethod
    def _sync_response(group: ClassicGroup, member: ClassicMember) -> SyncGroupResponse:
        return SyncGroupResponse(E.NONE, group.protocol_type, group.protocol_name, member.assignment)

    @staticmethod
    def _synced(group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None

    def heartbeat(
        self,
        now_ms: int,
        *,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> CoordinatorResult[HeartbeatResponse]:
        self._begin(now_ms)
        if not group_id:
            return self._done(HeartbeatResponse(E.INVALID_GROUP_ID))
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            return self._done(HeartbeatResponse(E.UNKNOWN_MEMBER_ID))
        if group.state is ClassicGroupState.DEAD:
            return self._done(HeartbeatResponse(E.COORDINATOR_NOT_AVAILABLE))
        error = self._validate_member(group, member_id, group_instance_id)
        if error:
            return self._done(HeartbeatResponse(error))
        if generation_id != group.generation_id:
            return self._done(HeartbeatResponse(E.ILLEGAL_GENERATION))
        outcome = HEARTBEAT[group.state]
        if outcome is HeartbeatOutcome.UNKNOWN_MEMBER:
            return self._done(HeartbeatResponse(E.UNKNOWN_MEMBER_ID))
        member = group.members[member_id]
        member.session_deadline = now_ms + member.session_timeout_ms
        if outcome is HeartbeatOutcome.REJOIN:
            return self._done(HeartbeatResponse(E.REBALANCE_IN_PROGRESS))
        return self._done(HeartbeatResponse(E.NONE))

    def leave_group(self, now_ms: int, *, group_id: str, members: Sequence[MemberIdentity]) -> CoordinatorResult[LeaveGroupResponse]:
        """LeaveGroup; v0-2 pass their one member id as a single MemberIdentity (see `legacy_error_code`)."""
        self._begin(now_ms)
        if not group_id:
            return self._done(LeaveGroupResponse(E.INVALID_GROUP_ID))
        group = self.groups.get(group_id)
        if group is None:
            return self._done(LeaveGroupResponse(E.UNKNOWN_MEMBER_ID))
        if isinstance(group, ConsumerGroup):
            return self._done(LeaveGroupResponse(E.NONE, [
                LeaveGroupMemberResponse(m.member_id, m.group_instance_id, E.UNKNOWN_MEMBER_ID) for m in members
            ]))
        if group.state is ClassicGroupState.DEAD:
            return self._done(LeaveGroupResponse(E.COORDINATOR_NOT_AVAILABLE))
        out = []
        for ident in members:
            code = self._leave_one(group, ident, now_ms)
            out.append(LeaveGroupMemberResponse(ident.member_id, ident.group_instance_id, code))
        return self._done(LeaveGroupResponse(E.NONE, out))

    def _leave_one(self, group: ClassicGroup, ident: MemberIdentity, now: int) -> int:
        if ident.group_instance_id is None:
            if ident.member_id in group.pending_members:
                del group.pending_members[ident.member_id]
                self._maybe_complete_join(group, now)
                return E.NONE
            member = group.members.get(ident.member_id)
            if member is None:
                return E.UNKNOWN_MEMBER_ID
        else:
            existing = group.static_members.get(ident.group_instance_id)
            if existing is None:
                return E.UNKNOWN_MEMBER_ID
            if ident.member_id and ident.member_id != existing:
                return E.FENCED_INSTANCE_ID
            member = group.members[existing]
        self._remove_member_and_update(group, member, now)
        return E.NONE

    def _emit_group_metadata(self, group: ClassicGroup) -> None:
        members = tuple(
            rec.GroupMemberMetadata(
                m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
                m.metadata(group.protocol_name), m.assignment, m.rebalance_timeout_ms, m.group_instance_id,
            )
            for m in group.members.values()
        )
        value = rec.GroupMetadataValue(
            group.protocol_type or "", group.generation_id, group.protocol_name, group.leader_id,
            members, group.current_state_timestamp,
        )
        self._emit(rec.GroupMetadataKey(group.group_id), value)

    # ================================================================ describe / list / delete
    def describe_groups(self, now_ms: int, group_ids: Sequence[str]) -> CoordinatorResult[list[DescribedGroup]]:
        """DescribeGroups. Unknown groups, and KIP-848 groups, are described as Dead with no error (v0-5)."""
        self._begin(now_ms)
        out = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if not gid:
                out.append(DescribedGroup(E.INVALID_GROUP_ID, gid, ""))
                continue
            if not isinstance(group, ClassicGroup):
                out.append(DescribedGroup(E.NONE, gid, ClassicGroupState.DEAD.value))
                continue
            stable = group.state is ClassicGroupState.STABLE
            members = [
                DescribedGroupMember(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.metadata(group.protocol_name) if stable else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            ]
            out.append(DescribedGroup(
                E.NONE, gid, group.state.value, group.protocol_type or "",
                (group.protocol_name or "") if stable else "", members,
            ))
        return self._done(out)

    def list_groups(
        self, now_ms: int, *, states_filter: Sequence[str] = (), types_filter: Sequence[str] = ()
    ) -> CoordinatorResult[list[ListedGroup]]:
        """ListGroups; empty filters match everything, and both match case-insensitively (as Kafka)."""
        self._begin(now_ms)
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        out = []
        for gid, group in sorted(self.groups.items()):
            if isinstance(group, ClassicGroup):
                listed = ListedGroup(gid, group.protocol_type or "", group.state.value, "classic")
            else:
                listed = ListedGroup(gid, CONSUMER_PROTOCOL_TYPE, group.state().value, "consumer")
            if states and listed.group_state.lower() not in states:
                continue
            if types and listed.group_type not in types:
                continue
            out.append(listed)
        return self._done(out)

    def delete_groups(self, now_ms: int, group_ids: Sequence[str]) -> CoordinatorResult[list[DeletableGroupResult]]:
        self._begin(now_ms)
        out = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if not gid:
                code = E.INVALID_GROUP_ID
            elif group is None:
                code = E.GROUP_ID_NOT_FOUND
            elif isinstance(group, ClassicGroup) and group.state is ClassicGroupState.DEAD:
                code = E.GROUP_ID_NOT_FOUND
            elif isinstance(group, ClassicGroup) and group.state is not ClassicGroupState.EMPTY:
                code = E.NON_EMPTY_GROUP
            elif isinstance(group, ConsumerGroup) and group.members:
                code = E.NON_EMPTY_GROUP
            else:
                self._delete_group(group, now_ms)
                code = E.NONE
            out.append(DeletableGroupResult(gid, code))
        return self._done(out)

    def _delete_group(self, group: Group, now: int) -> None:
        gid = group.group_id
        for (topic, partition) in sorted(self.offsets.pop(gid, {})):
            self._emit(rec.OffsetCommitKey(gid, topic, partition), None)
        if isinstance(group, ClassicGroup):
            group.transition(GroupEvent.DELETE, now)
            self._emit(rec.GroupMetadataKey(gid), None)
        else:
            self._delete_consumer_group_records(group)
        del self.groups[gid]

    def _delete_consumer_group_records(self, group: ConsumerGroup) -> None:
        gid = group.group_id
        for mid in group.members:
            self._emit_member_tombstones(gid, mid)
        self._emit(rec.ConsumerGroupTargetAssignmentMetadataKey(gid), None)
        self._emit(rec.ConsumerGroupPartitionMetadataKey(gid), None)
        self._emit(rec.ConsumerGroupMetadataKey(gid), None)

    # ============================================================================== offsets
    def commit_offsets(
        self,
        now_ms: int,
        *,
        group_id: str,
        topics: Sequence[OffsetCommitRequestTopic],
        generation_id_or_member_epoch: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        retention_time_ms: int = -1,
        api_version: int = 9,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> CoordinatorResult[list[OffsetCommitResponseTopic]]:
        """OffsetCommit. Generation -1 with no member id is a "simple" commit, allowed while the group is
        Empty (or does not exist). `partition_exists` lets the server reject unknown partitions."""
        self._begin(now_ms)
        error = self._validate_commit(
            now_ms, group_id, generation_id_or_member_epoch, member_id, group_instance_id, api_version
        )
        out = []
        for topic in topics:
            parts = []
            for p in topic.partitions:
                code = error or self._commit_one(now_ms, group_id, topic.name, p, retention_time_ms, partition_exists)
                parts.append(OffsetCommitResponsePartition(p.partition_index, code))
            out.append(OffsetCommitResponseTopic(topic.name, parts))
        return self._done(out)

    def _validate_commit(
        self, now: int, group_id: str, generation: int, member_id: str, instance_id: str | None, api_version: int
    ) -> int:
        if not group_id:
            return E.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # A member of a group that does not exist: v9 says so, older versions have no such code.
                return E.GROUP_ID_NOT_FOUND if api_version >= 9 else E.ILLEGAL_GENERATION
            self.groups[group_id] = ClassicGroup(group_id, current_state_timestamp=now)
            return E.NONE
        if isinstance(group, ConsumerGroup):
            return self._validate_consumer_commit(group, member_id, generation, api_version)
        if group.state is ClassicGroupState.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state is ClassicGroupState.EMPTY:
            return E.NONE  # admin tools and consumers that only assign() commit into an empty group
        if generation >= 0 or member_id or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error:
                return error
            if generation != group.generation_id:
                return E.ILLEGAL_GENERATION
        elif group.state is not ClassicGroupState.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is not None and member.session_deadline is not None:
            member.session_deadline = now + member.session_timeout_ms  # a commit is a sign of life too
        return E.NONE

    @staticmethod
    def _validate_consumer_commit(group: ConsumerGroup, member_id: str, epoch: int, api_version: int) -> int:
        if epoch < 0 and not group.members:
            return E.NONE
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if api_version < 9:
            return E.UNSUPPORTED_VERSION  # KIP-848 members must use OffsetCommit v9+
        if epoch > member.member_epoch:
            return E.FENCED_MEMBER_EPOCH
        if epoch < member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def _commit_one(
        self,
        now: int,
        group_id: str,
        topic: str,
        p: Any,
        retention_time_ms: int,
        partition_exists: Callable[[str, int], bool] | None,
    ) -> int:
        if partition_exists is not None and not partition_exists(topic, p.partition_index):
            return E.UNKNOWN_TOPIC_OR_PARTITION
        metadata = getattr(p, "committed_metadata", "") or ""
        if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
            return E.OFFSET_METADATA_TOO_LARGE
        value = OffsetCommitValue(
            p.committed_offset, metadata, now, getattr(p, "committed_leader_epoch", -1),
            now + retention_time_ms if retention_time_ms != -1 else -1,
        )
        self.offsets.setdefault(group_id, {})[(topic, p.partition_index)] = value
        self._emit(rec.OffsetCommitKey(group_id, topic, p.partition_index), value)
        return E.NONE

    def fetch_offsets(self, now_ms: int, groups: Sequence[OffsetFetchRequestGroup]) -> CoordinatorResult[list[OffsetFetchResponseGroup]]:
        """OffsetFetch for one group (v0-7) or several (v8+). Unknown offsets come back as -1."""
        self._begin(now_ms)
        return self._done([self._fetch_group(g) for g in groups])

    def _fetch_group(self, req: OffsetFetchRequestGroup) -> OffsetFetchResponseGroup:
        if not req.group_id:
            return OffsetFetchResponseGroup(req.group_id, [], E.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup) and not (req.member_id is None and req.member_epoch < 0):
            member = group.members.get(req.member_id or "")
            if member is None:
                return OffsetFetchResponseGroup(req.group_id, [], E.UNKNOWN_MEMBER_ID)
            if req.member_epoch != member.member_epoch:
                return OffsetFetchResponseGroup(req.group_id, [], E.STALE_MEMBER_EPOCH)
        committed = self.offsets.get(req.group_id, {})
        topics: list[OffsetFetchResponseTopic] = []
        if req.topics is None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(committed):
                by_topic.setdefault(topic, []).append(partition)
            wanted = list(by_topic.items())
        else:
            wanted = [(t.name, list(t.partition_indexes)) for t in req.topics]
        for name, partitions in wanted:
            parts = []
            for p in partitions:
                v = committed.get((name, p))
                if v is None:
                    parts.append(OffsetFetchResponsePartition(p))
                else:
                    parts.append(OffsetFetchResponsePartition(p, v.offset, v.leader_epoch, v.metadata))
            topics.append(OffsetFetchResponseTopic(name, parts))
        return OffsetFetchResponseGroup(req.group_id, topics)

    def delete_offsets(self, now_ms: int, *, group_id: str, topics: Sequence[OffsetDeleteRequestTopic]) -> CoordinatorResult[OffsetDeleteResponse]:
        self._begin(now_ms)
        if not group_id:
            return self._done(OffsetDeleteResponse(E.INVALID_GROUP_ID))
        group = self.groups.get(group_id)
        if group is None:
            return self._done(OffsetDeleteResponse(E.GROUP_ID_NOT_FOUND))
        if isinstance(group, ClassicGroup):
            if group.state is ClassicGroupState.DEAD:
                return self._done(OffsetDeleteResponse(E.GROUP_ID_NOT_FOUND))
            if group.state is not ClassicGroupState.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return self._done(OffsetDeleteResponse(E.NON_EMPTY_GROUP))
        committed = self.offsets.get(group_id, {})
        out = []
        for t in topics:
            subscribed = group.is_subscribed_to(t.name)
            parts = []
            for p in t.partitions:
                if subscribed:
                    parts.append(OffsetDeleteResponsePartition(p, E.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                if committed.pop((t.name, p), None) is not None:
                    self._emit(rec.OffsetCommitKey(group_id, t.name, p), None)
                parts.append(OffsetDeleteResponsePartition(p, E.NONE))
            out.append(OffsetDeleteResponseTopic(t.name, parts))
        return self._done(OffsetDeleteResponse(E.NONE, out))

    def _expire_offsets(self, now: int) -> None:
        """Kafka's cleanupExpiredOffsets: then delete the groups left empty with no offsets."""
        self._next_expiry_check = now + self.config.offsets_retention_check_interval_ms
        retention = self.config.offsets_retention_ms
        for gid in sorted(set(self.groups) | set(self.offsets)):
            group = self.groups.get(gid)
            base = _expiry_base(group)
            committed = self.offsets.get(gid, {})
            if base is not None:
                for (topic, partition), v in sorted(committed.items()):
                    if group is not None and group.is_subscribed_to(topic):
                        continue
                    if v.expire_timestamp != -1:
                        expired = now >= v.expire_timestamp
                    else:
                        expired = now - base(v) >= retention
                    if expired:
                        del committed[(topic, partition)]
                        self._emit(rec.OffsetCommitKey(gid, topic, partition), None)
            if not committed:
                self.offsets.pop(gid, None)
                if group is not None and _is_empty(group):
                    self._delete_group(group, now)

    # =================================================================== KIP-848 consumer groups
    def consumer_group_heartbeat(
        self,
        now_ms: int,
        request: ConsumerGroupHeartbeatRequest,
        *,
        api_version: int = 1,
        client_id: str = "",
        client_host: str = "",
    ) -> CoordinatorResult[ConsumerGroupHeartbeatResponse]:
        """ConsumerGroupHeartbeat v0/v1: join (epoch 0), heartbeat (epoch > 0), leave (-1), static leave (-2)."""
        self._begin(now_ms)
        error = self._validate_heartbeat_request(request, api_version)
        if error is not None:
            return self._done(ConsumerGroupHeartbeatResponse(E.INVALID_REQUEST, error, request.member_id or None))
        if request.server_assignor is not None and request.server_assignor not in self.config.consumer_assignors:
            return self._done(ConsumerGroupHeartbeatResponse(
                E.UNSUPPORTED_ASSIGNOR, f"Assignor {request.server_assignor} is not supported.", request.member_id
            ))
        if request.subscribed_topic_regex is not None:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as e:
                return self._done(ConsumerGroupHeartbeatResponse(E.INVALID_REGULAR_EXPRESSION, str(e), request.member_id))
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._done(self._consumer_leave(request, now_ms))
        return self._done(self._consumer_heartbeat(request, now_ms, client_id, client_host))

    @staticmethod
    def _validate_heartbeat_request(req: ConsumerGroupHeartbeatRequest, api_version: int) -> str | None:
        if not req.group_id:
            return "GroupId can't be empty."
        if req.instance_id is not None and not req.instance_id:
            return "InstanceId can't be empty."
        if req.rack_id is not None and not req.rack_id:
            return "RackId can't be empty."
        if req.member_epoch > 0 or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH or api_version >= 1:
            if not req.member_id:
                return "MemberId can't be empty."
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if req.topic_partitions is None or any(tp.partitions for tp in req.topic_partitions):
                return "TopicPartitions must be empty when (re-)joining."
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                return "InstanceId can't be null."
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return f"MemberEpoch {req.member_epoch} is invalid."
        return None

    def _consumer_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, now: int, client_id: str, client_host: str
    ) -> ConsumerGroupHeartbeatResponse:
        def error(code: int, message: str) -> ConsumerGroupHeartbeatResponse:
            return ConsumerGroupHeartbeatResponse(code, message, req.member_id)

        group = self.groups.get(req.group_id)
        joining = req.member_epoch == 0
        if isinstance(group, ClassicGroup):
            if joining and group.state is ClassicGroupState.EMPTY:
                self._delete_classic_for_consumer(group, now)
                group = None
            else:
                # Kafka 4.x would upgrade a non-empty classic group online; that is not done here.
                return error(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        if group is None:
            if not joining:
                return error(E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
            group = ConsumerGroup(req.group_id)
            self.groups[req.group_id] = group
        member_id = req.member_id or str(self._new_uuid())  # v0 joins may leave the id to the broker
        owned = _owned(req.topic_partitions)
        member = group.members.get(member_id)
        bump = False
        if req.instance_id is not None:
            static_id = group.static_members.get(req.instance_id)
            if static_id is not None and static_id != member_id:
                old = group.members[static_id]
                if not joining:
                    return error(E.FENCED_INSTANCE_ID, f"Instance {req.instance_id} is held by another member.")
                if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    return error(E.UNRELEASED_INSTANCE_ID, f"Instance {req.instance_id} is still in use.")
                member = self._take_over_static_member(group, old, member_id)
            elif static_id is None and member is None and not joining:
                return error(E.UNKNOWN_MEMBER_ID, f"Instance {req.instance_id} is unknown.")
        if member is None:
            if not joining:
                return error(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {req.group_id}.")
            if len(group.members) >= self.config.consumer_max_size:
                return error(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of {self.config.consumer_max_size} members.")
            member = ConsumerMember(member_id)
            bump = True
        elif not joining:
            if req.member_epoch > member.member_epoch:
                return error(E.FENCED_MEMBER_EPOCH, "The consumer group member has a greater member epoch than expected.")
            if req.member_epoch < member.member_epoch and not (
                req.member_epoch == member.previous_member_epoch and owned is not None and is_subset(owned, member.assigned)
            ):
                return error(E.FENCED_MEMBER_EPOCH, "The consumer group member has a smaller member epoch than expected.")

        # Apply what the heartbeat changed (null fields mean "unchanged").
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=client_id or member.client_id,
            client_host=client_host or member.client_host,
            subscribed_topic_names=(
                tuple(sorted(set(req.subscribed_topic_names)))
                if req.subscribed_topic_names is not None else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (req.subscribed_topic_regex or None) if req.subscribed_topic_regex is not None else member.subscribed_topic_regex
            ),
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
        )
        if joining and updated.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            updated.member_epoch = updated.previous_member_epoch  # back from a static leave
        if _subscription(updated) != _subscription(member) or updated.server_assignor != member.server_assignor:
            bump = True
        if bump or _member_record_fields(updated) != _member_record_fields(member):
            self._emit_member_metadata(group.group_id, updated)
        group.members[member_id] = updated
        if updated.instance_id is not None:
            group.static_members[updated.instance_id] = member_id
        if self._refresh_subscription_metadata(group):
            bump = True
        if bump:
            group.group_epoch += 1
            self._emit(rec.ConsumerGroupMetadataKey(group.group_id), rec.ConsumerGroupMetadataValue(group.group_epoch))
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group)

        before = group.members[member_id]
        after = reconcile(before, group.assignment_epoch, group.target.get(member_id, {}), group.owner_epochs(), owned)
        if after is not before:
            group.members[member_id] = after
            self._emit_current_assignment(group.group_id, after)
        after.session_deadline = now + self.config.consumer_session_timeout_ms
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if before.state is not MemberState.UNREVOKED_PARTITIONS or after.member_epoch != before.member_epoch:
                after.rebalance_deadline = now + max(after.rebalance_timeout_ms, 0)
        else:
            after.rebalance_deadline = None

        full_request = (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        send_assignment = joining or full_request or after.assigned != member.assigned
        return ConsumerGroupHeartbeatResponse(
            E.NONE,
            None,
            member_id,
            after.member_epoch,
            self.config.consumer_heartbeat_interval_ms,
            _topic_partitions(after.assigned) if send_assignment else None,
        )

    def _take_over_static_member(self, group: ConsumerGroup, old: ConsumerMember, new_id: str) -> ConsumerMember:
        """A restarted static member inherits its predecessor's epoch and assignment (KIP-848)."""
        gid = group.group_id
        del group.members[old.member_id]
        target = group.target.pop(old.member_id, {})
        self._emit_member_tombstones(gid, old.member_id)
        member = replace(old, member_id=new_id, member_epoch=old.previous_member_epoch)
        group.members[new_id] = member
        group.target[new_id] = target
        self._emit_member_metadata(gid, member)
        self._emit(rec.ConsumerGroupTargetAssignmentMemberKey(gid, new_id),
                   rec.ConsumerGroupTargetAssignmentMemberValue(rec.topic_id_partitions(target)))
        self._emit_current_assignment(gid, member)
        return member

    def _consumer_leave(self, req: ConsumerGroupHeartbeatRequest, now: int) -> ConsumerGroupHeartbeatResponse:
        group = self.groups.get(req.group_id)
        if not isinstance(group, ConsumerGroup):
            return ConsumerGroupHeartbeatResponse(
                E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.", req.member_id
            )
        if req.instance_id is not None:
            member_id = group.static_members.get(req.instance_id)
            if member_id is None:
                return ConsumerGroupHeartbeatResponse(E.UNKNOWN_MEMBER_ID, f"Instance {req.instance_id} is unknown.", req.member_id)
            if member_id != req.member_id:
                return ConsumerGroupHeartbeatResponse(E.FENCED_INSTANCE_ID, f"Instance {req.instance_id} is held by another member.", req.member_id)
        member = group.members.get(req.member_id)
        if member is None:
            return ConsumerGroupHeartbeatResponse(
                E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}.", req.member_id
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A static member going away for a while keeps its partitions until its session expires.
            left = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, previous_member_epoch=member.member_epoch)
            left.rebalance_deadline = None
            group.members[member.member_id] = left
            self._emit_current_assignment(group.group_id, left)
        else:
            self._remove_consumer_member(group, member)
        return ConsumerGroupHeartbeatResponse(E.NONE, None, req.member_id, req.member_epoch, 0)

    def _fence_consumer_member(self, group: ConsumerGroup, member: ConsumerMember, now: int) -> None:
        if group.members.get(member.member_id) is member:
            self._remove_consumer_member(group, member)

    def _remove_consumer_member(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        gid = group.group_id
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if member.instance_id is not None and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]
        self._emit_member_tombstones(gid, member.member_id)
        self._refresh_subscription_metadata(group)
        group.group_epoch += 1
        self._emit(rec.ConsumerGroupMetadataKey(gid), rec.ConsumerGroupMetadataValue(group.group_epoch))
        self._update_target_assignment(group)

    def _emit_member_tombstones(self, gid: str, member_id: str) -> None:
        self._emit(rec.ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), None)
        self._emit(rec.ConsumerGroupTargetAssignmentMemberKey(gid, member_id), None)
        self._emit(rec.ConsumerGroupMemberMetadataKey(gid, member_id), None)

    def _emit_member_metadata(self, gid: str, m: ConsumerMember) -> None:
        self._emit(rec.ConsumerGroupMemberMetadataKey(gid, m.member_id), rec.ConsumerGroupMemberMetadataValue(
            m.client_id, m.client_host, m.subscribed_topic_names, m.instance_id, m.rack_id,
            m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor,
        ))

    def _emit_current_assignment(self, gid: str, m: ConsumerMember) -> None:
        self._emit(rec.ConsumerGroupCurrentMemberAssignmentKey(gid, m.member_id), rec.ConsumerGroupCurrentMemberAssignmentValue(
            m.member_epoch, m.previous_member_epoch, int(m.state),
            rec.topic_id_partitions(m.assigned), rec.topic_id_partitions(m.pending_revocation),
        ))

    def _refresh_subscription_metadata(self, group: ConsumerGroup) -> bool:
        """Resolve regexes and look the subscribed topics up; True (and a record) when that changed."""
        metadata = self.topic_metadata()
        group.resolved_regex = {
            m.subscribed_topic_regex: frozenset(t for t in metadata if re.fullmatch(m.subscribed_topic_regex, t))
            for m in group.members.values()
            if m.subscribed_topic_regex is not None
        }
        fresh = {t: metadata[t] for t in sorted(group.subscribed_topic_names()) if t in metadata}
        if fresh == group.subscription_metadata:
            return False
        group.subscription_metadata = fresh
        self._emit(rec.ConsumerGroupPartitionMetadataKey(group.group_id), rec.ConsumerGroupPartitionMetadataValue(
            tuple(rec.TopicMetadata(tid, name, n) for name, (tid, n) in fresh.items())
        ))
        return True

    def _update_target_assignment(self, group: ConsumerGroup) -> None:
        gid = group.group_id
        names = {tid: name for name, (tid, _) in group.subscription_metadata.items()}
        ids = {name: tid for name, (tid, _) in group.subscription_metadata.items()}
        counts = {name: n for name, (_, n) in group.subscription_metadata.items()}
        assignor = ASSIGNORS[group.preferred_assignor(self.config.consumer_assignors[0])]
        subscriptions = {
            mid: MemberSubscription(
                frozenset(group.member_topics(m)),
                {names[t]: frozenset(ps) for t, ps in group.target.get(mid, {}).items() if t in names},
                m.rack_id,
            )
            for mid, m in group.members.items()
        }
        result = assignor(subscriptions, counts)
        for mid, by_name in result.items():
            target: Assignment = {ids[name]: set(ps) for name, ps in by_name.items() if ps}
            if target != group.target.get(mid):
                group.target[mid] = target
                self._emit(rec.ConsumerGroupTargetAssignmentMemberKey(gid, mid),
                           rec.ConsumerGroupTargetAssignmentMemberValue(rec.topic_id_partitions(target)))
        group.assignment_epoch = group.group_epoch
        self._emit(rec.ConsumerGroupTargetAssignmentMetadataKey(gid),
                   rec.ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch))

    def _delete_classic_for_consumer(self, group: ClassicGroup, now: int) -> None:
        """An empty classic group makes way for a consumer group of the same id (its offsets stay)."""
        group.transition(GroupEvent.DELETE, now)
        if not group.is_simple():
            self._emit(rec.GroupMetadataKey(group.group_id), None)
        del self.groups[group.group_id]

    def consumer_group_describe(self, now_ms: int, group_ids: Sequence[str]) -> CoordinatorResult[list[ConsumerGroupDescribedGroup]]:
        """ConsumerGroupDescribe; classic and unknown groups get GROUP_ID_NOT_FOUND (Admin then falls back)."""
        self._begin(now_ms)
        out = []
        names = {tid: name for name, (tid, _) in self.topic_metadata().items()}
        for gid in group_ids:
            group = self.groups.get(gid)
            if not isinstance(group, ConsumerGroup):
                out.append(ConsumerGroupDescribedGroup(E.GROUP_ID_NOT_FOUND, gid, f"Group {gid} not found."))
                continue
            members = [
                ConsumerGroupDescribedMember(
                    m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                    list(m.subscribed_topic_names), m.subscribed_topic_regex,
                    _topic_partitions(m.assigned, names), _topic_partitions(group.target.get(m.member_id, {}), names),
                )
                for m in group.members.values()
            ]
            out.append(ConsumerGroupDescribedGroup(
                E.NONE, gid, None, group.state().value, group.group_epoch, group.assignment_epoch,
                group.preferred_assignor(self.config.consumer_assignors[0]), members,
            ))
        return self._done(out)

    # ================================================================================ replay
    def load(self, records: Iterable[tuple[bytes, bytes | None]], now_ms: int) -> None:
        """Rebuild every group and offset from `__consumer_offsets` records, oldest first.

        Later records win and tombstones delete, so replaying a compacted or uncompacted log gives the
        same state. Members' session timers start afresh at `now_ms`, as in Kafka after a reload.
        Raises DecodeError on a corrupt record.
        """
        for raw in records:
            decoded = rec.decode((raw[0], raw[1]))
            if decoded is not None:
                self._replay(decoded.key, decoded.value, now_ms)
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                for cm in group.members.values():
                    cm.session_deadline = now_ms + cm.session_timeout_ms
            else:
                for m in group.members.values():
                    m.session_deadline = now_ms + self.config.consumer_session_timeout_ms
                group.resolved_regex = {}
        self._next_expiry_check = now_ms + self.config.offsets_retention_check_interval_ms

    def _replay(self, key: rec.RecordKey, value: rec.RecordValue | None, now: int) -> None:
        gid = rec.group_of(key)
        if isinstance(key, rec.OffsetCommitKey):
            if value is None:
                committed = self.offsets.get(gid, {})
                committed.pop((key.topic, key.partition), None)
                if not committed:
                    self.offsets.pop(gid, None)
            else:
                assert isinstance(value, OffsetCommitValue)
                self.offsets.setdefault(gid, {})[(key.topic, key.partition)] = value
                if gid not in self.groups:
                    self.groups[gid] = ClassicGroup(gid, current_state_timestamp=now)
            return
        if isinstance(key, rec.GroupMetadataKey):
            if value is None:
                if isinstance(self.groups.get(gid), ClassicGroup):
                    del self.groups[gid]
                return
            assert isinstance(value, rec.GroupMetadataValue)
            self.groups[gid] = _classic_from_record(gid, value)
            return
        group = self.groups.get(gid)
        if isinstance(key, rec.ConsumerGroupMetadataKey) and value is None:
            if isinstance(group, ConsumerGroup):
                del self.groups[gid]
            return
        if not isinstance(group, ConsumerGroup):
            if value is None:
                return
            group = ConsumerGroup(gid)
            self.groups[gid] = group
        _replay_consumer(group, key, value)


def _inconsistent(given: str | None, expected: str | None) -> bool:
    return given is not None and expected is not None and given != expected


def _is_empty(group: Group) -> bool:
    if isinstance(group, ClassicGroup):
        return group.state is ClassicGroupState.EMPTY and not group.pending_members
    return not group.members


def _expiry_base(group: Group | None) -> Callable[[OffsetCommitValue], int] | None:
    """From when an offset's retention counts (Kafka's offsetExpirationCondition); None = never expires."""
    if isinstance(group, ConsumerGroup) or group is None:
        return lambda v: v.commit_timestamp
    if group.protocol_type is None:
        return lambda v: v.commit_timestamp  # a "simple" group: from each commit
    if group.state is ClassicGroupState.EMPTY:
        ts = group.current_state_timestamp
        return (lambda v: ts) if ts != -1 else (lambda v: v.commit_timestamp)
    if (
        group.state is ClassicGroupState.STABLE
        and group.protocol_type == CONSUMER_PROTOCOL_TYPE
        and group.subscribed_topics() is not None
    ):
        return lambda v: v.commit_timestamp  # only topics no member subscribes to
    return None


def _owned(tps: Sequence[TopicPartitions] | None) -> dict[uuid.UUID, set[int]] | None:
    if tps is None:
        return None
    out: dict[uuid.UUID, set[int]] = {}
    for tp in tps:
        if tp.partitions:
            out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return out


def _topic_partitions(a: Mapping[uuid.UUID, set[int]], names: Mapping[uuid.UUID, str] | None = None) -> list[TopicPartitions]:
    return [
        TopicPartitions(t, sorted(ps), (names or {}).get(t, ""))
        for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))
        if ps
    ]


def _subscription(m: ConsumerMember) -> tuple[tuple[str, ...], str | None]:
    return m.subscribed_topic_names, m.subscribed_topic_regex


def _member_record_fields(m: ConsumerMember) -> tuple[Any, ...]:
    return (m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names,
            m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor)


def _classic_from_record(gid: str, v: rec.GroupMetadataValue) -> ClassicGroup:
    group = ClassicGroup(
        gid,
        state=ClassicGroupState.STABLE if v.members else ClassicGroupState.EMPTY,
        generation_id=v.generation,
        protocol_type=v.protocol_type or None,
        protocol_name=v.protocol,
        leader_id=v.leader,
        current_state_timestamp=v.current_state_timestamp,
    )
    for m in v.members:
        member = ClassicMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.rebalance_timeout if m.rebalance_timeout != -1 else m.session_timeout, m.session_timeout,
            v.protocol_type, [JoinGroupProtocol(v.protocol or "", m.subscription)], m.assignment,
        )
        group.members[m.member_id] = member
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    return group


def _replay_consumer(group: ConsumerGroup, key: rec.RecordKey, value: rec.RecordValue | None) -> None:
    if isinstance(key, rec.ConsumerGroupMetadataKey):
        assert isinstance(value, rec.ConsumerGroupMetadataValue)
        group.group_epoch = value.epoch
    elif isinstance(key, rec.ConsumerGroupPartitionMetadataKey):
        group.subscription_metadata = {} if value is None else {
            t.topic_name: (t.topic_id, t.num_partitions)
            for t in value.topics  # type: ignore[union-attr]
        }
    elif isinstance(key, rec.ConsumerGroupTargetAssignmentMetadataKey):
        group.assignment_epoch = 0 if value is None else value.assignment_epoch  # type: ignore[union-attr]
    elif isinstance(key, rec.ConsumerGroupTargetAssignmentMemberKey):
        if value is None:
            group.target.pop(key.member_id, None)
        else:
            assert isinstance(value, rec.ConsumerGroupTargetAssignmentMemberValue)
            group.target[key.member_id] = {t: set(ps) for t, ps in value.topic_partitions}
    elif isinstance(key, rec.ConsumerGroupMemberMetadataKey):
        if value is None:
            m = group.members.pop(key.member_id, None)
            if m is not None and m.instance_id is not None and group.static_members.get(m.instance_id) == m.member_id:
                del group.static_members[m.instance_id]
            return
        assert isinstance(value, rec.ConsumerGroupMemberMetadataValue)
        old = group.members.get(key.member_id) or ConsumerMember(key.member_id)
        group.members[key.member_id] = replace(
            old, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, subscribed_topic_names=value.subscribed_topic_names,
            subscribed_topic_regex=value.subscribed_topic_regex, rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
        )
        if value.instance_id is not None:
            group.static_members[value.instance_id] = key.member_id
    elif isinstance(key, rec.ConsumerGroupCurrentMemberAssignmentKey):
        if value is None:
            return  # the member itself goes with its metadata tombstone
        assert isinstance(value, rec.ConsumerGroupCurrentMemberAssignmentValue)
        old = group.members.get(key.member_id) or ConsumerMember(key.member_id)
        group.members[key.member_id] = replace(
            old, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
            state=MemberState(value.state),
            assigned={t: set(ps) for t, ps in value.assigned_partitions},
            pending_revocation={t: set(ps) for t, ps in value.partitions_pending_revocation},
        )


__all__ = ["GroupCoordinator", "copy_assignment"]
