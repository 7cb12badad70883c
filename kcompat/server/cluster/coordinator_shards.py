"""Cluster mode: a coordinator's shards, one per partition of its state topic this broker leads
(Kafka's CoordinatorRuntime driven by the metadata image: onElection / onResignation). The group
coordinator (`__consumer_offsets`, group_shards.py) and the transaction coordinator
(`__transaction_state`, txn_shards.py) differ only in how a partition's records are read, replayed
and dropped; leadership, loading and waiting for replication are this one class's.

    image published ──on_image──► for each partition of the state topic hosted here:
        led at epoch e, not loaded at e ─► unload the old shard (if any), LOADING, read the
                                            partition's log in a worker thread, replay ─► ACTIVE
        no longer led                    ─► unload: the shard's keys leave the coordinator

The decisions are the pure ShardTable's (coordinator/shards.py). Writes are appended as leader and
answered once the high watermark passes them (`replicated`), as Kafka's coordinators append with
acks=all: leadership lost while waiting is NOT_COORDINATOR, not replicated within the coordinator's
timeout COORDINATOR_NOT_AVAILABLE (the records stay in the leader's log, as in Kafka).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kcompat.coordinator.shards import ShardTable
from kcompat.server.delayed_fetch import FetchWaiters
from kcompat.storage.topic_store import TopicInfo
from kcompat.wire.error_codes import ErrorCode

if TYPE_CHECKING:
    from kcompat.server.cluster.replication.partition import Partition

Service = TypeVar("Service")


class CoordinatorShards(Generic[Service]):
    """Subclasses say what a shard is: `_read` (blocking, in a thread), `_replay`, `_drop`."""

    topic_name = ""
    log = logging.getLogger("kcompat.server.coordinator")

    def __init__(
        self,
        service: Service,
        *,
        partitions: dict[tuple[str, int], Partition],
        waiters: FetchWaiters,
        topic: Callable[[str], TopicInfo | None],
        timeout_ms: Callable[[], int],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = service  # the coordinator's broker side, whose records the shards read and replay
        self.table = ShardTable()
        self._partitions = partitions  # the ReplicaManager's: leader or follower, as the image says
        self._waiters = waiters
        self._topic = topic
        self._timeout_ms = timeout_ms
        self._clock = clock  # seconds, for the replication timeout (a test's can be moved on)
        self._loads: set[asyncio.Task[None]] = set()

    # --- what a coordinator's shard is -----------------------------------------------------------

    def _read(self, p: int) -> Any:
        raise NotImplementedError

    def _replay(self, p: int, records: Any) -> str:
        """Apply what `_read` returned; a few words for the log line."""
        raise NotImplementedError

    def _drop(self, p: int) -> None:
        raise NotImplementedError

    # --- leadership ----------------------------------------------------------------------------

    def leader_epoch(self, p: int) -> int:
        part = self._partitions.get((self.topic_name, p))
        return -1 if part is None else part.leader_epoch

    def led(self, p: int) -> Partition | None:
        return self.leader_of(self.topic_name, p)

    def leader_of(self, topic: str, p: int) -> Partition | None:
        """Any partition of this broker's, when this broker leads it (markers go to leaders)."""
        part = self._partitions.get((topic, p))
        return part if part is not None and part.is_leader else None

    def on_image(self) -> None:
        """After the replica manager applied an image: load and unload shards to match it."""
        t = self._topic(self.topic_name)
        n = t.partitions if t is not None else 0
        for p in [p for p in self.table.shards if p >= n]:  # the topic went (or shrank)
            self.table.resign(p)
            self._unload(p)
        self.table.num_partitions = n
        for p in range(n):
            part = self.led(p)
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
        part = self.led(p)
        if epoch is not None and part is not None and self.table.elect(p, part.leader_epoch):
            self._start_load(p, part.leader_epoch)

    def _start_load(self, p: int, epoch: int) -> None:
        name = f"{self.topic_name}-shard-load-{p}"
        task = asyncio.get_running_loop().create_task(self._load(p, epoch), name=name)
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _load(self, p: int, epoch: int) -> None:
        started = self._clock()
        try:
            records = await asyncio.to_thread(self._read, p)
        except Exception:
            self.log.exception("cannot load the coordinator of %s-%d", self.topic_name, p)
            self.table.resign(p)
            return
        if not self.table.loaded(p, epoch):
            return  # leadership moved while reading: a newer load (or none) is wanted
        what = self._replay(p, records)
        self.log.info(
            "coordinator for %s-%d loaded at epoch %d: %s, in %d ms",
            self.topic_name,
            p,
            epoch,
            what,
            (self._clock() - started) * 1000,
        )

    def _unload(self, p: int) -> None:
        if self.table.num_partitions <= 0:
            return
        self._drop(p)
        self.log.info("coordinator for %s-%d unloaded", self.topic_name, p)

    # --- requests ------------------------------------------------------------------------------

    def error(self, key: str) -> ErrorCode:
        return self.table.error(key)

    def partition_error(self, p: int) -> ErrorCode:
        return self.table.partition_error(p)

    def below_min_isr(self, partitions: set[int]) -> list[int]:
        """Those of `partitions` whose ISR is smaller than min.insync.replicas (acks=all would fail)."""
        return sorted(
            p for p in partitions if (part := self.led(p)) is not None and len(part.state.isr) < part.min_isr
        )

    async def replicated(self, written: dict[int, int]) -> ErrorCode:
        """Wait until each partition's high watermark passes the last offset written to it."""
        return await self._await_hw(written)

    async def settled(self, key: str) -> ErrorCode:
        """Wait until everything written to the key's partition is replicated (committed reads)."""
        p = self.table.partition(key)
        part = self.led(p)
        if part is None:
            return ErrorCode.NOT_COORDINATOR
        return await self._await_hw({p: part.log.log_end_offset - 1})

    async def _await_hw(self, written: dict[int, int]) -> ErrorCode:
        deadline = self._clock() + self._timeout_ms() / 1000
        while True:
            left = []
            for p, last in written.items():
                part = self.led(p)
                if part is None:
                    if self.table.resign(p):
                        self._unload(p)
                    return ErrorCode.NOT_COORDINATOR
                if part.high_watermark <= last:
                    left.append((self.topic_name, p))
            if not left:
                return ErrorCode.NONE
            remaining = deadline - self._clock()
            if remaining <= 0 or self._waiters.closed:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            await self._waiters.wait(left, remaining)

    async def close(self) -> None:
        for task in list(self._loads):
            task.cancel()
        await asyncio.gather(*self._loads, return_exceptions=True)
