"""How much of a `__share_group_state` partition is still needed (Kafka's
ShareCoordinatorOffsetsManager): a share-partition's state is rebuilt from its newest snapshot and
the updates after it, so every record below the lowest newest-snapshot offset of the partition's
share-partitions is redundant, and DeleteRecords may drop it. A tombstone ends a share-partition:
nothing of it is needed after one."""

from __future__ import annotations

from kcompat.coordinator.share_coordinator.records import SNAPSHOT, ShareKey, decode


class SnapshotOffsets:
    def __init__(self) -> None:
        self._newest: dict[int, dict[ShareKey, int]] = {}  # state partition -> key -> snapshot offset

    def note(self, partition: int, offset: int, key: bytes, value: bytes | None) -> None:
        """A record at `offset` of `partition` (written, or read back at load); DecodeError for one
        that is not of this topic."""
        if int.from_bytes(key[:2], "big", signed=True) != SNAPSHOT:
            return  # an update: needs the snapshot before it
        share_key, _ = decode(key, None)
        newest = self._newest.setdefault(partition, {})
        if value is None:
            newest.pop(share_key, None)
        else:
            newest[share_key] = offset

    def prune_point(self, partition: int, log_end_offset: int) -> int:
        """The offset below which no record of `partition` is needed."""
        newest = self._newest.get(partition)
        return min(newest.values()) if newest else log_end_offset

    def drop(self, partition: int) -> None:
        self._newest.pop(partition, None)
