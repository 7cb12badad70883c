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

Group = ClassicGroup | ConsumerGroup
# topic name -> (topic id, partition count) of the existing topics, asked for by KIP-848 groups
TopicMetadataFn = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]


class GroupStore:
    def __init__(
        self, config: CoordinatorConfig, topic_metadata: TopicMetadataFn, new_uuid: Callable[[], uuid.UUID]
    ) -> None:
        self.config = config
        self.topic_metadata = topic_metadata
        self.new_uuid = new_uuid
        self.groups: dict[str, Group] = {}
        self._next_token = 1

    def token(self) -> int:
        """A fresh token for a deferred answer."""
        self._next_token += 1
        return self._next_token - 1

    def member_id(self, client_id: str) -> str:
        return f"{client_id}-{self.new_uuid()}"
