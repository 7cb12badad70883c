"""KIP-848 consumer groups' heartbeat: ConsumerGroupHeartbeat v0-1 (ConsumerGroupDescribe v0 is in group_admin.py).

A heartbeat joins (member epoch 0), heartbeats, or leaves (-1; a static member's -2 keeps its
partitions until its session expires). It updates the member, bumps the group epoch when membership,
a subscription or assignor, or the subscribed topics' metadata changed, recomputes the target
assignment with the server-side assignor, and moves the member one reconciliation step towards it
(consumer_group.py).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import kcompat.coordinator.records as rec
from kcompat.coordinator.classic_group import ClassicGroup
from kcompat.coordinator.classic_state import ClassicGroupState, GroupEvent
from kcompat.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    is_subset,
    reconcile,
    topic_partitions,
)
from kcompat.coordinator.consumer_group_records import (
    emit_current_assignment,
    emit_member_metadata,
    emit_member_tombstones,
)
from kcompat.coordinator.consumer_group_target import refresh_subscription_metadata, update_target_assignment
from kcompat.coordinator.group_store import GroupStore
from kcompat.coordinator.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResult,
    TopicPartitions,
)
from kcompat.coordinator.result import Effects, Timer
from kcompat.wire.error_codes import ErrorCode as E

Owned = dict[uuid.UUID, set[int]] | None  # the partitions a heartbeat says the member owns; None: not sent


class ConsumerGroupProtocol:
    """ConsumerGroupHeartbeat, and the consumer group records it writes (consumer_group_records.py)."""

    def __init__(self, store: GroupStore) -> None:
        self.store = store

    def timers(self, g: ConsumerGroup) -> Iterable[Timer]:
        for cm in g.members.values():
            if cm.session_deadline is not None:
                yield cm.session_deadline, partial(self._fence_consumer_member, g, cm)
            if cm.rebalance_deadline is not None:
                yield cm.rebalance_deadline, partial(self._fence_consumer_member, g, cm)

    def consumer_group_heartbeat(
        self,
        out: Effects,
        now_ms: int,
        request: ConsumerGroupHeartbeatRequest,
        *,
        api_version: int = 1,
        client_id: str = "",
        client_host: str = "",
    ) -> ConsumerGroupHeartbeatResult:
        """ConsumerGroupHeartbeat v0/v1: join (epoch 0), heartbeat (epoch > 0), leave (-1), static leave (-2)."""
        error = self._validate_heartbeat_request(request, api_version)
        if error is not None:
            return ConsumerGroupHeartbeatResult(E.INVALID_REQUEST, error, request.member_id or None)
        if (
            request.server_assignor is not None
            and request.server_assignor not in self.store.config.consumer_assignors
        ):
            return ConsumerGroupHeartbeatResult(
                E.UNSUPPORTED_ASSIGNOR,
                f"Assignor {request.server_assignor} is not supported.",
                request.member_id,
            )
        if request.subscribed_topic_regex is not None:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as e:
                return ConsumerGroupHeartbeatResult(E.INVALID_REGULAR_EXPRESSION, str(e), request.member_id)
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._consumer_leave(out, request, now_ms)
        return self._consumer_heartbeat(out, request, now_ms, client_id, client_host)

    @staticmethod
    def _validate_heartbeat_request(req: ConsumerGroupHeartbeatRequest, api_version: int) -> str | None:
        if not req.group_id:
            return "GroupId can't be empty."
        if req.instance_id is not None and not req.instance_id:
            return "InstanceId can't be empty."
        if req.rack_id is not None and not req.rack_id:
            return "RackId can't be empty."
        needs_member_id = (
            req.member_epoch > 0 or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH or api_version >= 1
        )
        if needs_member_id and not req.member_id:
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
        self, out: Effects, req: ConsumerGroupHeartbeatRequest, now: int, client_id: str, client_host: str
    ) -> ConsumerGroupHeartbeatResult:
        group = self._heartbeat_group(out, req, now)
        if isinstance(group, ConsumerGroupHeartbeatResult):
            return group
        member_id = req.member_id or str(self.store.new_uuid())  # v0 joins may leave the id to the broker
        owned = _owned(req.topic_partitions)
        found = self._heartbeat_member(out, group, req, member_id, owned)
        if isinstance(found, ConsumerGroupHeartbeatResult):
            return found
        member, bump = found
        self._apply_heartbeat(out, group, req, member, member_id, client_id, client_host, bump)
        after = self._reconcile_member(out, group, member_id, owned, now)

        full_request = (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        send_assignment = req.member_epoch == 0 or full_request or after.assigned != member.assigned
        return ConsumerGroupHeartbeatResult(
            E.NONE,
            None,
            member_id,
            after.member_epoch,
            self.store.consumer_heartbeat_interval_ms(group.group_id),
            topic_partitions(after.assigned) if send_assignment else None,
        )

    def _heartbeat_group(
        self, out: Effects, req: ConsumerGroupHeartbeatRequest, now: int
    ) -> ConsumerGroup | ConsumerGroupHeartbeatResult:
        """The consumer group a heartbeat is for, created on a first join; an error response otherwise."""
        group = self.store.groups.get(req.group_id)
        joining = req.member_epoch == 0
        if isinstance(group, ClassicGroup):
            if joining and group.state is ClassicGroupState.EMPTY:
                self._delete_classic_for_consumer(out, group, now)
                group = None
            else:
                # Kafka 4.x would upgrade a non-empty classic group online; that is not done here.
                return _error(req, E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        if group is None:
            if not joining:
                return _error(req, E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
            group = ConsumerGroup(req.group_id)
            self.store.groups[req.group_id] = group
        if not isinstance(group, ConsumerGroup):
            return _error(req, E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        return group

    def _heartbeat_member(
        self,
        out: Effects,
        group: ConsumerGroup,
        req: ConsumerGroupHeartbeatRequest,
        member_id: str,
        owned: Owned,
    ) -> tuple[ConsumerMember, bool] | ConsumerGroupHeartbeatResult:
        """The member a heartbeat is from (a new one on a join, a static member taken over) and whether
        it is new (a group epoch bump); or the fencing / unknown-member error response."""
        joining = req.member_epoch == 0
        member = group.members.get(member_id)
        if req.instance_id is not None:
            static_id = group.static_members.get(req.instance_id)
            if static_id is not None and static_id != member_id:
                old = group.members[static_id]
                if not joining:
                    return _error(
                        req, E.FENCED_INSTANCE_ID, f"Instance {req.instance_id} is held by another member."
                    )
                if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    return _error(
                        req, E.UNRELEASED_INSTANCE_ID, f"Instance {req.instance_id} is still in use."
                    )
                member = self._take_over_static_member(out, group, old, member_id)
            elif static_id is None and member is None and not joining:
                return _error(req, E.UNKNOWN_MEMBER_ID, f"Instance {req.instance_id} is unknown.")
        if member is None:
            if not joining:
                return _error(
                    req, E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {req.group_id}."
                )
            if len(group.members) >= self.store.config.consumer_max_size:
                return _error(
                    req,
                    E.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of {self.store.config.consumer_max_size} members.",
                )
            return ConsumerMember(member_id), True
        if not joining:
            if req.member_epoch > member.member_epoch:
                return _error(
                    req,
                    E.FENCED_MEMBER_EPOCH,
                    "The consumer group member has a greater member epoch than expected.",
                )
            if req.member_epoch < member.member_epoch and not (
                req.member_epoch == member.previous_member_epoch
                and owned is not None
                and is_subset(owned, member.assigned)
            ):
                return _error(
                    req,
                    E.FENCED_MEMBER_EPOCH,
                    "The consumer group member has a smaller member epoch than expected.",
                )
        return member, False

    def _apply_heartbeat(
        self,
        out: Effects,
        group: ConsumerGroup,
        req: ConsumerGroupHeartbeatRequest,
        member: ConsumerMember,
        member_id: str,
        client_id: str,
        client_host: str,
        bump: bool,
    ) -> None:
        """Store what the heartbeat changed (null fields mean "unchanged"), bumping the group epoch
        and recomputing the target assignment when the membership or a subscription changed."""
        updated = _updated_member(member, req, client_id, client_host)
        if (
            _subscription(updated) != _subscription(member)
            or updated.server_assignor != member.server_assignor
        ):
            bump = True
        if bump or _member_record_fields(updated) != _member_record_fields(member):
            emit_member_metadata(out, group.group_id, updated)
        group.members[member_id] = updated
        if req.describable is not None:
            group.describable = req.describable
        if updated.instance_id is not None:
            group.static_members[updated.instance_id] = member_id
        if refresh_subscription_metadata(out, group, self.store):
            bump = True
        if bump:
            group.group_epoch += 1
            out.emit(
                rec.ConsumerGroupMetadataKey(group.group_id),
                rec.ConsumerGroupMetadataValue(group.group_epoch),
            )
        if group.group_epoch > group.assignment_epoch:
            update_target_assignment(out, group, self.store)

    def _reconcile_member(
        self, out: Effects, group: ConsumerGroup, member_id: str, owned: Owned, now: int
    ) -> ConsumerMember:
        """Move the member toward its target assignment and renew its session and rebalance deadlines."""
        before = group.members[member_id]
        after = reconcile(
            before, group.assignment_epoch, group.target.get(member_id, {}), group.owner_epochs(), owned
        )
        if after is not before:
            group.members[member_id] = after
            emit_current_assignment(out, group.group_id, after)
        after.session_deadline = now + self.store.consumer_session_timeout_ms(group.group_id)
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if (
                before.state is not MemberState.UNREVOKED_PARTITIONS
                or after.member_epoch != before.member_epoch
            ):
                after.rebalance_deadline = now + max(after.rebalance_timeout_ms, 0)
        else:
            after.rebalance_deadline = None
        return after

    def _take_over_static_member(
        self, out: Effects, group: ConsumerGroup, old: ConsumerMember, new_id: str
    ) -> ConsumerMember:
        """A restarted static member inherits its predecessor's epoch and assignment (KIP-848)."""
        gid = group.group_id
        del group.members[old.member_id]
        target = group.target.pop(old.member_id, {})
        emit_member_tombstones(out, gid, old.member_id)
        member = replace(old, member_id=new_id, member_epoch=old.previous_member_epoch)
        group.members[new_id] = member
        group.target[new_id] = target
        emit_member_metadata(out, gid, member)
        out.emit(
            rec.ConsumerGroupTargetAssignmentMemberKey(gid, new_id),
            rec.ConsumerGroupTargetAssignmentMemberValue(rec.topic_id_partitions(target)),
        )
        emit_current_assignment(out, gid, member)
        return member

    def _consumer_leave(
        self, out: Effects, req: ConsumerGroupHeartbeatRequest, now: int
    ) -> ConsumerGroupHeartbeatResult:
        group = self.store.groups.get(req.group_id)
        if not isinstance(group, ConsumerGroup):
            return ConsumerGroupHeartbeatResult(
                E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.", req.member_id
            )
        if req.instance_id is not None:
            member_id = group.static_members.get(req.instance_id)
            if member_id is None:
                return ConsumerGroupHeartbeatResult(
                    E.UNKNOWN_MEMBER_ID, f"Instance {req.instance_id} is unknown.", req.member_id
                )
            if member_id != req.member_id:
                return ConsumerGroupHeartbeatResult(
                    E.FENCED_INSTANCE_ID,
                    f"Instance {req.instance_id} is held by another member.",
                    req.member_id,
                )
        member = group.members.get(req.member_id)
        if member is None:
            return ConsumerGroupHeartbeatResult(
                E.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
                req.member_id,
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A static member going away for a while keeps its partitions until its session expires.
            left = replace(
                member,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                previous_member_epoch=member.member_epoch,
            )
            left.rebalance_deadline = None
            group.members[member.member_id] = left
            emit_current_assignment(out, group.group_id, left)
        else:
            self._remove_consumer_member(out, group, member)
        return ConsumerGroupHeartbeatResult(E.NONE, None, req.member_id, req.member_epoch, 0)

    def _fence_consumer_member(
        self, group: ConsumerGroup, member: ConsumerMember, out: Effects, now: int
    ) -> None:
        if group.members.get(member.member_id) is member:
            self._remove_consumer_member(out, group, member)

    def _remove_consumer_member(self, out: Effects, group: ConsumerGroup, member: ConsumerMember) -> None:
        gid = group.group_id
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if (
            member.instance_id is not None
            and group.static_members.get(member.instance_id) == member.member_id
        ):
            del group.static_members[member.instance_id]
        emit_member_tombstones(out, gid, member.member_id)
        refresh_subscription_metadata(out, group, self.store)
        group.group_epoch += 1
        out.emit(rec.ConsumerGroupMetadataKey(gid), rec.ConsumerGroupMetadataValue(group.group_epoch))
        update_target_assignment(out, group, self.store)

    def _delete_classic_for_consumer(self, out: Effects, group: ClassicGroup, now: int) -> None:
        """An empty classic group makes way for a consumer group of the same id (its offsets stay)."""
        group.transition(GroupEvent.DELETE, now)
        if not group.is_simple():
            out.emit(rec.GroupMetadataKey(group.group_id), None)
        del self.store.groups[group.group_id]


def _owned(tps: Sequence[TopicPartitions] | None) -> Owned:
    if tps is None:
        return None
    out: dict[uuid.UUID, set[int]] = {}
    for tp in tps:
        if tp.partitions:
            out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return out


def _subscription(m: ConsumerMember) -> tuple[tuple[str, ...], str | None]:
    return m.subscribed_topic_names, m.subscribed_topic_regex


def _member_record_fields(m: ConsumerMember) -> tuple[Any, ...]:
    return (
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.subscribed_topic_names,
        m.subscribed_topic_regex,
        m.rebalance_timeout_ms,
        m.server_assignor,
    )


def _error(req: ConsumerGroupHeartbeatRequest, code: int, message: str) -> ConsumerGroupHeartbeatResult:
    return ConsumerGroupHeartbeatResult(code, message, req.member_id)


def _updated_member(
    member: ConsumerMember, req: ConsumerGroupHeartbeatRequest, client_id: str, client_host: str
) -> ConsumerMember:
    """The member with what a heartbeat set (null fields mean "unchanged")."""
    updated = replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        client_id=client_id or member.client_id,
        client_host=client_host or member.client_host,
        subscribed_topic_names=(
            tuple(sorted(set(req.subscribed_topic_names)))
            if req.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            (req.subscribed_topic_regex or None)
            if req.subscribed_topic_regex is not None
            else member.subscribed_topic_regex
        ),
        rebalance_timeout_ms=req.rebalance_timeout_ms
        if req.rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
    )
    if req.member_epoch == 0 and updated.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        updated.member_epoch = updated.previous_member_epoch  # back from a static leave
    return updated
