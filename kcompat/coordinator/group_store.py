"""The groups of one coordinator shard, and what its group managers need beside them.

GroupMetadataManager owns one GroupStore and hands it to the protocol parts it is made of
(classic_protocol.py, classic_rebalance.py, consumer_group_heartbeat.py); OffsetMetadataManager
reads it to validate commits, as Kafka's OffsetMetadataManager asks the GroupMetadataManager.
A call's effects are never kept here: they go into the Effects value passed to each operation.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from kcompat.coordinator.classic_group import ClassicGroup
from kcompat.coordinator.config import CoordinatorConfig
from kcompat.coordinator.consumer_group import ConsumerGroup
from kcompat.coordinator.streams_group import StreamsGroup

Group = ClassicGroup | ConsumerGroup | StreamsGroup
# topic name -> (topic id, partition count) of the existing topics, asked for by KIP-848 groups
TopicMetadataFn = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]
# group id -> the configs set on that group (ConfigResource type 32), read on every use
GroupOverridesFn = Callable[[str], Mapping[str, str]]


def _no_overrides(group_id: str) -> Mapping[str, str]:
    return {}


class GroupStore:
    def __init__(
        self,
        config: CoordinatorConfig,
        topic_metadata: TopicMetadataFn,
        new_uuid: Callable[[], uuid.UUID],
        group_overrides: GroupOverridesFn = _no_overrides,
    ) -> None:
        self.config = config
        self.group_overrides = group_overrides
        self.topic_metadata = topic_metadata
        self.new_uuid = new_uuid
        self.groups: dict[str, Group] = {}
        self._next_token = 1

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        """The group's consumer.session.timeout.ms, else group.consumer.session.timeout.ms."""
        return self._override_int(
            group_id, "consumer.session.timeout.ms", self.config.consumer_session_timeout_ms
        )

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's consumer.heartbeat.interval.ms, else group.consumer.heartbeat.interval.ms."""
        return self._override_int(
            group_id, "consumer.heartbeat.interval.ms", self.config.consumer_heartbeat_interval_ms
        )

    def group_int(self, group_id: str, name: str, default: int) -> int:
        """The group's own int config `name`, else `default`."""
        return self._override_int(group_id, name, default)

    def _override_int(self, group_id: str, name: str, default: int) -> int:
        raw = self.group_overrides(group_id).get(name)
        try:
            return default if raw is None else int(raw)
        except ValueError:
            return default  # validated when set; never fail a heartbeat on it

    def token(self) -> int:
        """A fresh token for a deferred answer."""
        self._next_token += 1
        return self._next_token - 1

    def member_id(self, client_id: str, instance_id: str | None = None) -> str:
        """Kafka's generateMemberId: a static member's id starts with its group.instance.id."""
        return f"{client_id if instance_id is None else instance_id}-{self.new_uuid()}"
