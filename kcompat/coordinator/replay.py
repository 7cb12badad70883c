"""Rebuilding the groups from `__consumer_offsets` records (the group half of Kafka's shard replay).

Records are applied oldest first: later records win and tombstones delete, so a compacted and an
uncompacted log give the same state. OffsetCommit records are the OffsetMetadataManager's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

import kcompat.coordinator.records as rec
from kcompat.coordinator.classic_group import ClassicGroup, ClassicMember
from kcompat.coordinator.classic_state import ClassicGroupState
from kcompat.coordinator.consumer_group import ConsumerGroup, ConsumerMember, MemberState
from kcompat.coordinator.group_store import Group
from kcompat.coordinator.messages import JoinGroupProtocol


def replay_group_record(
    groups: dict[str, Group], key: rec.RecordKey, value: rec.RecordValue | None, now: int
) -> None:
    """Apply one group record (anything but an OffsetCommit record) to `groups`."""
    gid = rec.group_of(key)
    if isinstance(key, rec.GroupMetadataKey):
        if value is None:
            if isinstance(groups.get(gid), ClassicGroup):
                del groups[gid]
            return
        assert isinstance(value, rec.GroupMetadataValue)
        groups[gid] = _classic_from_record(gid, value)
        return
    group = groups.get(gid)
    if isinstance(key, rec.ConsumerGroupMetadataKey) and value is None:
        if isinstance(group, ConsumerGroup):
            del groups[gid]
        return
    if not isinstance(group, ConsumerGroup):
        if value is None:
            return
        group = ConsumerGroup(gid)
        groups[gid] = group
    _replay_consumer(group, key, value)


def restart_timers(
    groups: Iterable[Group], consumer_session_timeout_ms: Callable[[str], int], now: int
) -> None:
    """After a load, members' session timers start afresh, as in Kafka after a reload."""
    for group in groups:
        if isinstance(group, ClassicGroup):
            for cm in group.members.values():
                cm.session_deadline = now + cm.session_timeout_ms
        elif isinstance(group, ConsumerGroup):
            for m in group.members.values():
                m.session_deadline = now + consumer_session_timeout_ms(group.group_id)
            group.resolved_regex = {}


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
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout if m.rebalance_timeout != -1 else m.session_timeout,
            m.session_timeout,
            v.protocol_type,
            [JoinGroupProtocol(v.protocol or "", m.subscription)],
            m.assignment,
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
        group.subscription_metadata = (
            {}
            if value is None
            else {
                t.topic_name: (t.topic_id, t.num_partitions)
                for t in value.topics  # type: ignore[union-attr]
            }
        )
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
            if (
                m is not None
                and m.instance_id is not None
                and group.static_members.get(m.instance_id) == m.member_id
            ):
                del group.static_members[m.instance_id]
            return
        assert isinstance(value, rec.ConsumerGroupMemberMetadataValue)
        old = group.members.get(key.member_id) or ConsumerMember(key.member_id)
        group.members[key.member_id] = replace(
            old,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=value.subscribed_topic_names,
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
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
            old,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState(value.state),
            assigned={t: set(ps) for t, ps in value.assigned_partitions},
            pending_revocation={t: set(ps) for t, ps in value.partitions_pending_revocation},
        )
