"""GroupCoordinator's shared state, and the plumbing that turns one call's effects into its result.

GroupCoordinator (coordinator.py) is composed of one mixin per concern, each a CoordinatorBase. A call
starts with `_begin` (fire what is due, start collecting), adds records with `_emit` and answers to
earlier deferred requests with `_complete`, and ends with `_done`, which returns them as its
CoordinatorResult.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from kcompat.coordinator import records as rec
from kcompat.coordinator.classic_group import ClassicGroup
from kcompat.coordinator.config import CoordinatorConfig
from kcompat.coordinator.consumer_group import ConsumerGroup
from kcompat.coordinator.records import OffsetCommitValue, Record
from kcompat.coordinator.result import Completion, CoordinatorResult

T = TypeVar("T")
Group = ClassicGroup | ConsumerGroup
TopicMetadataFn = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]


class CoordinatorBase:
    """GroupCoordinator's state and result plumbing, shared by the mixins it is made of."""

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

    if TYPE_CHECKING:
        # Defined by one part and called by another: declared here so that each part type-checks alone.
        def _fire_due(self, now_ms: int) -> None: ...  # coordinator.py

        @staticmethod
        def _validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> int: ...  # classic_protocol.py

        def _delete_group(self, group: Group, now: int) -> None: ...  # group_admin.py

        def _delete_consumer_group_records(self, group: ConsumerGroup) -> None: ...  # consumer_group_heartbeat.py
