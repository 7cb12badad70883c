"""Group administration: DescribeGroups v0-5, ConsumerGroupDescribe v0, ListGroups v0-5 and what
DeleteGroups v0-2 checks and writes.

DescribeGroups describes classic groups only; KIP-848 groups have ConsumerGroupDescribe v0
(describe_consumer_groups). Deleting a group deletes its committed offsets too: the shard
(coordinator.py) asks the OffsetMetadataManager for those tombstones, then writes the group's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import kcompat.coordinator.records as rec
from kcompat.coordinator.classic_group import ClassicGroup
from kcompat.coordinator.classic_state import ClassicGroupState, GroupEvent
from kcompat.coordinator.consumer_group import ConsumerGroup, topic_partitions
from kcompat.coordinator.consumer_group_records import delete_consumer_group_records
from kcompat.coordinator.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from kcompat.coordinator.group_store import Group, GroupStore
from kcompat.coordinator.messages import (
    ConsumerGroupDescribedGroup,
    ConsumerGroupDescribedMember,
)
from kcompat.coordinator.result import Effects
from kcompat.coordinator.streams_group import PROTOCOL_TYPE as STREAMS_PROTOCOL_TYPE
from kcompat.coordinator.streams_group import StreamsGroup
from kcompat.coordinator.streams_group_records import delete_streams_group_records
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types.describe_groups import DescribedGroup, DescribedGroupMember
from kcompat.wire.types.list_groups import ListedGroup


def describe_groups(groups: Mapping[str, Group], group_ids: Sequence[str]) -> list[DescribedGroup]:
    """DescribeGroups. Unknown groups, and KIP-848 groups, are described as Dead with no error (v0-5)."""
    out = []
    for gid in group_ids:
        group = groups.get(gid)
        if not gid:
            out.append(DescribedGroup(error_code=E.INVALID_GROUP_ID, group_id=gid))
            continue
        if not isinstance(group, ClassicGroup):
            out.append(DescribedGroup(group_id=gid, group_state=ClassicGroupState.DEAD.value))
            continue
        stable = group.state is ClassicGroupState.STABLE
        members = [
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        out.append(
            DescribedGroup(
                group_id=gid,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                members=members,
            )
        )
    return out


def list_groups(
    groups: Mapping[str, Group], *, states_filter: Sequence[str] = (), types_filter: Sequence[str] = ()
) -> list[ListedGroup]:
    """ListGroups; empty filters match everything, and both match case-insensitively (as Kafka)."""
    states = {s.lower() for s in states_filter}
    types = {t.lower() for t in types_filter}
    out = []
    for gid, group in sorted(groups.items()):
        if isinstance(group, ClassicGroup):
            listed = ListedGroup(
                group_id=gid,
                protocol_type=group.protocol_type or "",
                group_state=group.state.value,
                group_type="classic",
            )
        elif isinstance(group, StreamsGroup):
            listed = ListedGroup(
                group_id=gid,
                protocol_type=STREAMS_PROTOCOL_TYPE,
                group_state=group.state().value,
                group_type="streams",
            )
        else:
            listed = ListedGroup(
                group_id=gid,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                group_state=group.state().value,
                group_type="consumer",
            )
        if states and listed.group_state.lower() not in states:
            continue
        if types and listed.group_type not in types:
            continue
        out.append(listed)
    return out


def delete_error(group: Group | None, group_id: str) -> int:
    """Why DeleteGroups may not delete this group (Kafka's validateDeleteGroup); E.NONE if it may."""
    if not group_id:
        return E.INVALID_GROUP_ID
    if group is None:
        return E.GROUP_ID_NOT_FOUND
    if isinstance(group, ClassicGroup) and group.state is ClassicGroupState.DEAD:
        return E.GROUP_ID_NOT_FOUND
    if isinstance(group, ClassicGroup) and group.state is not ClassicGroupState.EMPTY:
        return E.NON_EMPTY_GROUP
    if isinstance(group, ConsumerGroup | StreamsGroup) and group.members:
        return E.NON_EMPTY_GROUP
    return E.NONE


def is_empty(group: Group) -> bool:
    """Whether offset expiry may delete the group once its offsets are gone."""
    if isinstance(group, ClassicGroup):
        return group.state is ClassicGroupState.EMPTY and not group.pending_members
    return not group.members


def delete_group_records(out: Effects, group: Group, now: int) -> None:
    """The group's own tombstones (its offsets are the OffsetMetadataManager's to delete)."""
    if isinstance(group, ClassicGroup):
        group.transition(GroupEvent.DELETE, now)
        out.emit(rec.GroupMetadataKey(group.group_id), None)
    elif isinstance(group, ConsumerGroup):
        delete_consumer_group_records(out, group)
    else:
        delete_streams_group_records(out, group)


def describe_consumer_groups(
    store: GroupStore, group_ids: Sequence[str]
) -> list[ConsumerGroupDescribedGroup]:
    """ConsumerGroupDescribe; classic and unknown groups get GROUP_ID_NOT_FOUND (Admin then falls back)."""
    described = []
    names = {tid: name for name, (tid, _) in store.topic_metadata().items()}
    for gid in group_ids:
        group = store.groups.get(gid)
        if not isinstance(group, ConsumerGroup):
            described.append(
                ConsumerGroupDescribedGroup(E.GROUP_ID_NOT_FOUND, gid, f"Group {gid} not found.")
            )
            continue
        members = [
            ConsumerGroupDescribedMember(
                m.member_id,
                m.instance_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                list(m.subscribed_topic_names),
                m.subscribed_topic_regex,
                topic_partitions(m.assigned, names),
                topic_partitions(group.target.get(m.member_id, {}), names),
            )
            for m in group.members.values()
        ]
        described.append(
            ConsumerGroupDescribedGroup(
                E.NONE,
                gid,
                None,
                group.state().value,
                group.group_epoch,
                group.assignment_epoch,
                group.preferred_assignor(store.config.consumer_assignors[0]),
                members,
            )
        )
    return described
