"""The seam between a share-partition's leader and its durable state (Kafka's `Persister`).

The partition leader's SharePartition keeps the in-flight state in memory and hands every change
that must survive a crash to the persister before it answers the client: a write acknowledged
here is in `__share_group_state` (the share coordinator's log), so an answered acknowledgement is
never lost. A new leader, or a restarted broker, reads the state back before it serves the
share-partition. On a single node the persister calls the local ShareCoordinator; in a cluster it
sends Read/Write/Initialize/Delete/ReadSummary ShareGroupState to the coordinator's broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class PersisterStateBatch:
    """A run of offsets with one delivery state (0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED) and count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: bytes  # the 16-byte Kafka Uuid
    partition: int


@dataclass(frozen=True, slots=True)
class ShareStateRead:
    """What ReadShareGroupState answers for one share-partition (error_code 0 when found)."""

    error_code: int
    state_epoch: int = 0
    start_offset: int = -1
    delivery_complete_count: int = -1
    state_batches: tuple[PersisterStateBatch, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ShareStateWrite:
    """One WriteShareGroupState partition: a start offset (-1: unchanged) and the changed batches."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[PersisterStateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareStateSummary:
    """ReadShareGroupStateSummary for one share-partition (DescribeShareGroupOffsets reads it)."""

    error_code: int
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    delivery_complete_count: int = -1


class Persister(Protocol):
    """Kafka's Persister, one share-partition per call; every method returns a Kafka error code
    (or a result carrying one), never raises for a protocol-level refusal."""

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int: ...

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateRead: ...

    async def write_state(self, key: SharePartitionKey, write: ShareStateWrite) -> int: ...

    async def delete_state(self, key: SharePartitionKey) -> int: ...

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateSummary: ...
