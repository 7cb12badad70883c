"""The share coordinator (KIP-932): the durable state of share-partitions in `__share_group_state`."""

from kcompat.coordinator.share_coordinator.batches import (
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    StateBatch,
    combine,
)
from kcompat.coordinator.share_coordinator.records import ShareKey, state_partition
from kcompat.coordinator.share_coordinator.shard import (
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    ShareResult,
    ShareState,
)

__all__ = [
    "ACKNOWLEDGED",
    "ARCHIVED",
    "AVAILABLE",
    "ShareCoordinatorConfig",
    "ShareCoordinatorShard",
    "ShareKey",
    "ShareResult",
    "ShareState",
    "StateBatch",
    "combine",
    "state_partition",
]
