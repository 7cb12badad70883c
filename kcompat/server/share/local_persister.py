"""The Persister of a single node: the share-partition leader's state goes straight to this broker's
ShareCoordinatorService (no request on the wire), and is answered once in `__share_group_state`."""

from __future__ import annotations

import uuid

from kcompat.coordinator.share_coordinator import ShareKey, ShareResult, ShareState, StateBatch
from kcompat.server.share.persister import (
    PersisterStateBatch,
    SharePartitionKey,
    ShareStateRead,
    ShareStateSummary,
    ShareStateWrite,
)
from kcompat.server.share.share_coordinator import ShareCoordinatorService


def share_key(key: SharePartitionKey) -> ShareKey:
    return ShareKey(key.group_id, uuid.UUID(bytes=key.topic_id), key.partition)


def read_answer(result: ShareResult) -> ShareStateRead:
    """ReadShareGroupState's answer (INVALID_REQUEST for a share-partition not initialized)."""
    s: ShareState | None = result.state
    if result.error or s is None:
        return ShareStateRead(error_code=int(result.error))
    return ShareStateRead(
        error_code=0,
        state_epoch=s.state_epoch,
        start_offset=s.start_offset,
        delivery_complete_count=s.delivery_complete_count,
        state_batches=tuple(PersisterStateBatch(*b) for b in s.batches),
    )


def summary_answer(result: ShareResult) -> ShareStateSummary:
    s = result.state
    if result.error:
        return ShareStateSummary(error_code=int(result.error))
    if s is None:  # not initialized: as Kafka answers
        return ShareStateSummary(error_code=0, state_epoch=0, leader_epoch=0, start_offset=-1)
    return ShareStateSummary(
        error_code=0,
        state_epoch=s.state_epoch,
        leader_epoch=s.leader_epoch,
        start_offset=s.start_offset,
        delivery_complete_count=s.delivery_complete_count,
    )


class LocalSharePersister:
    """Kafka's Persister on one node (DefaultStatePersister without the network)."""

    def __init__(self, coordinator: ShareCoordinatorService) -> None:
        self._coordinator = coordinator

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int:
        k = share_key(key)
        r = await self._coordinator.run(
            k, lambda shard, now: shard.initialize(now, k, state_epoch, start_offset)
        )
        return int(r.error)

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateRead:
        k = share_key(key)
        return read_answer(
            await self._coordinator.run(k, lambda shard, now: shard.read(now, k, leader_epoch))
        )

    async def write_state(self, key: SharePartitionKey, write: ShareStateWrite) -> int:
        k = share_key(key)
        r = await self._coordinator.run(
            k,
            lambda shard, now: shard.write(
                now,
                k,
                state_epoch=write.state_epoch,
                leader_epoch=write.leader_epoch,
                start_offset=write.start_offset,
                delivery_complete_count=write.delivery_complete_count,
                batches=[
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in write.state_batches
                ],
            ),
        )
        return int(r.error)

    async def delete_state(self, key: SharePartitionKey) -> int:
        k = share_key(key)
        return int((await self._coordinator.run(k, lambda shard, now: shard.delete(k))).error)

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateSummary:
        k = share_key(key)
        return summary_answer(
            await self._coordinator.run(k, lambda shard, now: shard.summary(k), creates=False)
        )
