"""How the transaction coordinator's decisions become durable and its markers reach the partitions:
the port TransactionService writes through, and a single node's writes.

    TransactionService ──writes──► TxnWrites
        ├── LocalTxnWrites (here): every step a synchronous append on this node, with no await
        │   between, so the markers are written before the EndTxn is even answered (Kafka answers
        │   after PrepareCommit and writes them after; a client cannot tell). A marker the disk
        │   refuses leaves the transaction in Prepare*: the timer retries it, and a restart writes
        │   the markers of every transaction it finds in Prepare*.
        └── ReplicatedTxnWrites (cluster/txn_writes.py, given by cluster/assembly.py): records
            answered once replicated, markers sent to each partition's leader after the answer.

TxnLogWrites is what both do alike: a call's records appended to `__transaction_state`, one batch
per partition, and one marker appended to a partition led here (WriteTxnMarkers), each stamped
with the leader epoch the subclass says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kcompat.log.errors import LogError
from kcompat.log.partition_log import PartitionLog
from kcompat.server.errors import ApiError
from kcompat.storage.topic_store import CONSUMER_OFFSETS, TRANSACTION_STATE, TopicInfo
from kcompat.wire.control_batch import end_txn_marker
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.records import Record, build_batch

if TYPE_CHECKING:
    from kcompat.coordinator.transaction import MarkerJob, TransactionCoordinator, TxnResult
    from kcompat.coordinator.transaction.coordinator import TxnRecord

log = logging.getLogger("kcompat.server.transactions")

COORDINATOR_EPOCH = 0  # one node, never a new coordinator
TopicPartition = tuple[str, int]


class TxnHost(Protocol):
    """What the writes need of the TransactionService."""

    now_ms: Callable[[], int]
    lookup: Callable[[str], TopicInfo | None]
    append: Callable[..., Any]
    partition_log: Callable[[str, int], PartitionLog]

    @property
    def coordinator(self) -> TransactionCoordinator: ...
    def settle_offsets(self, producer_id: int, commit: bool, partition: int) -> None: ...
    def offsets_shard_error(self, partition: int) -> ErrorCode: ...
    def read_partition(self, p: int) -> list[tuple[bytes, bytes | None]]: ...


class TxnWrites(Protocol):
    async def recover(self) -> None:
        """At start, after the coordinator is built: what the log holds, replayed."""

    def not_here(self, key: str) -> ErrorCode:
        """NONE when this broker is the coordinator of transactional id `key` now."""

    def state_topic_missing(self, e: ApiError) -> None:
        """`__transaction_state` could not be created for a request."""

    async def commit(self, result: TxnResult) -> ErrorCode:
        """A request's result stored and its markers started; NONE once it may be answered."""

    def apply(self, result: TxnResult) -> None:
        """A timer's result stored and its markers started (nobody waits for it)."""

    def store(self, records: list[TxnRecord]) -> tuple[dict[int, int], set[int]]: ...
    def write_markers(self, job: MarkerJob) -> None: ...
    def retry(self) -> None:
        """Markers that failed before, tried again (the abort timer's round)."""

    def write_marker(
        self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> ErrorCode: ...
    async def write_markers_request(
        self, tps: list[TopicPartition], producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> dict[TopicPartition, ErrorCode]:
        """WriteTxnMarkers: each partition's code once its marker is written (durable)."""

    async def verify_elsewhere(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        tp: TopicPartition,
        transaction_abortable: bool,
        add: bool,
    ) -> tuple[ErrorCode, str | None]:
        """Ask the coordinator of `txn_id` on another broker whether (or make it so that) `tp` is
        in the producer's transaction."""

    async def close(self) -> None: ...


class TxnLogWrites:
    """The appends both kinds of writes make; subclasses say which leader epoch to stamp."""

    def __init__(self, service: TxnHost) -> None:
        self.service = service

    def _state_epoch(self, p: int, t: TopicInfo) -> int | None:
        """The leader epoch for `__transaction_state` partition `p` (None: not led here)."""
        raise NotImplementedError

    def _leader_epoch(self, topic: str, partition: int, t: TopicInfo) -> int | None:
        """The leader epoch for a marker on `topic`-`partition` (None: not led here)."""
        raise NotImplementedError

    def store(self, records: list[TxnRecord]) -> tuple[dict[int, int], set[int]]:
        """Append `records`, one batch per partition: the last offset written in each, and the
        partitions that could not be written (cluster mode: not led here, or the log refused)."""
        written: dict[int, int] = {}
        failed: set[int] = set()
        if not records:
            return written, failed
        svc = self.service
        t = svc.lookup(TRANSACTION_STATE)
        if t is None:
            log.error("%s is missing; %d transaction record(s) not stored", TRANSACTION_STATE, len(records))
            return written, failed
        now = svc.now_ms()
        by_partition: dict[int, list[Record]] = {}
        for p, key, value in records:
            part = by_partition.setdefault(p % t.partitions, [])
            part.append(Record(len(part), now, key, value))
        for p, recs in by_partition.items():
            epoch = self._state_epoch(p, t)
            if epoch is None:
                failed.add(p)
                continue
            try:
                info = svc.append(
                    TRANSACTION_STATE, p, bytearray(build_batch(recs)), leader_epoch=epoch, now_ms=now
                )
                written[p] = info.last_offset
            except LogError as e:
                log.error("cannot store %d record(s) in %s-%d: %s", len(recs), TRANSACTION_STATE, p, e)
                failed.add(p)
        return written, failed

    def write_marker(
        self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> ErrorCode:
        """One marker from WriteTxnMarkers (an admin's abort of a hanging transaction)."""
        svc = self.service
        t = svc.lookup(topic)
        if t is None or not 0 <= partition < t.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        epoch_of_leader = self._leader_epoch(topic, partition, t)
        if epoch_of_leader is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if topic == CONSUMER_OFFSETS and svc.offsets_shard_error(partition):
            # The group coordinator's shard is still loading (or gone): a marker appended now could
            # fall after what the load read and never settle the pending offsets it replays. Kafka's
            # KafkaApis turns the coordinator's COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR into
            # NOT_LEADER_OR_FOLLOWER, which the transaction coordinator retries.
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        entry = svc.partition_log(topic, partition).producer_state.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        now = svc.now_ms()
        marker = end_txn_marker(
            producer_id, epoch, commit=commit, coordinator_epoch=coordinator_epoch, timestamp_ms=now
        )
        try:
            svc.append(topic, partition, bytearray(marker), leader_epoch=epoch_of_leader, now_ms=now)
        except LogError as e:
            return ErrorCode[e.error_name]
        if topic == CONSUMER_OFFSETS:
            svc.settle_offsets(producer_id, commit, partition)
        return ErrorCode.NONE


class LocalTxnWrites(TxnLogWrites):
    """A single node: this broker coordinates every transactional id and leads every partition."""

    def __init__(self, service: TxnHost) -> None:
        super().__init__(service)
        self._retry: list[MarkerJob] = []

    def _state_epoch(self, p: int, t: TopicInfo) -> int | None:
        return t.leader_epoch

    def _leader_epoch(self, topic: str, partition: int, t: TopicInfo) -> int | None:
        return t.leader_epoch

    async def recover(self) -> None:
        """Replay `__transaction_state` and finish what a crash left in Prepare*."""
        svc = self.service
        if svc.lookup(TRANSACTION_STATE) is None:
            return
        pairs = await asyncio.to_thread(self._read_all)
        coordinator = svc.coordinator
        for key, value in pairs:
            try:
                coordinator.replay(key, value)
            except DecodeError as e:
                log.error("skipping an unreadable %s record: %s", TRANSACTION_STATE, e)
        for job in coordinator.pending_markers():
            self.write_markers(job)
        if pairs:
            log.info("loaded %d transactional id(s) from %s", len(coordinator.txns), TRANSACTION_STATE)

    def _read_all(self) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) of `__transaction_state`, partition by partition (blocking: a thread)."""
        t = self.service.lookup(TRANSACTION_STATE)
        out: list[tuple[bytes, bytes | None]] = []
        for p in range(t.partitions if t is not None else 0):
            out.extend(self.service.read_partition(p))
        return out

    def not_here(self, key: str) -> ErrorCode:
        return ErrorCode.NONE

    def state_topic_missing(self, e: ApiError) -> None:
        log.error("cannot create %s: %s", TRANSACTION_STATE, e.message or e.error.name)

    async def commit(self, result: TxnResult) -> ErrorCode:
        self.apply(result)
        return ErrorCode.NONE

    def apply(self, result: TxnResult) -> None:
        self.store(result.records)
        if result.markers is not None:
            self.write_markers(result.markers)

    def retry(self) -> None:
        for job in self._retry[:]:
            self._retry.remove(job)
            self.write_markers(job)

    def write_markers(self, job: MarkerJob) -> None:
        svc = self.service
        now = svc.now_ms()
        failed = False
        for topic, partition in job.partitions:
            t = svc.lookup(topic)
            if t is None or partition >= t.partitions:
                continue  # deleted since: nothing left to mark
            marker = end_txn_marker(
                job.producer_id,
                job.producer_epoch,
                commit=job.commit,
                coordinator_epoch=COORDINATOR_EPOCH,
                timestamp_ms=now,
            )
            try:
                svc.append(topic, partition, bytearray(marker), leader_epoch=t.leader_epoch, now_ms=now)
            except LogError as e:
                log.error(
                    "cannot write the %s marker of %s to %s-%d: %s",
                    "COMMIT" if job.commit else "ABORT",
                    job.transactional_id,
                    topic,
                    partition,
                    e,
                )
                failed = True
                continue
            if topic == CONSUMER_OFFSETS:
                svc.settle_offsets(job.producer_id, job.commit, partition)
        if failed:
            self._retry.append(job)
            return
        self.apply(svc.coordinator.complete(job, now))

    async def write_markers_request(
        self, tps: list[TopicPartition], producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> dict[TopicPartition, ErrorCode]:
        return {tp: self.write_marker(*tp, producer_id, epoch, commit, coordinator_epoch) for tp in tps}

    async def verify_elsewhere(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        tp: TopicPartition,
        transaction_abortable: bool,
        add: bool,
    ) -> tuple[ErrorCode, str | None]:
        return ErrorCode.NOT_ENOUGH_REPLICAS, f"no transaction coordinator for {txn_id}"

    async def close(self) -> None:
        pass
