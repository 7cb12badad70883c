"""A classic group's rebalance: the join and sync phases, and the timers that end them or remove members.

This is the rebalance half of Kafka's GroupMetadataManager for classic groups (prepareRebalance, the
initial delayed join, completeClassicGroupJoin, session and sync timeouts). The requests that drive
it are in classic_protocol.py; the state tables it follows are in classic_state.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

import kcompat.coordinator.records as rec
from kcompat.coordinator.classic_group import ClassicGroup, ClassicMember
from kcompat.coordinator.classic_state import ClassicGroupState, GroupEvent, can_rebalance
from kcompat.coordinator.group_store import GroupStore
from kcompat.coordinator.messages import JoinGroupResult
from kcompat.coordinator.result import Effects, Timer
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types.sync_group import SyncGroupResponse


class ClassicRebalance:
    """Moves classic groups through PreparingRebalance and CompletingRebalance, on requests and timers."""

    def __init__(self, store: GroupStore) -> None:
        self.store = store

    def timers(self, g: ClassicGroup) -> Iterable[Timer]:
        if g.join_deadline is not None:
            yield g.join_deadline, lambda out, now: self.on_join_timer(out, g, now)
        if g.sync_deadline is not None:
            yield g.sync_deadline, lambda out, now: self.on_sync_timeout(out, g, now)
        for m in g.members.values():
            if m.session_deadline is not None:
                yield m.session_deadline, partial(self._on_session_timeout, g, m)
        for mid, deadline in g.pending_members.items():
            yield deadline, partial(self._on_pending_timeout, g, mid)

    def maybe_prepare_rebalance_or_complete_join(self, out: Effects, group: ClassicGroup, now: int) -> None:
        if can_rebalance(group.state):
            self.prepare_rebalance(out, group, now)
        elif group.state is ClassicGroupState.PREPARING_REBALANCE:
            self.maybe_complete_join(out, group, now)

    def prepare_rebalance(self, out: Effects, group: ClassicGroup, now: int) -> None:
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            # Members waiting in SyncGroup must rejoin; the assignment being built is void.
            for m in group.members.values():
                out.complete(m.sync_token, SyncGroupResponse(error_code=E.REBALANCE_IN_PROGRESS))
                m.sync_token = None
                m.assignment = b""
        group.sync_deadline = None
        group.pending_sync.clear()
        initial = group.state is ClassicGroupState.EMPTY
        group.transition(GroupEvent.PREPARE_REBALANCE, now)
        if initial:
            # InitialDelayedJoin: wait group.initial.rebalance.delay.ms for more members, extended by
            # that much each time one joins, within the rebalance timeout.
            delay = self.store.config.group_initial_rebalance_delay_ms
            group.join_deadline = now + delay
            group.initial_delay_ms = delay
            group.initial_delay_remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
        else:
            group.join_deadline = now + group.rebalance_timeout_ms()
            group.initial_delay_remaining = None
            self.maybe_complete_join(out, group, now)

    def maybe_complete_join(self, out: Effects, group: ClassicGroup, now: int) -> None:
        if (
            group.state is ClassicGroupState.PREPARING_REBALANCE
            and group.initial_delay_remaining is None
            and group.has_all_members_joined()
        ):
            self.complete_join(out, group, now)

    def on_join_timer(self, out: Effects, group: ClassicGroup, now: int) -> None:
        remaining = group.initial_delay_remaining
        if remaining is not None and group.new_member_added and remaining != 0:
            group.new_member_added = False
            delay = min(self.store.config.group_initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining = max(remaining - group.initial_delay_ms, 0)
            group.initial_delay_ms = delay
            group.join_deadline = now + delay
            return
        self.complete_join(out, group, now)

    def complete_join(self, out: Effects, group: ClassicGroup, now: int) -> None:
        group.join_deadline = None
        group.initial_delay_remaining = None
        group.new_member_added = False
        if group.state is not ClassicGroupState.PREPARING_REBALANCE:
            return
        # Dynamic members that did not rejoin are gone; static ones keep their place (KIP-345).
        for m in list(group.members.values()):
            if not m.awaiting_join and m.group_instance_id is None:
                out.complete(m.sync_token, SyncGroupResponse(error_code=E.UNKNOWN_MEMBER_ID))
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
            self.emit_group_metadata(out, group)
            return
        group.protocol_name = group.select_protocol()
        group.transition(GroupEvent.JOIN_COMPLETE, now)
        for m in group.members.values():
            out.complete(m.join_token, self.join_response(group, m))
            m.join_token = None
            m.is_new = False
            m.session_deadline = now + m.session_timeout_ms
            group.pending_sync.add(m.member_id)
        group.sync_deadline = now + group.rebalance_timeout_ms()

    def on_sync_timeout(self, out: Effects, group: ClassicGroup, now: int) -> None:
        group.sync_deadline = None
        if (
            group.state in (ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE)
            and group.pending_sync
        ):
            for mid in list(group.pending_sync):
                m = group.members.get(mid)
                if m is not None:
                    out.complete(m.join_token, JoinGroupResult(E.UNKNOWN_MEMBER_ID))
                    out.complete(m.sync_token, SyncGroupResponse(error_code=E.UNKNOWN_MEMBER_ID))
                    group.remove(mid)
            self.prepare_rebalance(out, group, now)

    def _on_session_timeout(self, group: ClassicGroup, member: ClassicMember, out: Effects, now: int) -> None:
        member.session_deadline = None
        if not member.is_new and (member.awaiting_join or member.sync_token is not None):
            return  # members waiting in a rebalance need not heartbeat; the rebalance has its own timeout
        self.remove_member_and_update(out, group, member, now)

    def _on_pending_timeout(self, group: ClassicGroup, member_id: str, out: Effects, now: int) -> None:
        group.pending_members.pop(member_id, None)
        self.maybe_complete_join(out, group, now)

    def remove_member_and_update(
        self, out: Effects, group: ClassicGroup, member: ClassicMember, now: int
    ) -> None:
        # A member that goes while its JoinGroup waits is told to rejoin from scratch.
        out.complete(member.join_token, JoinGroupResult(E.UNKNOWN_MEMBER_ID))
        out.complete(member.sync_token, SyncGroupResponse(error_code=E.UNKNOWN_MEMBER_ID))
        member.join_token = member.sync_token = None
        group.remove(member.member_id)
        if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(out, group, now)
        elif group.state is ClassicGroupState.PREPARING_REBALANCE:
            self.maybe_complete_join(out, group, now)
        if group.sync_deadline is not None and not group.pending_sync:
            group.sync_deadline = None

    def join_response(
        self, group: ClassicGroup, member: ClassicMember, skip_assignment: bool = False
    ) -> JoinGroupResult:
        is_leader = group.leader_id == member.member_id
        return JoinGroupResult(
            E.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            skip_assignment=skip_assignment,
            member_id=member.member_id,
            members=group.current_members() if is_leader else [],
        )

    def emit_group_metadata(self, out: Effects, group: ClassicGroup) -> None:
        members = tuple(
            rec.GroupMemberMetadata(
                m.member_id,
                m.client_id,
                m.client_host,
                m.session_timeout_ms,
                m.metadata(group.protocol_name),
                m.assignment,
                m.rebalance_timeout_ms,
                m.group_instance_id,
            )
            for m in group.members.values()
        )
        value = rec.GroupMetadataValue(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            members,
            group.current_state_timestamp,
        )
        out.emit(rec.GroupMetadataKey(group.group_id), value)
