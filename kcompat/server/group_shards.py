"""Cluster mode: the group coordinator's shards, one per `__consumer_offsets` partition this broker
leads (Kafka's CoordinatorRuntime driven by the metadata image: onElection / onResignation).

    image published ──on_image──► for each __consumer_offsets partition hosted here:
        led at epoch e, not loaded at e ─► unload the old shard (if any), LOADING, replay the
                                            partition's log in a worker thread ─► ACTIVE
        no longer led                    ─► unload: its groups and offsets leave the coordinator,
                                            JoinGroup/SyncGroup waiting in them get NOT_COORDINATOR

The decisions are the pure ShardTable's (coordinator/shards.py). Writes: the GroupService appends
a call's records as leader (the partition's leader epoch stamped), then `replicated` waits until
the high watermark passes them, as Kafka's coordinator writes with acks=all and completes on the
high watermark; errors map as Kafka's GroupCoordinatorService maps them (leadership lost or a
storage error: NOT_COORDINATOR, and the shard is dropped or loaded again from the log so that no
state the log does not hold stays; not replicated in offsets.commit.timeout.ms:
COORDINATOR_NOT_AVAILABLE, the records stay in the leader's log as in Kafka). Reads of committed
offsets first wait for the partition's high watermark to reach its log end (`settled`), so an
OffsetFetch never shows an offset a failover could take back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from kcompat.coordinator.shards import ShardTable
from kcompat.server.delayed_fetch import FetchWaiters
from kcompat.storage.topic_store import CONSUMER_OFFSETS, TopicInfo
from kcompat.wire.error_codes import ErrorCode

if TYPE_CHECKING:
    from kcompat.coordinator import GroupCoordinator
    from kcompat.server.offsets_topic import OffsetsTopic
    from kcompat.server.partition import Partition


class GroupService(Protocol):
    """What the shards need of the broker's GroupService (group_service.py)."""

    offsets_topic: OffsetsTopic

    @property
    def coordinator(self) -> GroupCoordinator: ...
    def now_ms(self) -> int: ...
    def wake(self) -> None: ...
    def fail_waiting(self, tokens: Iterable[int]) -> None: ...


log = logging.getLogger("kcompat.server.groups")


class GroupShards:
    def __init__(
        self,
        service: GroupService,
        *,
        partitions: dict[tuple[str, int], Partition],
        waiters: FetchWaiters,
        topic: Callable[[str], TopicInfo | None],
        timeout_ms: Callable[[], int],
    ) -> None:
        self.service = service
        self.table = ShardTable()
        self._partitions = partitions  # the ReplicaManager's: leader or follower, as the image says
        self._waiters = waiters
        self._topic = topic
        self._timeout_ms = timeout_ms
        self._loads: set[asyncio.Task[None]] = set()
        service.offsets_topic.leader_epoch = self._leader_epoch

    def _leader_epoch(self, p: int) -> int:
        part = self._partitions.get((CONSUMER_OFFSETS, p))
        return -1 if part is None else part.leader_epoch

    def _led(self, p: int) -> Partition | None:
        part = self._partitions.get((CONSUMER_OFFSETS, p))
        return part if part is not None and part.is_leader else None

    # --- leadership ----------------------------------------------------------------------------

    def on_image(self) -> None:
        """After the replica manager applied an image: load and unload shards to match it."""
        t = self._topic(CONSUMER_OFFSETS)
        n = t.partitions if t is not None else 0
        for p in [p for p in self.table.shards if p >= n]:  # the topic went (or shrank)
            self.table.resign(p)
            self._unload(p)
        self.table.num_partitions = n
        for p in range(n):
            part = self._led(p)
            if part is None:
                if self.table.resign(p):
                    self._unload(p)
                continue
            had = self.table.epoch(p)
            if self.table.elect(p, part.leader_epoch):
                if had is not None:
                    self._unload(p)
                self._start_load(p, part.leader_epoch)

    def reload(self, p: int) -> None:
        """Throw shard `p`'s state away and load it again from the log (an append that failed)."""
        epoch = self.table.epoch(p)
        self.table.resign(p)
        self._unload(p)
        part = self._led(p)
        if epoch is not None and part is not None and self.table.elect(p, part.leader_epoch):
            self._start_load(p, part.leader_epoch)

    def _start_load(self, p: int, epoch: int) -> None:
        task = asyncio.get_running_loop().create_task(self._load(p, epoch), name=f"group-shard-load-{p}")
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _load(self, p: int, epoch: int) -> None:
        started = time.monotonic()
        topic = self.service.offsets_topic
        try:
            records = await asyncio.to_thread(topic.read_partition, p)
        except Exception:
            log.exception("cannot load the group coordinator of %s-%d", CONSUMER_OFFSETS, p)
            self.table.resign(p)
            return
        if not self.table.loaded(p, epoch):
            return  # leadership moved while reading: a newer load (or none) is wanted
        coordinator = self.service.coordinator
        before = len(coordinator.groups)
        coordinator.load(records, self.service.now_ms())
        for producer_id in list(topic.pending_txn):
            txn = [kv for kv in topic.pending_txn.pop(producer_id)]
            coordinator.txn_offsets.replay(producer_id, txn)
        self.service.wake()
        log.info("group coordinator for %s-%d loaded at epoch %d: %d record(s), %d group(s), in %d ms",
                 CONSUMER_OFFSETS, p, epoch, len(records), len(coordinator.groups) - before,
                 (time.monotonic() - started) * 1000)  # fmt: skip

    def _unload(self, p: int) -> None:
        n = self.table.num_partitions
        if n <= 0:
            return
        tokens = self.service.coordinator.unload(lambda g: self.table.partition(g) == p)
        self.service.fail_waiting(tokens)
        log.info("group coordinator for %s-%d unloaded", CONSUMER_OFFSETS, p)

    # --- requests ------------------------------------------------------------------------------

    def error(self, group_id: str) -> ErrorCode:
        return self.table.error(group_id)

    def below_min_isr(self, partitions: set[int]) -> list[int]:
        """Those of `partitions` whose ISR is smaller than min.insync.replicas (acks=all would fail)."""
        return sorted(
            p for p in partitions if (part := self._led(p)) is not None and len(part.state.isr) < part.min_isr
        )

    async def replicated(self, written: dict[int, int]) -> ErrorCode:
        """Wait until each partition's high watermark passes the last offset written to it."""
        return await self._await_hw(written)

    async def settled(self, group_id: str) -> ErrorCode:
        """Wait until everything written to the group's partition is replicated (committed reads)."""
        p = self.table.partition(group_id)
        part = self._led(p)
        if part is None:
            return ErrorCode.NOT_COORDINATOR
        return await self._await_hw({p: part.log.log_end_offset - 1})

    async def _await_hw(self, written: dict[int, int]) -> ErrorCode:
        deadline = time.monotonic() + self._timeout_ms() / 1000
        while True:
            left = []
            for p, last in written.items():
                part = self._led(p)
                if part is None:
                    if self.table.resign(p):
                        self._unload(p)
                    return ErrorCode.NOT_COORDINATOR
                if part.high_watermark <= last:
                    left.append((CONSUMER_OFFSETS, p))
            if not left:
                return ErrorCode.NONE
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._waiters.closed:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            await self._waiters.wait(left, remaining)

    async def close(self) -> None:
        for task in list(self._loads):
            task.cancel()
        await asyncio.gather(*self._loads, return_exceptions=True)
