"""Cluster mode: the transaction coordinator's writes (the TxnWrites port of
transactions/txn_writes.py), as Kafka's TransactionStateManager and TransactionMarkerChannelManager
make them:

    records ─► appended as the `__transaction_state` partition's leader (txn_shards.py) and answered
               once replicated; a refused or unreplicated write reloads its shards, so no state
               the log does not hold stays
    markers ─► to each partition's leader through txn_channels.py after the request is answered;
               Complete* once all are acknowledged (replicated), unless the transaction left this
               coordinator meanwhile; the state moves to it only once its record is replicated
    a transactional batch whose coordinator is elsewhere is verified (transactions v2: added)
    there with AddPartitionsToTxn (TxnVerifier)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from kcompat.coordinator.transaction import MarkerJob, TxnResult
from kcompat.coordinator.transaction.coordinator import TxnRecord
from kcompat.server.cluster.txn_channels import TxnMarkerSender, TxnVerifier
from kcompat.server.cluster.txn_shards import TxnShards
from kcompat.server.errors import ApiError
from kcompat.server.transactions.txn_writes import TopicPartition, TxnHost, TxnLogWrites
from kcompat.storage.topic_store import TRANSACTION_STATE, TopicInfo
from kcompat.wire.error_codes import ErrorCode

log = logging.getLogger("kcompat.server.transactions")


class ReplicatedTxnWrites(TxnLogWrites):
    def __init__(
        self, service: TxnHost, *, shards: TxnShards, markers: TxnMarkerSender, verifier: TxnVerifier
    ) -> None:
        super().__init__(service)
        self.shards = shards
        self.markers = markers  # markers to other brokers' partitions
        self.verifier = verifier  # produce verification at another broker
        # (transactional id, coordinator epoch) with markers under way: a reload's new epoch gets its own
        self._sending: set[tuple[str, int]] = set()
        self._writes: set[asyncio.Task[None]] = set()

    def _state_epoch(self, p: int, t: TopicInfo) -> int | None:
        return None if self.shards.led(p) is None else self.shards.leader_epoch(p)

    def _leader_epoch(self, topic: str, partition: int, t: TopicInfo) -> int | None:
        part = self.shards.leader_of(topic, partition)  # only the partition's leader appends
        return None if part is None else part.leader_epoch

    async def recover(self) -> None:
        """Nothing at start: shards load and unload with leadership (TxnShards.on_image)."""

    def not_here(self, key: str) -> ErrorCode:
        return self.shards.error(key)

    def state_topic_missing(self, e: ApiError) -> None:
        pass  # the controller creates it; the client retries COORDINATOR_NOT_AVAILABLE

    async def commit(self, result: TxnResult) -> ErrorCode:
        code = await self._store_replicated(result.records)
        if code:
            return code
        if result.markers is not None:
            self.write_markers(result.markers)
        return ErrorCode.NONE

    def apply(self, result: TxnResult) -> None:
        """The markers only once the Prepare* is replicated."""
        self._spawn(self._apply_replicated(result), "txn-write")

    async def _apply_replicated(self, result: TxnResult) -> None:
        if await self._store_replicated(result.records) == ErrorCode.NONE and result.markers is not None:
            self.write_markers(result.markers)

    async def _store_replicated(self, records: list[TxnRecord]) -> ErrorCode:
        """Append as the partitions' leader and wait for the high watermark (Kafka's acks=all
        append of the transaction log); Kafka's codes for the client: NOT_COORDINATOR (leadership
        lost), COORDINATOR_NOT_AVAILABLE (ISR short, timed out)."""
        shards = self.shards
        if not records:
            return ErrorCode.NONE
        n = shards.table.num_partitions
        short = shards.below_min_isr({p % n for p, _, _ in records}) if n else []
        if short:
            log.warning(
                "%s partition(s) %s: ISR below min.insync.replicas; %d record(s) refused",
                TRANSACTION_STATE,
                short,
                len(records),
            )
            for p in short:
                shards.reload(p)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        written, failed = self.store(records)
        code = ErrorCode.NOT_COORDINATOR if failed else await shards.replicated(written)
        if code:
            for p in {*written, *failed}:
                shards.reload(p)
        return code

    def retry(self) -> None:
        pass  # send retries a partition until its leader acknowledges

    def write_markers(self, job: MarkerJob) -> None:
        """To each partition's leader, asynchronously."""
        shards = self.shards
        key = (job.transactional_id, shards.leader_epoch(shards.table.partition(job.transactional_id)))
        if key not in self._sending:
            self._sending.add(key)
            self._spawn(self._send_markers(job, key[1]), "txn-markers")

    async def _send_markers(self, job: MarkerJob, epoch: int) -> None:
        """Complete* once every partition's leader acknowledged the marker (after replication),
        unless the transaction left this coordinator meanwhile."""
        shards = self.shards
        p = shards.table.partition(job.transactional_id)  # its leader epoch is Kafka's coordinator epoch

        def still_mine() -> bool:
            return shards.error(job.transactional_id) == ErrorCode.NONE and shards.leader_epoch(p) == epoch

        try:
            done = await self.markers.send(
                job.transactional_id,
                job.producer_id,
                job.producer_epoch,
                job.commit,
                epoch,
                job.partitions,
                still_mine,
            )
        finally:
            self._sending.discard((job.transactional_id, epoch))
        if not (done and still_mine()):
            return
        # Kafka's pending transition: the state stays in Prepare* (requests for the id get
        # CONCURRENT_TRANSACTIONS) until the Complete* record is replicated, so the next
        # transaction's Ongoing can only follow it in the log (a reload reads the last one).
        coordinator, now = self.service.coordinator, self.service.now_ms()
        result = coordinator.completion(job, now)
        if await self._store_replicated(result.records) == ErrorCode.NONE and still_mine():
            coordinator.complete(job, now)

    async def write_markers_request(
        self, tps: list[TopicPartition], producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> dict[TopicPartition, ErrorCode]:
        """Answered once replicated (acks=all)."""
        return await self.markers.write_replicated(tps, producer_id, epoch, commit, coordinator_epoch)

    async def verify_elsewhere(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        tp: TopicPartition,
        transaction_abortable: bool,
        add: bool,
    ) -> tuple[ErrorCode, str | None]:
        return await self.verifier.verify(txn_id, producer_id, epoch, tp, transaction_abortable, add=add)

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def close(self) -> None:
        for w in list(self._writes):
            w.cancel()
        await asyncio.gather(*self._writes, return_exceptions=True)
        await self.shards.close()  # loads under way
        self.markers.channels.close()
        self.verifier.channels.close()
