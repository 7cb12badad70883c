"""Group administration: DescribeGroups v0-5, ListGroups v0-5 and DeleteGroups v0-2.

DescribeGroups describes classic groups only (KIP-848 groups have ConsumerGroupDescribe, in
consumer_group_heartbeat.py). Deleting a group deletes its committed offsets too.
"""

from __future__ import annotations

from collections.abc import Sequence

from kcompat.coordinator import records as rec
from kcompat.coordinator.base import CoordinatorBase, Group
from kcompat.coordinator.classic_group import ClassicGroup
from kcompat.coordinator.classic_state import ClassicGroupState, GroupEvent
from kcompat.coordinator.consumer_group import ConsumerGroup
from kcompat.coordinator.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from kcompat.coordinator.messages import (
    DeletableGroupResult,
    DescribedGroup,
    DescribedGroupMember,
    ListedGroup,
)
from kcompat.coordinator.result import CoordinatorResult
from kcompat.wire.error_codes import ErrorCode as E


class GroupAdmin(CoordinatorBase):
    """DescribeGroups, ListGroups and DeleteGroups, over classic and KIP-848 groups."""

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
