"""Kafka's GroupMetadataManager: every group of a shard, classic and KIP-848, and the records about them.

It is composed, not inherited: one GroupStore (the groups) shared by the parts that act on it,

    classic        ClassicGroupProtocol   JoinGroup, SyncGroup, Heartbeat, LeaveGroup (classic_protocol.py)
    rebalance      ClassicRebalance       the classic join/sync phases and their timers (classic_rebalance.py)
    consumer       ConsumerGroupProtocol  ConsumerGroupHeartbeat (consumer_group_heartbeat.py)
    streams        StreamsGroupProtocol   StreamsGroupHeartbeat (streams_group_heartbeat.py)

plus the administration (group_admin.py) and the replay of group records (replay.py). Operations
that write take the call's Effects; the shard (coordinator.py) creates it and turns it into the
CoordinatorResult. Committed offsets are the OffsetMetadataManager's.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import kcompat.coordinator.group_admin as group_admin
import kcompat.coordinator.records as rec
from kcompat.coordinator.classic_protocol import ClassicGroupProtocol
from kcompat.coordinator.classic_rebalance import ClassicRebalance
from kcompat.coordinator.consumer_group_heartbeat import ConsumerGroupProtocol
from kcompat.coordinator.group_store import Group, GroupStore
from kcompat.coordinator.messages import ConsumerGroupDescribedGroup
from kcompat.coordinator.replay import replay_group_record, restart_timers
from kcompat.coordinator.result import Effects
from kcompat.coordinator.streams_group import StreamsGroup
from kcompat.coordinator.streams_group_describe import describe_streams_groups
from kcompat.coordinator.streams_group_heartbeat import StreamsGroupProtocol
from kcompat.coordinator.streams_group_records import replay_streams_record
from kcompat.coordinator.streams_records import STREAMS_KEYS, STREAMS_VALUES
from kcompat.wire.types.describe_groups import DescribedGroup
from kcompat.wire.types.list_groups import ListedGroup
from kcompat.wire.types.streams_group_describe import DescribedGroup as StreamsDescribedGroup

STREAMS_KEY_TYPES = tuple(cls for _, cls in STREAMS_KEYS)


class GroupMetadataManager:
    def __init__(self, store: GroupStore) -> None:
        self.store = store
        self.rebalance = ClassicRebalance(store)
        self.classic = ClassicGroupProtocol(store, self.rebalance)
        self.consumer = ConsumerGroupProtocol(store)
        self.streams = StreamsGroupProtocol(store)

    @property
    def groups(self) -> dict[str, Group]:
        return self.store.groups

    def describe_groups(self, group_ids: Sequence[str]) -> list[DescribedGroup]:
        return group_admin.describe_groups(self.store.groups, group_ids)

    def list_groups(
        self, *, states_filter: Sequence[str] = (), types_filter: Sequence[str] = ()
    ) -> list[ListedGroup]:
        return group_admin.list_groups(
            self.store.groups, states_filter=states_filter, types_filter=types_filter
        )

    def consumer_group_describe(self, group_ids: Sequence[str]) -> list[ConsumerGroupDescribedGroup]:
        return group_admin.describe_consumer_groups(self.store, group_ids)

    def streams_group_describe(self, group_ids: Sequence[str]) -> list[StreamsDescribedGroup]:
        return describe_streams_groups(self.store.groups, group_ids)

    def delete_error(self, group_id: str) -> int:
        """E.NONE when DeleteGroups may delete this group, else its error code."""
        return group_admin.delete_error(self.store.groups.get(group_id), group_id)

    def delete_group(self, out: Effects, group_id: str, now: int) -> None:
        group = self.store.groups.pop(group_id)
        group_admin.delete_group_records(out, group, now)

    def is_empty(self, group_id: str) -> bool:
        """Whether the group exists with no members (offset expiry deletes such a group with its last offset)."""
        group = self.store.groups.get(group_id)
        return group is not None and group_admin.is_empty(group)

    def replay(self, key: rec.RecordKey, value: rec.RecordValue | None, now: int) -> None:
        if isinstance(key, STREAMS_KEY_TYPES):
            assert value is None or isinstance(value, STREAMS_VALUES)
            replay_streams_record(self.store.groups, key, value)
            return
        replay_group_record(self.store.groups, key, value, now)

    def restart_timers(self, now: int, group_ids: Collection[str] | None = None) -> None:
        """Of every group, or of those named."""
        groups = self.store.groups
        chosen = groups.values() if group_ids is None else [groups[g] for g in group_ids if g in groups]
        restart_timers(chosen, self.store.consumer_session_timeout_ms, now)
        for g in chosen:
            if isinstance(g, StreamsGroup):
                self.streams.restart_timers(g, now)
