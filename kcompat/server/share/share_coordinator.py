"""The broker's side of the share coordinator: `__share_group_state`, appends and replay.

ShareCoordinatorShard (kcompat.coordinator.share_coordinator) is pure; this gives it what it lacks:

    caller --service.run(key, lambda shard, now: shard.write(now, key, ...))--> ShareResult
       1. records -> appended to __share_group_state, partition
                     abs(javaHashCode("group:topicId:partition")) % n, one v2 batch, before the
                     answer (on one node an append is durable at once: the page cache survives a
                     kill -9 of the broker; in cluster mode once replicated)
       2. the answer

The shard call and the append happen with no await in between, so calls from different
connections are applied to the state and to the log in one order. At start-up (one node) the
topic is read from log start to log end and replayed; in cluster mode a partition's records are
replayed when this broker becomes its leader (the shards port, shards.py).

`__share_group_state` is created on first need, as Kafka does: share.coordinator.state.topic.
num.partitions partitions, cleanup.policy=delete (KIP-932: each ShareUpdate of a share-partition
carries the same key, so compaction would lose all but the last). So that neither retention nor
growth loses or keeps what it should not, two timers do Kafka's housekeeping: every
share.coordinator.cold.partition.snapshot.interval.ms a share-partition whose newest snapshot is
that old gets a fresh one, and every share.coordinator.state.topic.prune.interval.ms the records
below the oldest newest-snapshot of a partition are deleted (SnapshotOffsets).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kcompat.coordinator.record_pair import Record
from kcompat.coordinator.share_coordinator import (
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    ShareKey,
    ShareResult,
    state_partition,
)
from kcompat.coordinator.share_coordinator.prune import SnapshotOffsets
from kcompat.log.errors import LogError
from kcompat.log.partition_log import PartitionLog
from kcompat.server.errors import ApiError
from kcompat.server.share.shards import AllSharesHere, ShareShardsPort
from kcompat.server.share.state_log import StateRecord, read_state_records
from kcompat.storage.topic_store import SHARE_GROUP_STATE, TopicInfo
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.records import Record as LogRecord
from kcompat.wire.records import build_batch

log = logging.getLogger("kcompat.server.share")

ShardCall = Callable[[ShareCoordinatorShard, int], ShareResult]


class ShareCoordinatorService:
    """One per broker: `broker.share_coordinator`. See the module docstring."""

    def __init__(
        self,
        *,
        now_ms: Callable[[], int],
        setting: Callable[[str], Any],
        lookup: Callable[[str], TopicInfo | None],
        create: Callable[[str], Any],
        partition_log: Callable[[str, int], PartitionLog],
        append: Callable[..., Any],
        topic_by_id: Callable[[uuid.UUID], TopicInfo | None],
        delete_records: Callable[[str, int, int], int],
        shards: Callable[[ShareCoordinatorService], ShareShardsPort] = AllSharesHere,
    ) -> None:
        self.now_ms = now_ms
        self._setting = setting
        self.lookup = lookup
        self._create = create
        self.partition_log = partition_log
        self._append = append
        self._topic_by_id = topic_by_id
        self._shard: ShareCoordinatorShard | None = None
        self.snapshots = SnapshotOffsets()  # how much of each partition a prune may drop
        self._delete_records = delete_records
        self._timers: list[asyncio.Task[None]] = []
        self._closed = False
        self.shards = shards(self)

    @property
    def shard(self) -> ShareCoordinatorShard:
        assert self._shard is not None, "ShareCoordinatorService.start() builds the shard"
        return self._shard

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.begin()
        if not self.shards.loads_at_start:
            return  # cluster mode: partitions are loaded as their leadership arrives
        loaded = 0
        for p in range(self.num_partitions()):
            loaded += self.replay(p, await asyncio.to_thread(self.read_partition, p))
        self._loaded(loaded)

    def start_now(self) -> None:
        """start() on the event loop's thread, for a coordinator built by its first request once the
        broker runs: a __share_group_state made since the start holds a few records at most."""
        self.begin()
        if self.shards.loads_at_start:
            self._loaded(sum(self.replay(p, self.read_partition(p)) for p in range(self.num_partitions())))

    def begin(self) -> None:
        self._shard = ShareCoordinatorShard(
            ShareCoordinatorConfig(
                int(self._setting("share.coordinator.snapshot.update.records.per.snapshot"))
            ),
            self._partition_exists,
        )
        cold = int(self._setting("share.coordinator.cold.partition.snapshot.interval.ms"))
        prune = int(self._setting("share.coordinator.state.topic.prune.interval.ms"))
        self._timers = [
            asyncio.create_task(
                self._every(cold, lambda: self.snapshot_cold(cold)), name="share-cold-snapshots"
            ),
            asyncio.create_task(self._every(prune, self.prune), name="share-state-prune"),
        ]

    def _loaded(self, loaded: int) -> None:
        if loaded:
            log.info(
                "loaded %d record(s) of %s: %d share-partition(s)",
                loaded,
                SHARE_GROUP_STATE,
                len(self.shard.states),
            )

    async def close(self) -> None:
        self._closed = True
        for t in self._timers:
            t.cancel()
        await asyncio.gather(*self._timers, return_exceptions=True)
        self._timers = []
        await self.shards.close()

    async def _every(self, interval_ms: int, step: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await step()
            except Exception:
                log.exception("share coordinator timer failed")

    # --- housekeeping ----------------------------------------------------------------------------

    async def snapshot_cold(self, interval_ms: int) -> None:
        """share.coordinator.cold.partition.snapshot.interval.ms: re-snapshot the share-partitions
        whose newest snapshot is that old, partition by partition of those served here."""
        n = self.num_partitions()
        for p in self.shards.served(n):
            result = self.shard.cold_snapshots(self.now_ms(), interval_ms, _in_partition(p, n))
            if result.records:
                await self._store(p, list(result.records))

    async def prune(self) -> None:
        """share.coordinator.state.topic.prune.interval.ms: drop (DeleteRecords) what lies below the
        newest snapshot of every share-partition of a partition, never past its high watermark."""
        for p in self.shards.served(self.num_partitions()):
            plog = self.partition_log(SHARE_GROUP_STATE, p)
            point = min(self.snapshots.prune_point(p, plog.log_end_offset), plog.high_watermark)
            if point > plog.log_start_offset:
                try:
                    self._delete_records(SHARE_GROUP_STATE, p, point)
                except LogError as e:
                    log.warning("cannot prune %s-%d below offset %d: %s", SHARE_GROUP_STATE, p, point, e)

    # --- the topic -----------------------------------------------------------------------------

    async def ensure_topic(self) -> int:
        """The partition count of __share_group_state, creating the topic first if need be."""
        t = self.lookup(SHARE_GROUP_STATE)
        if t is None:
            t = await self._create(SHARE_GROUP_STATE)
        assert t is not None
        return t.partitions

    def num_partitions(self) -> int:
        t = self.lookup(SHARE_GROUP_STATE)
        return 0 if t is None else t.partitions

    def partition_of(self, key: ShareKey) -> int:
        return state_partition(key, self.num_partitions())

    def read_partition(self, p: int) -> list[StateRecord]:
        """Every record of partition `p`, oldest first (blocking: run it in a thread)."""
        return read_state_records(self.partition_log(SHARE_GROUP_STATE, p))

    def replay(self, p: int, records: list[StateRecord]) -> int:
        for offset, key, value in records:
            try:
                self.shard.replay(key, value)
                self.snapshots.note(p, offset, key, value)
            except DecodeError as e:
                log.error(
                    "skipping an unreadable %s-%d record at offset %d: %s", SHARE_GROUP_STATE, p, offset, e
                )
        return len(records)

    def unload(self, p: int) -> None:
        """Forget the share-partitions of partition `p` (its leadership moved, or an append failed)."""
        n = self.num_partitions()
        if self._shard is not None and n > 0:
            self._shard.unload(_in_partition(p, n))
        self.snapshots.drop(p)

    # --- requests ------------------------------------------------------------------------------

    async def run(self, key: ShareKey, call: ShardCall, *, creates: bool = True) -> ShareResult:
        """Call the shard for `key` with the current time, store the records it made, and answer.

        `creates=False` for the calls that only read: they do not make the topic (a share-partition
        of a broker without it reads as never written)."""
        if self._closed:
            return ShareResult(
                error=ErrorCode.COORDINATOR_NOT_AVAILABLE, message="The broker is shutting down."
            )
        if creates:
            try:
                await self.ensure_topic()
            except ApiError as e:  # cluster mode: the controller is creating it; the caller retries
                return ShareResult(error=ErrorCode.COORDINATOR_NOT_AVAILABLE, message=e.message)
        p = self.partition_of(key) if self.num_partitions() > 0 else -1
        code = await self.shards.admit(p)
        if code != ErrorCode.NONE:
            return ShareResult(error=code)
        result = call(self.shard, self.now_ms())
        if not result.records:
            return result
        code = await self._store(p, list(result.records))
        if code != ErrorCode.NONE:
            return ShareResult(error=code)
        return result

    async def _store(self, p: int, records: list[Record]) -> ErrorCode:
        if self.shards.short_isr(p):
            # Kafka appends with acks=all: NOT_ENOUGH_REPLICAS, answered COORDINATOR_NOT_AVAILABLE;
            # the state the call changed goes back to what the log holds.
            log.warning(
                "%s-%d: ISR below min.insync.replicas; %d record(s) refused",
                SHARE_GROUP_STATE,
                p,
                len(records),
            )
            self.shards.reload(p)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        now = self.now_ms()
        t = self.lookup(SHARE_GROUP_STATE)
        epoch = self.shards.leader_epoch(p)
        if t is None:  # deleted under us (it cannot be through the APIs)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        batch = bytearray(build_batch([LogRecord(i, now, r.key, r.value) for i, r in enumerate(records)]))
        try:
            info = self._append(
                SHARE_GROUP_STATE,
                p,
                batch,
                leader_epoch=t.leader_epoch if epoch is None else epoch,
                now_ms=now,
            )
        except LogError as e:
            # Nothing is answered as stored; the state the call changed goes back to what the log says.
            log.error(
                "cannot store %d share state record(s) in %s-%d: %s", len(records), SHARE_GROUP_STATE, p, e
            )
            self.shards.reload(p)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        first = info.last_offset - len(records) + 1
        for i, r in enumerate(records):
            self.snapshots.note(p, first + i, r.key, r.value)
        return await self.shards.replicated({p: info.last_offset})

    # --- what the shard asks of the broker -----------------------------------------------------

    def _partition_exists(self, topic_id: uuid.UUID, partition: int) -> bool:
        t = self._topic_by_id(topic_id)
        return t is not None and 0 <= partition < t.partitions


def _in_partition(p: int, n: int) -> Callable[[ShareKey], bool]:
    return lambda key: state_partition(key, n) == p
