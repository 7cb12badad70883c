"""The leader's ISR changes, through AlterPartition (key 56, v3) to the active controller (Kafka's
Partition.maybeExpandIsr / maybeShrinkIsr and AlterPartitionManager).

* Expand: after a follower's Fetch, a replica outside the ISR that has caught up (isr.may_join_isr:
  its log end at the high watermark and into the leader's epoch; registered, unfenced, not shutting
  down, fetching with its current broker epoch) is proposed.
* Shrink: every replica.lag.time.max.ms / 2, ISR members that have not caught up within
  replica.lag.time.max.ms are proposed out.
* One AlterPartition in flight per partition (Partition.pending_isr); the high watermark counts
  the maximal ISR meanwhile. The answer's ISR and partition epoch are applied at once (the image
  brings the same change later); an error drops the proposal, and the next fetch or check makes a
  new one from the state then. NOT_CONTROLLER moves the channel to the quorum leader.
Each proposal names every ISR member with the broker epoch it last fetched with (KIP-903; -1 when
unknown, the leader its own).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from kcompat.metadata.image import MetadataImage
from kcompat.server.cluster.controller_channel import ControllerChannel, ControllerUnavailable
from kcompat.server.cluster.replication import isr as rules
from kcompat.server.cluster.replication.partition import Partition
from kcompat.server.delayed_fetch import FetchWaiters
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_partition import ALTER_PARTITION

log = logging.getLogger("kcompat.replication")

ALTER_PARTITION_VERSION = 3


class IsrManager:
    def __init__(
        self,
        *,
        node_id: int,
        channel: ControllerChannel,
        broker_epoch: Callable[[], int],
        image: Callable[[], MetadataImage],
        quorum_leader: Callable[[], tuple[str, int] | None],
        partitions: dict[tuple[str, int], Partition],
        waiters: FetchWaiters,
        lag_max_ms: int,
        now_ms: Callable[[], int],
    ) -> None:
        self.node_id = node_id
        self._channel = channel
        self._broker_epoch = broker_epoch
        self._image = image
        self._quorum_leader = quorum_leader
        self._partitions = partitions  # the ReplicaManager's
        self._waiters = waiters
        self.lag_max_ms = lag_max_ms
        self._now_ms = now_ms
        self._queue: asyncio.Queue[tuple[Partition, tuple[int, ...]]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        # ISR changes this leader committed (Kafka's IsrShrinksPerSec / IsrExpandsPerSec meters);
        # the controller's own (fencing a broker) reach us through the image and are not counted.
        self.isr_shrinks = 0
        self.isr_expands = 0

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._send_loop(), name="alter-partition"),
            asyncio.create_task(self._shrink_loop(), name="isr-shrink"),
        ]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._channel.close()

    # --- decisions ---

    def maybe_expand(self, p: Partition, replica_id: int) -> None:
        """After a Fetch from `replica_id`: propose it into the ISR when KIP-903 allows."""
        if not p.is_leader or p.pending_isr is not None or replica_id in p.state.isr:
            return
        f = p.followers.get(replica_id)
        if f is None:
            return
        b = self._image().brokers.get(replica_id)
        if not rules.may_join_isr(
            f,
            p.log.high_watermark,
            p.leader_epoch_start,
            registered_epoch=None if b is None else b.epoch,
            fenced=b is None or b.fenced,
            in_controlled_shutdown=b is not None and b.in_controlled_shutdown,
        ):
            return
        self._propose(p, (*p.state.isr, replica_id), f"expand with {replica_id}")

    def check_shrink(self) -> None:
        now = self._now_ms()
        for p in list(self._partitions.values()):
            if not p.is_leader or p.pending_isr is not None:
                continue
            out = rules.out_of_sync(p.state.isr, self.node_id, p.followers, now, self.lag_max_ms)
            if out:
                self._propose(p, tuple(r for r in p.state.isr if r not in out), f"shrink, {out} out of sync")

    def _propose(self, p: Partition, isr: tuple[int, ...], why: str) -> None:
        p.pending_isr = isr
        log.info(
            "%s-%d: AlterPartition isr %s -> %s (%s)", p.topic, p.index, list(p.state.isr), list(isr), why
        )
        self._queue.put_nowait((p, isr))

    # --- the controller ---

    async def _shrink_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lag_max_ms / 2000)
            self.check_shrink()

    async def _send_loop(self) -> None:
        while True:
            p, isr = await self._queue.get()
            if p.pending_isr != isr or self._partitions.get((p.topic, p.index)) is not p:
                continue  # superseded meanwhile
            base = set(p.state.isr)  # the image may bring the committed ISR before our answer does
            try:
                r = await self._send(p, isr)
            except ControllerUnavailable as e:
                log.info("%s-%d: AlterPartition failed: %s", p.topic, p.index, e)
                self._channel.rotate()
                p.pending_isr = None
                await asyncio.sleep(0.2)
                continue
            except Exception:
                log.exception("%s-%d: AlterPartition", p.topic, p.index)
                p.pending_isr = None
                continue
            self._answer(p, r, base)

    async def _send(self, p: Partition, isr: tuple[int, ...]) -> Any:
        topic_id = self._image().topic_ids.get(p.topic)
        epochs = {
            r: (
                self._broker_epoch()
                if r == self.node_id
                else (p.followers[r].broker_epoch if r in p.followers else -1)
            )
            for r in isr
        }
        body = {
            "broker_id": self.node_id,
            "broker_epoch": self._broker_epoch(),
            "topics": [
                {
                    "topic_id": topic_id or uuid.UUID(int=0),
                    "partitions": [
                        {
                            "partition_index": p.index,
                            "leader_epoch": p.state.leader_epoch,
                            "new_isr_with_epochs": [
                                {"broker_id": r, "broker_epoch": e} for r, e in epochs.items()
                            ],
                            "leader_recovery_state": 0,
                            "partition_epoch": p.state.partition_epoch,
                        }
                    ],
                }
            ],
        }
        r = await self._channel.call(ALTER_PARTITION.key, ALTER_PARTITION_VERSION, body)
        if r.error_code == ErrorCode.NOT_CONTROLLER:
            leader = self._quorum_leader()
            if leader is not None:
                self._channel.redirect(*leader)
            else:
                self._channel.rotate()
            r = await self._channel.call(ALTER_PARTITION.key, ALTER_PARTITION_VERSION, body)
        return r

    def _answer(self, p: Partition, r: Any, base: set[int]) -> None:
        part = (
            r.topics[0].partitions[0] if r.error_code == 0 and r.topics and r.topics[0].partitions else None
        )
        error = r.error_code if part is None else part.error_code
        if error != 0:
            log.info("%s-%d: AlterPartition refused: %s", p.topic, p.index, ErrorCode.of(error).name)
            p.pending_isr = None
            return
        assert part is not None
        committed = set(part.isr)
        self.isr_shrinks += bool(base - committed)
        self.isr_expands += bool(committed - base)
        if p.alter_done(part.leader_epoch, tuple(part.isr), part.partition_epoch):
            log.info(
                "%s-%d: isr now %s (partition epoch %d)",
                p.topic,
                p.index,
                list(part.isr),
                part.partition_epoch,
            )
            self._waiters.notify((p.topic, p.index))  # the HW may have moved
