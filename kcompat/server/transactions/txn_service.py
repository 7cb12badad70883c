"""The broker's side of the transaction coordinator: `__transaction_state`, markers and timers.

TransactionCoordinator (kcompat.coordinator.transaction) is pure; this gives it what it lacks:

    handler --service.run(lambda now: coordinator.end_txn(...))--> TxnResult
       1. records -> appended to __transaction_state (partition of the transactional id), before
                     anything is answered
       2. markers -> a COMMIT/ABORT control batch appended to every partition of the transaction
                     through ReplicaManager.append (parked fetches wake: the LSO moved); a marker
                     on __consumer_offsets also settles the producer's pending offsets in the group
                     coordinator; then `complete` and its record (Complete*)
       3. the answer

On one node every step is a synchronous append with no await between, so the markers are written
before the EndTxn is even answered (Kafka answers after PrepareCommit and writes them after; a
client cannot tell). A marker the disk refuses leaves the transaction in Prepare*: the timer
retries it, and a restart writes the markers of every transaction it finds in Prepare*.

Cluster mode (shards set by cluster_member.py): records are answered once replicated; markers go
to each partition's leader through txn_channels.py after EndTxn is answered, as Kafka does, and
Complete* follows once all are acknowledged (replicated); a transactional batch whose coordinator
is elsewhere is verified (transactions v2: added) there with AddPartitionsToTxn.

Timers: every transaction.abort.timed.out.transaction.cleanup.interval.ms, open transactions past
their timeout are aborted (their producer fenced); every
transaction.remove.expired.transaction.cleanup.interval.ms, idle transactional ids expire.
`__transaction_state` is created on first need (transaction.state.log.num.partitions, compacted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcompat.coordinator.records import offsets_partition
from kcompat.coordinator.transaction import MarkerJob, TransactionCoordinator, TxnConfig, TxnResult
from kcompat.coordinator.transaction.coordinator import TV2, TxnRecord
from kcompat.log.errors import LogError
from kcompat.log.partition_log import PartitionLog
from kcompat.server.errors import ApiError
from kcompat.server.groups.group_service import GroupService
from kcompat.server.transactions.txn_log import read_state_records
from kcompat.storage.topic_store import CONSUMER_OFFSETS, TRANSACTION_STATE, TopicInfo
from kcompat.wire.control_batch import end_txn_marker
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.records import Record, build_batch

if TYPE_CHECKING:  # cluster mode only
    from kcompat.server.cluster.txn_channels import TxnMarkerSender, TxnVerifier
    from kcompat.server.cluster.txn_shards import TxnShards

log = logging.getLogger("kcompat.server.transactions")

COORDINATOR_EPOCH = 0  # one node, never a new coordinator


class TransactionService:
    """One per broker: `broker.txn_service`. See the module docstring."""

    def __init__(
        self,
        *,
        now_ms: Callable[[], int],
        setting: Callable[[str], Any],
        lookup: Callable[[str], TopicInfo | None],
        create: Callable[[str], Any],
        partition_log: Callable[[str, int], PartitionLog],
        append: Callable[..., Any],
        new_producer_id: Callable[[], int],
        groups: GroupService,
        transaction_version: int = 2,
        cluster: bool = False,
    ) -> None:
        self.now_ms = now_ms
        self.transaction_version = transaction_version  # finalized: ApiVersions reports it
        self._setting = setting
        self._lookup = lookup
        self._create = create
        self._partition_log = partition_log
        self._append = append
        self._new_producer_id = new_producer_id
        self.groups = groups
        self._coordinator: TransactionCoordinator | None = None
        self._retry: list[MarkerJob] = []
        self._timers: list[asyncio.Task[None]] = []
        # Cluster mode: the __transaction_state partitions this broker leads (txn_shards.py, set by
        # cluster_member.py); they load and unload with leadership, so start() replays nothing.
        self.cluster = cluster
        self.shards: TxnShards | None = None
        self.markers: TxnMarkerSender | None = None  # markers to other brokers' partitions
        self.verifier: TxnVerifier | None = None  # produce verification at another broker
        # (transactional id, coordinator epoch) with markers under way: a reload's new epoch gets its own
        self._sending: set[tuple[str, int]] = set()
        self._writes: set[asyncio.Task[None]] = set()

    @property
    def coordinator(self) -> TransactionCoordinator:
        assert self._coordinator is not None, "TransactionService.start() builds the coordinator"
        return self._coordinator

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Replay `__transaction_state`, finish what a crash left in Prepare*, start the timers
        (after the group service loaded: markers settle its pending offsets)."""
        existing = self._lookup(TRANSACTION_STATE)  # its partition count wins over a changed setting
        self._coordinator = TransactionCoordinator(
            TxnConfig(
                max_timeout_ms=int(self._setting("transaction.max.timeout.ms")),
                id_expiration_ms=int(self._setting("transactional.id.expiration.ms")),
                num_partitions=existing.partitions
                if existing is not None
                else int(self._setting("transaction.state.log.num.partitions")),
                transaction_version=self.transaction_version,
            )
        )
        if not self.cluster and self._lookup(TRANSACTION_STATE) is not None:
            pairs = await asyncio.to_thread(self._read_all)
            for key, value in pairs:
                try:
                    self.coordinator.replay(key, value)
                except DecodeError as e:
                    log.error("skipping an unreadable %s record: %s", TRANSACTION_STATE, e)
            for job in self.coordinator.pending_markers():
                self._write_markers(job)
            if pairs:
                log.info(
                    "loaded %d transactional id(s) from %s", len(self.coordinator.txns), TRANSACTION_STATE
                )
        abort_every = int(self._setting("transaction.abort.timed.out.transaction.cleanup.interval.ms"))
        expire_every = int(self._setting("transaction.remove.expired.transaction.cleanup.interval.ms"))
        self._timers = [
            asyncio.create_task(self._every(abort_every, self.abort_timed_out), name="txn-timeouts"),
            asyncio.create_task(self._every(expire_every, self.expire_ids), name="txn-expiry"),
        ]

    async def close(self) -> None:
        for t in self._timers:
            t.cancel()
        for t in self._timers:
            try:
                await t
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("transaction coordinator timer failed")
        self._timers = []
        for w in list(self._writes):
            w.cancel()
        await asyncio.gather(*self._writes, return_exceptions=True)
        if self.shards is not None:
            await self.shards.close()  # loads under way
        for channels in (self.markers, self.verifier):
            if channels is not None:
                channels.channels.close()

    async def _every(self, interval_ms: int, step: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                step()
            except Exception:
                log.exception("transaction coordinator timer failed")

    # --- requests ------------------------------------------------------------------------------

    async def ensure_topic(self) -> TopicInfo:
        t = self._lookup(TRANSACTION_STATE)
        if t is None:
            t = await self._create(TRANSACTION_STATE)
        assert t is not None
        return t

    async def run(self, call: Callable[[int], TxnResult], key: str | None = None) -> TxnResult:
        """Call the coordinator with the current time, store what it decided and write its markers.

        Cluster mode: `key` is the transactional id the call acts on; when this broker does not
        serve it (now) the answer is NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, and the
        call's records are answered only once replicated (markers written after that)."""
        try:
            await self.ensure_topic()
        except ApiError as e:
            if self.shards is None:
                log.error("cannot create %s: %s", TRANSACTION_STATE, e.message or e.error.name)
            return TxnResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if self.shards is not None and key is not None and (code := self.shards.error(key)):
            return TxnResult(code)
        try:
            result = call(self.now_ms())
        except ApiError as e:  # cluster mode: no producer-id block from the controller yet (retriable)
            return TxnResult(e.error)
        if self.shards is None:
            self._apply(result)
            return result
        code = await self._store_replicated(result.records)
        if code:
            return TxnResult(code)
        if result.markers is not None:
            self._write_markers(result.markers)
        return result

    def not_here(self, key: str) -> ErrorCode:
        """Cluster mode: NONE when this broker is the coordinator of `key` now (single node: always)."""
        return ErrorCode.NONE if self.shards is None else self.shards.error(key)

    async def _store_replicated(self, records: list[TxnRecord]) -> ErrorCode:
        """Cluster mode: append as the partitions' leader and wait for the high watermark (Kafka's
        acks=all append of the transaction log). A refused or unreplicated write reloads the shards
        it went to, so no state the log does not hold stays; Kafka's codes for the client:
        NOT_COORDINATOR (leadership lost), COORDINATOR_NOT_AVAILABLE (ISR short, timed out)."""
        shards = self.shards
        assert shards is not None
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
        written, failed = self._store(records)
        code = ErrorCode.NOT_COORDINATOR if failed else await shards.replicated(written)
        if code:
            for p in {*written, *failed}:
                shards.reload(p)
        return code

    def complete_after_load(self, job: MarkerJob) -> None:
        """Cluster mode: a shard just loaded found this transaction in Prepare*; finish it."""
        self._write_markers(job)

    def set_transaction_version(self, level: int) -> None:
        """Cluster mode: the finalized transaction.version of the metadata image. ApiVersions
        reports it, and the coordinator writes the records and allows the flows it permits."""
        self.transaction_version = level
        c = self._coordinator
        if c is not None and c.config.transaction_version != level:
            c.config = dataclasses.replace(c.config, transaction_version=level)

    def new_producer_id(self) -> int:
        return self._new_producer_id()

    async def verify_produce(
        self,
        txn_id: str | None,
        producer_id: int,
        epoch: int,
        topic: str,
        partition: int,
        transaction_abortable: bool = False,
    ) -> None:
        """A transactional batch may be appended only inside its producer's open transaction on
        that partition (KIP-890 part 1: in process, or asking the coordinator's broker in cluster
        mode); ApiError otherwise. `transaction_abortable`: Produce v11+ knows that code."""
        if txn_id is None:
            raise ApiError(
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "a transactional batch needs a transactional id",
            )
        if self._coordinator is None:
            raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not self._setting("transaction.partition.verification.enable"):
            return
        if self.shards is not None and self.shards.error(txn_id):  # the coordinator is elsewhere
            await self._at_coordinator(
                txn_id, producer_id, epoch, topic, partition, transaction_abortable, False
            )
            return
        error = self.coordinator.in_transaction(producer_id, epoch, (topic, partition))
        if error == ErrorCode.INVALID_PRODUCER_EPOCH:
            raise ApiError(error, f"producer {producer_id} epoch {epoch} is fenced")
        if error:
            raise ApiError(
                ErrorCode.INVALID_TXN_STATE,
                f"{topic}-{partition} is not in the transaction of producer {producer_id}",
            )

    async def add_implicitly(
        self, txn_id: str | None, producer_id: int, epoch: int, topic: str, partition: int
    ) -> None:
        """Transactions v2 (Produce v12+): a transactional batch adds its partition to the
        producer's transaction, as Kafka's leader does through AddPartitionsToTxn for the client;
        ApiError (Produce's codes: a fenced epoch is INVALID_PRODUCER_EPOCH) when it may not."""
        if txn_id is None:
            raise ApiError(
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "a transactional batch needs a transactional id",
            )
        if self.shards is not None and self.shards.error(txn_id):
            # The coordinator is on another broker: Kafka 4.3's leader adds the partition there.
            await self._at_coordinator(txn_id, producer_id, epoch, topic, partition, True, True)
            return
        r = await self.run(
            lambda now: self.coordinator.add_partitions(
                txn_id, producer_id, epoch, [(topic, partition)], now, client_transaction_version=TV2
            )
        )
        if r.error == ErrorCode.PRODUCER_FENCED:
            raise ApiError(
                ErrorCode.INVALID_PRODUCER_EPOCH, f"producer {producer_id} epoch {epoch} is fenced"
            )
        if r.error:
            raise ApiError(
                r.error, f"{topic}-{partition} cannot join the transaction of producer {producer_id}"
            )

    async def _at_coordinator(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        topic: str,
        partition: int,
        transaction_abortable: bool,
        add: bool,
    ) -> None:
        """Cluster mode: verify (or add) the partition at the coordinator's broker, unless the log
        already holds this producer's open transaction at this epoch (Kafka's leader then skips the
        round trip: the transaction's first batch here was checked)."""
        entry = self._partition_log(topic, partition).producer_state.producers.get(producer_id)
        if entry is not None and entry.epoch == epoch and entry.current_txn_first_offset >= 0:
            return
        if self.verifier is None:
            raise ApiError(ErrorCode.NOT_ENOUGH_REPLICAS, f"no transaction coordinator for {txn_id}")
        code, message = await self.verifier.verify(
            txn_id, producer_id, epoch, (topic, partition), transaction_abortable, add=add
        )
        if code:
            raise ApiError(code, message)

    def offsets_partition_of(self, group_id: str) -> int:
        t = self._lookup(CONSUMER_OFFSETS)
        n = t.partitions if t is not None else int(self._setting("offsets.topic.num.partitions"))
        return offsets_partition(group_id, n)

    # --- time ----------------------------------------------------------------------------------

    def abort_timed_out(self) -> None:
        for job in self._retry[:]:
            self._retry.remove(job)
            self._write_markers(job)
        if self._coordinator is None or self._lookup(TRANSACTION_STATE) is None:
            return
        for result in self.coordinator.abort_timed_out(self.now_ms(), self._new_producer_id):
            if result.markers is not None:
                log.info("aborting transaction %s: past its timeout", result.markers.transactional_id)
            self._apply(result)

    def expire_ids(self) -> None:
        if self._coordinator is not None and self._lookup(TRANSACTION_STATE) is not None:
            self._store(self.coordinator.expire(self.now_ms()))

    # --- effects -------------------------------------------------------------------------------

    def _apply(self, result: TxnResult) -> None:
        if self.shards is not None:  # cluster mode: the markers only once the Prepare* is replicated
            task = asyncio.get_running_loop().create_task(self._apply_replicated(result), name="txn-write")
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
            return
        self._store(result.records)
        if result.markers is not None:
            self._write_markers(result.markers)

    async def _apply_replicated(self, result: TxnResult) -> None:
        if await self._store_replicated(result.records) == ErrorCode.NONE and result.markers is not None:
            self._write_markers(result.markers)

    def _store(self, records: list[TxnRecord]) -> tuple[dict[int, int], set[int]]:
        """Append `records`, one batch per partition: the last offset written in each, and the
        partitions that could not be written (cluster mode: not led here, or the log refused)."""
        written: dict[int, int] = {}
        failed: set[int] = set()
        if not records:
            return written, failed
        t = self._lookup(TRANSACTION_STATE)
        if t is None:
            log.error("%s is missing; %d transaction record(s) not stored", TRANSACTION_STATE, len(records))
            return written, failed
        now = self.now_ms()
        by_partition: dict[int, list[Record]] = {}
        for p, key, value in records:
            part = by_partition.setdefault(p % t.partitions, [])
            part.append(Record(len(part), now, key, value))
        for p, recs in by_partition.items():
            epoch = t.leader_epoch
            if self.shards is not None:
                if self.shards.led(p) is None:
                    failed.add(p)
                    continue
                epoch = self.shards.leader_epoch(p)
            try:
                info = self._append(
                    TRANSACTION_STATE, p, bytearray(build_batch(recs)), leader_epoch=epoch, now_ms=now
                )
                written[p] = info.last_offset
            except LogError as e:
                log.error("cannot store %d record(s) in %s-%d: %s", len(recs), TRANSACTION_STATE, p, e)
                failed.add(p)
        return written, failed

    def _write_markers(self, job: MarkerJob) -> None:
        if self.markers is not None:  # cluster mode: to each partition's leader, asynchronously
            assert self.shards is not None
            key = (
                job.transactional_id,
                self.shards.leader_epoch(self.shards.table.partition(job.transactional_id)),
            )
            if key not in self._sending:
                self._sending.add(key)
                task = asyncio.get_running_loop().create_task(
                    self._send_markers(job, key[1]), name="txn-markers"
                )
                self._writes.add(task)
                task.add_done_callback(self._writes.discard)
            return
        now = self.now_ms()
        failed = False
        for topic, partition in job.partitions:
            t = self._lookup(topic)
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
                self._append(topic, partition, bytearray(marker), leader_epoch=t.leader_epoch, now_ms=now)
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
                self.groups.coordinator.txn_offsets.complete(job.producer_id, job.commit)
        if failed:
            self._retry.append(job)
            return
        self._apply(self.coordinator.complete(job, now))

    async def _send_markers(self, job: MarkerJob, epoch: int) -> None:
        """Cluster mode: Complete* once every partition's leader acknowledged the marker (after
        replication), unless the transaction left this coordinator meanwhile."""
        shards, markers = self.shards, self.markers
        assert shards is not None and markers is not None
        p = shards.table.partition(job.transactional_id)  # its leader epoch is Kafka's coordinator epoch

        def still_mine() -> bool:
            return shards.error(job.transactional_id) == ErrorCode.NONE and shards.leader_epoch(p) == epoch

        try:
            done = await markers.send(
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
        if done and still_mine():
            self._apply(self.coordinator.complete(job, self.now_ms()))

    def write_marker(
        self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> ErrorCode:
        """One marker from WriteTxnMarkers (an admin's abort of a hanging transaction)."""
        t = self._lookup(topic)
        if t is None or not 0 <= partition < t.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        epoch_of_leader = t.leader_epoch
        if self.shards is not None:  # cluster mode: only the partition's leader appends
            part = self.shards.leader_of(topic, partition)
            if part is None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            epoch_of_leader = part.leader_epoch
        entry = self._partition_log(topic, partition).producer_state.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        now = self.now_ms()
        marker = end_txn_marker(
            producer_id, epoch, commit=commit, coordinator_epoch=coordinator_epoch, timestamp_ms=now
        )
        try:
            self._append(topic, partition, bytearray(marker), leader_epoch=epoch_of_leader, now_ms=now)
        except LogError as e:
            return ErrorCode[e.error_name]
        if topic == CONSUMER_OFFSETS:
            self.groups.coordinator.txn_offsets.complete(producer_id, commit)
        return ErrorCode.NONE

    # --- replay --------------------------------------------------------------------------------

    def _read_all(self) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) of `__transaction_state`, partition by partition (blocking: a thread)."""
        t = self._lookup(TRANSACTION_STATE)
        out: list[tuple[bytes, bytes | None]] = []
        for p in range(t.partitions if t is not None else 0):
            out.extend(self.read_partition(p))
        return out

    def read_partition(self, p: int) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) of `__transaction_state` partition `p` (blocking: a thread)."""
        return read_state_records(self._partition_log(TRANSACTION_STATE, p))
