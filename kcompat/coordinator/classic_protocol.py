"""The classic group protocol's requests: JoinGroup v0-9, SyncGroup v0-5, Heartbeat v0-4, LeaveGroup v0-5.

Each validates the group, member and generation, then acts as classic_state.py's tables say for the
group's state, starting or completing a rebalance through classic_rebalance.py. JoinGroup and
SyncGroup are usually answered later: they return Deferred(token), and the call that ends the wait
puts the answer in its Effects under that token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from kcompat.coordinator.classic_group import ClassicGroup, ClassicMember
from kcompat.coordinator.classic_rebalance import ClassicRebalance
from kcompat.coordinator.classic_state import (
    HEARTBEAT,
    KNOWN_MEMBER_JOIN,
    SYNC,
    ClassicGroupState,
    GroupEvent,
    HeartbeatOutcome,
    KnownMemberJoinOutcome,
    SyncOutcome,
)
from kcompat.coordinator.consumer_group import ConsumerGroup
from kcompat.coordinator.consumer_group_records import delete_consumer_group_records
from kcompat.coordinator.group_store import GroupStore
from kcompat.coordinator.messages import (
    JoinGroupProtocol,
    JoinGroupResult,
    LeaveGroupMemberResult,
    LeaveGroupResult,
    MemberIdentity,
    SyncGroupAssignment,
)
from kcompat.coordinator.result import Deferred, Effects
from kcompat.coordinator.streams_group import StreamsGroup
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types.heartbeat import HeartbeatResponse
from kcompat.wire.types.sync_group import SyncGroupResponse


class Joiner(NamedTuple):
    """What a JoinGroup says of the member joining, as a new or rejoining member takes it."""

    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    protocol_type: str
    protocols: list[JoinGroupProtocol]

    def member(self, member_id: str) -> ClassicMember:
        return ClassicMember(
            member_id,
            self.instance_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout,
            self.session_timeout,
            self.protocol_type,
            self.protocols,
        )


class ClassicGroupProtocol:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup for classic groups."""

    def __init__(self, store: GroupStore, rebalance: ClassicRebalance) -> None:
        self.store = store
        self.rebalance = rebalance

    def join_group(
        self,
        out: Effects,
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
    ) -> JoinGroupResult | Deferred:
        """JoinGroup. `require_known_member_id` is true for request v4+ (answer MEMBER_ID_REQUIRED first).

        Usually deferred: the result's `token` is answered by a later call's completions once the
        join phase ends (every member rejoined, or the rebalance timeout passed).
        """
        if rebalance_timeout_ms == -1:  # v0 has no rebalance timeout: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        protocols = list(protocols)

        def fail(code: int, mid: str = member_id) -> JoinGroupResult:
            return JoinGroupResult(code, member_id=mid)

        if not group_id:
            return fail(E.INVALID_GROUP_ID)
        cfg = self.store.config
        if not cfg.group_min_session_timeout_ms <= session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return fail(E.INVALID_SESSION_TIMEOUT)
        group = self.store.groups.get(group_id)
        if isinstance(group, StreamsGroup):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if isinstance(group, ConsumerGroup):
            if group.members:
                # Kafka 4.x would convert the classic member into the consumer group (online migration).
                return fail(E.INCONSISTENT_GROUP_PROTOCOL)
            delete_consumer_group_records(out, group)
            del self.store.groups[group_id]
            group = None
        if group is None:
            if member_id:
                return fail(E.UNKNOWN_MEMBER_ID)
            group = ClassicGroup(group_id, current_state_timestamp=now_ms)
            self.store.groups[group_id] = group
        if not self._accept_joining_member(group, member_id):
            if member_id in group.members:
                self.rebalance.remove_member_and_update(out, group, group.members[member_id], now_ms)
            return fail(E.GROUP_MAX_SIZE_REACHED, "")
        j = Joiner(
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
        )
        if not member_id:
            return self._join_unknown_member(out, group, now_ms, require_known_member_id, j)
        return self._join_known_member(out, group, now_ms, member_id, j)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.store.config.group_max_size
        member = group.members.get(member_id)
        if group.state in (ClassicGroupState.EMPTY, ClassicGroupState.DEAD):
            return True
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join) or group.num_awaiting_join() < limit
        return member is not None or len(group.members) < limit

    def _join_unknown_member(
        self,
        out: Effects,
        group: ClassicGroup,
        now: int,
        require_known_member_id: bool,
        j: Joiner,
    ) -> JoinGroupResult | Deferred:
        if group.state is ClassicGroupState.DEAD:
            return JoinGroupResult(E.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(j.protocol_type, j.protocols):
            return JoinGroupResult(E.INCONSISTENT_GROUP_PROTOCOL)
        new_id = self.store.member_id(j.client_id, j.instance_id)
        if j.instance_id is not None and j.instance_id in group.static_members:
            return self._replace_static_member(
                out, group, now, j.instance_id, new_id, j.rebalance_timeout, j.session_timeout, j.protocols
            )
        if j.instance_id is None and require_known_member_id:
            # The client must come back with this id; until it does (or its session passes) the
            # join phase waits for it.
            group.pending_members[new_id] = now + j.session_timeout
            return JoinGroupResult(E.MEMBER_ID_REQUIRED, member_id=new_id)
        return self._add_member_and_rebalance(out, group, j.member(new_id), now)

    def _join_known_member(
        self,
        out: Effects,
        group: ClassicGroup,
        now: int,
        member_id: str,
        j: Joiner,
    ) -> JoinGroupResult | Deferred:
        if group.state is ClassicGroupState.DEAD:
            return JoinGroupResult(E.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports_protocols(j.protocol_type, j.protocols):
            return JoinGroupResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(out, group, j.member(member_id), now)
        error = validate_member(group, member_id, j.instance_id)
        if error:
            return JoinGroupResult(error, member_id=member_id)
        member = group.members[member_id]
        outcome = KNOWN_MEMBER_JOIN[group.state]
        if outcome is KnownMemberJoinOutcome.WAIT:
            return self._update_member_and_rebalance(
                out, group, member, now, j.rebalance_timeout, j.session_timeout, j.protocols
            )
        assert outcome is KnownMemberJoinOutcome.REBALANCE_IF_CHANGED, outcome
        unchanged = member.matches(j.protocols)
        is_leader = group.leader_id == member_id
        if group.state is ClassicGroupState.STABLE:
            unchanged = unchanged and not is_leader  # a rejoining leader always gets a new generation
        if not unchanged:
            return self._update_member_and_rebalance(
                out, group, member, now, j.rebalance_timeout, j.session_timeout, j.protocols
            )
        member.session_deadline = now + member.session_timeout_ms
        return self.rebalance.join_response(group, member)

    def _add_member_and_rebalance(
        self, out: Effects, group: ClassicGroup, member: ClassicMember, now: int
    ) -> JoinGroupResult | Deferred:
        token = self.store.token()
        member.join_token = token
        member.is_new = True
        # New members cannot heartbeat yet, so a JoinGroup they abandon would keep them forever: Kafka
        # expires them after a fixed join timeout instead.
        member.session_deadline = now + self.store.config.new_member_join_timeout_ms
        if group.state is ClassicGroupState.PREPARING_REBALANCE and group.initial_delay_remaining is not None:
            group.new_member_added = True
        group.add(member)
        self.rebalance.maybe_prepare_rebalance_or_complete_join(out, group, now)
        return Deferred(token)

    def _update_member_and_rebalance(
        self,
        out: Effects,
        group: ClassicGroup,
        member: ClassicMember,
        now: int,
        rebalance_timeout: int,
        session_timeout: int,
        protocols: list[JoinGroupProtocol],
    ) -> JoinGroupResult | Deferred:
        token = self.store.token()
        # A JoinGroup sent again supersedes the earlier one, which can no longer be answered usefully.
        out.complete(member.join_token, JoinGroupResult(E.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        member.join_token = token
        self.rebalance.maybe_prepare_rebalance_or_complete_join(out, group, now)
        return Deferred(token)

    def _replace_static_member(
        self,
        out: Effects,
        group: ClassicGroup,
        now: int,
        instance_id: str,
        new_id: str,
        rebalance_timeout: int,
        session_timeout: int,
        protocols: list[JoinGroupProtocol],
    ) -> JoinGroupResult | Deferred:
        """A static member restarted: it takes over its old member id's place under a new id."""
        old_id = group.static_members[instance_id]
        old = group.members[old_id]
        out.complete(old.join_token, JoinGroupResult(E.FENCED_INSTANCE_ID, member_id=old_id))
        out.complete(old.sync_token, SyncGroupResponse(error_code=E.FENCED_INSTANCE_ID))
        old.join_token = old.sync_token = None
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        member.session_deadline = now + session_timeout
        token = self.store.token()
        member.join_token = token
        if group.state is ClassicGroupState.STABLE:
            if group.select_protocol() == group.protocol_name:
                # Same protocol for the next generation: no rebalance, just persist the new member id.
                member.join_token = None
                self.rebalance.emit_group_metadata(out, group)
                is_leader = group.leader_id == new_id
                return self.rebalance.join_response(group, member, skip_assignment=is_leader)
            self.rebalance.prepare_rebalance(out, group, now)
        elif group.state is ClassicGroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old id: start over so the new id gets partitions.
            self.rebalance.prepare_rebalance(out, group, now)
        else:
            self.rebalance.maybe_complete_join(out, group, now)
        return Deferred(token)

    def _member_error(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        """The checks SyncGroup and Heartbeat share, in Kafka's order; E.NONE when the member may go on."""
        if group.state is ClassicGroupState.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        error = validate_member(group, member_id, instance_id)
        if error:
            return error
        return E.ILLEGAL_GENERATION if generation_id != group.generation_id else E.NONE

    def sync_group(
        self,
        out: Effects,
        now_ms: int,
        *,
        group_id: str,
        member_id: str,
        generation_id: int,
        assignments: Sequence[SyncGroupAssignment] = (),
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncGroupResponse | Deferred:
        """SyncGroup. Followers (and a leader that syncs first) wait for the leader's assignment."""
        if not group_id:
            return SyncGroupResponse(error_code=E.INVALID_GROUP_ID)
        group = self.store.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or not group.members:
            return SyncGroupResponse(error_code=E.UNKNOWN_MEMBER_ID)
        error = self._member_error(group, member_id, group_instance_id, generation_id)
        if error:
            return SyncGroupResponse(error_code=error)
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(
            protocol_name, group.protocol_name
        ):
            return SyncGroupResponse(error_code=E.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        member.session_deadline = now_ms + member.session_timeout_ms
        outcome = SYNC[group.state]
        if outcome is SyncOutcome.REJOIN:
            return SyncGroupResponse(error_code=E.REBALANCE_IN_PROGRESS)
        if outcome is SyncOutcome.CURRENT_ASSIGNMENT:
            self._synced(group, member_id)
            return self._sync_response(group, member)
        assert outcome is SyncOutcome.WAIT, outcome
        out.complete(member.sync_token, SyncGroupResponse(error_code=E.REBALANCE_IN_PROGRESS))
        token = self.store.token()
        member.sync_token = token
        self._synced(group, member_id)
        if group.leader_id == member_id:
            given = {a.member_id: bytes(a.assignment) for a in assignments}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")  # Kafka fills in an empty one for the rest
            self.rebalance.emit_group_metadata(out, group)
            group.transition(GroupEvent.LEADER_SYNC, now_ms)
            for m in group.members.values():
                out.complete(m.sync_token, self._sync_response(group, m))
                m.sync_token = None
        return Deferred(token)

    @staticmethod
    def _sync_response(group: ClassicGroup, member: ClassicMember) -> SyncGroupResponse:
        return SyncGroupResponse(
            error_code=E.NONE,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            assignment=member.assignment,
        )

    @staticmethod
    def _synced(group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None

    def heartbeat(
        self,
        out: Effects,
        now_ms: int,
        *,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> HeartbeatResponse | Deferred:
        if not group_id:
            return HeartbeatResponse(error_code=E.INVALID_GROUP_ID)
        group = self.store.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            return HeartbeatResponse(error_code=E.UNKNOWN_MEMBER_ID)
        error = self._member_error(group, member_id, group_instance_id, generation_id)
        if error:
            return HeartbeatResponse(error_code=error)
        outcome = HEARTBEAT[group.state]
        if outcome is HeartbeatOutcome.UNKNOWN_MEMBER:
            return HeartbeatResponse(error_code=E.UNKNOWN_MEMBER_ID)
        member = group.members[member_id]
        member.session_deadline = now_ms + member.session_timeout_ms
        if outcome is HeartbeatOutcome.REJOIN:
            return HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS)
        return HeartbeatResponse(error_code=E.NONE)

    def leave_group(
        self, out: Effects, now_ms: int, *, group_id: str, members: Sequence[MemberIdentity]
    ) -> LeaveGroupResult | Deferred:
        """LeaveGroup; v0-2 pass their one member id as a single MemberIdentity (see `legacy_error_code`)."""
        if not group_id:
            return LeaveGroupResult(E.INVALID_GROUP_ID)
        group = self.store.groups.get(group_id)
        if group is None:
            return LeaveGroupResult(E.UNKNOWN_MEMBER_ID)
        if isinstance(group, ConsumerGroup | StreamsGroup):
            return LeaveGroupResult(
                E.NONE,
                [
                    LeaveGroupMemberResult(m.member_id, m.group_instance_id, E.UNKNOWN_MEMBER_ID)
                    for m in members
                ],
            )
        if group.state is ClassicGroupState.DEAD:
            return LeaveGroupResult(E.COORDINATOR_NOT_AVAILABLE)
        left = []
        for ident in members:
            code = self._leave_one(out, group, ident, now_ms)
            left.append(LeaveGroupMemberResult(ident.member_id, ident.group_instance_id, code))
        return LeaveGroupResult(E.NONE, left)

    def _leave_one(self, out: Effects, group: ClassicGroup, ident: MemberIdentity, now: int) -> int:
        if ident.group_instance_id is None:
            if ident.member_id in group.pending_members:
                del group.pending_members[ident.member_id]
                self.rebalance.maybe_complete_join(out, group, now)
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
        self.rebalance.remove_member_and_update(out, group, member, now)
        return E.NONE


def _inconsistent(given: str | None, expected: str | None) -> bool:
    return given is not None and expected is not None and given != expected


def validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> int:
    """Whether `member_id` (and the static `instance_id`, if any) belongs to the group; E.NONE if so."""
    if instance_id is not None:
        existing = group.static_members.get(instance_id)
        if existing is None:
            return E.UNKNOWN_MEMBER_ID
        if existing != member_id:
            return E.FENCED_INSTANCE_ID
        return E.NONE
    return E.NONE if member_id in group.members else E.UNKNOWN_MEMBER_ID
