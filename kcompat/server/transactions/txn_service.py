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

How steps 1 and 2 are made is the TxnWrites port's (txn_writes.py): on one node synchronous
appends (LocalTxnWrites); in cluster mode appends answered once replicated and markers sent to
each partition's leader (cluster/txn_writes.py, given by cluster/assembly.py).

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

from kcompat.coordinator.record_pair import offsets_partition
from kcompat.log.partition_log import PartitionLog
from kcompat.server.errors import ApiError
from kcompat.server.groups.group_service import GroupService
from kcompat.server.transactions.txn_log import read_state_records
from kcompat.server.transactions.txn_writes import LocalTxnWrites, TopicPartition, TxnWrites
from kcompat.server.transactions.verification import produce_error
from kcompat.storage.topic_store import CONSUMER_OFFSETS, TRANSACTION_STATE, TopicInfo
from kcompat.wire.error_codes import ErrorCode

if TYPE_CHECKING:
    from kcompat.coordinator.transaction import MarkerJob, TransactionCoordinator, TxnResult

log = logging.getLogger("kcompat.server.transactions")


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
        writes: Callable[[TransactionService], TxnWrites] = LocalTxnWrites,
    ) -> None:
        self.now_ms = now_ms
        self.transaction_version = transaction_version  # finalized: ApiVersions reports it
        self._setting = setting
        self.lookup = lookup
        self._create = create
        self.partition_log = partition_log
        self.append = append
        self._new_producer_id = new_producer_id
        self.groups = groups
        self._coordinator: TransactionCoordinator | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start(): the timers' loop
        self._timers: list[asyncio.Task[None]] = []
        # How records and markers are written: a single node's, or cluster mode's (built from this).
        self.writes = writes(self)

    @property
    def coordinator(self) -> TransactionCoordinator:
        """The coordinator; a single node with no `__transaction_state` at start builds it here,
        for the first request that needs it (nothing to replay: the topic was made since)."""
        if self._coordinator is None:
            assert self._loop is not None, "TransactionService.start() comes first"
            coordinator = self._build()
            self._start_timers(self._loop)
            return coordinator
        return self._coordinator

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self, *, load: bool = True) -> None:
        """Replay `__transaction_state`, finish what a crash left in Prepare*, start the timers
        (after the group service loaded: markers settle its pending offsets). Without `load` (a
        single node) and without the topic, the first request that needs the coordinator builds it."""
        self._loop = asyncio.get_running_loop()
        if not load and self.lookup(TRANSACTION_STATE) is None:
            return
        self._build()
        await self.writes.recover()
        self._start_timers(self._loop)

    def _build(self) -> TransactionCoordinator:
        from kcompat.coordinator.transaction import TransactionCoordinator, TxnConfig

        existing = self.lookup(TRANSACTION_STATE)  # its partition count wins over a changed setting
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
        return self._coordinator

    def _start_timers(self, loop: asyncio.AbstractEventLoop) -> None:
        abort_every = int(self._setting("transaction.abort.timed.out.transaction.cleanup.interval.ms"))
        expire_every = int(self._setting("transaction.remove.expired.transaction.cleanup.interval.ms"))
        self._timers = [
            loop.create_task(self._every(abort_every, self.abort_timed_out), name="txn-timeouts"),
            loop.create_task(self._every(expire_every, self.expire_ids), name="txn-expiry"),
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
        await self.writes.close()

    async def _every(self, interval_ms: int, step: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                step()
            except Exception:
                log.exception("transaction coordinator timer failed")

    # --- requests ------------------------------------------------------------------------------

    async def ensure_topic(self) -> TopicInfo:
        t = self.lookup(TRANSACTION_STATE)
        if t is None:
            t = await self._create(TRANSACTION_STATE)
        assert t is not None
        return t

    async def run(self, call: Callable[[int], TxnResult], key: str | None = None) -> TxnResult:
        """Call the coordinator with the current time, store what it decided and write its markers.

        Cluster mode: `key` is the transactional id the call acts on; when this broker does not
        serve it (now) the answer is NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, and the
        call's records are answered only once replicated (markers written after that)."""
        from kcompat.coordinator.transaction import TxnResult  # loaded with the coordinator

        try:
            await self.ensure_topic()
        except ApiError as e:
            self.writes.state_topic_missing(e)
            return TxnResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if key is not None and (code := self.writes.not_here(key)):
            return TxnResult(code)
        try:
            result = call(self.now_ms())
        except ApiError as e:  # cluster mode: no producer-id block from the controller yet (retriable)
            return TxnResult(e.error)
        code = await self.writes.commit(result)
        return TxnResult(code) if code else result

    def not_here(self, key: str) -> ErrorCode:
        """Cluster mode: NONE when this broker is the coordinator of `key` now (single node: always)."""
        return self.writes.not_here(key)

    def complete_after_load(self, job: MarkerJob) -> None:
        """Cluster mode: a shard just loaded found this transaction in Prepare*; finish it."""
        self.writes.write_markers(job)

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
        if self._loop is None:  # not started
            raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not self._setting("transaction.partition.verification.enable"):
            return
        if self.writes.not_here(txn_id):  # cluster mode: the coordinator is elsewhere
            await self._at_coordinator(
                txn_id, producer_id, epoch, topic, partition, transaction_abortable, False
            )
            return
        # The coordinator is here: its VerifyOnly answer, translated as a remote one would be
        # (Kafka's leader asks its own broker the same way): the last transaction's markers still
        # being written is the retriable CONCURRENT_TRANSACTIONS, never INVALID_TXN_STATE.
        tp = (topic, partition)
        code, message = produce_error(
            self.coordinator.verify(txn_id, producer_id, epoch, [tp])[tp], transaction_abortable
        )
        if code:
            raise ApiError(code, message)

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
        if self.writes.not_here(txn_id):
            # Cluster mode: the coordinator is on another broker: Kafka 4.3's leader adds the partition there.
            await self._at_coordinator(txn_id, producer_id, epoch, topic, partition, True, True)
            return
        from kcompat.coordinator.transaction.coordinator import TV2

        r = await self.run(
            lambda now: self.coordinator.add_partitions(
                txn_id, producer_id, epoch, [(topic, partition)], now, client_transaction_version=TV2
            )
        )
        code, message = produce_error(r.error, transaction_abortable=True)  # as a remote add's answer
        if code:
            raise ApiError(code, message)

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
        entry = self.partition_log(topic, partition).producer_state.producers.get(producer_id)
        if entry is not None and entry.epoch == epoch and entry.current_txn_first_offset >= 0:
            return
        code, message = await self.verify_elsewhere(
            txn_id, producer_id, epoch, (topic, partition), transaction_abortable, add=add
        )
        if code:
            raise ApiError(code, message)

    async def verify_elsewhere(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        tp: TopicPartition,
        transaction_abortable: bool,
        *,
        add: bool = False,
    ) -> tuple[ErrorCode, str | None]:
        """Cluster mode: Produce's code for `tp` from the coordinator of `txn_id` on another broker
        (NONE: in the transaction, or added to it with `add`), and a message."""
        return await self.writes.verify_elsewhere(txn_id, producer_id, epoch, tp, transaction_abortable, add)

    def offsets_partition_of(self, group_id: str) -> int:
        t = self.lookup(CONSUMER_OFFSETS)
        n = t.partitions if t is not None else int(self._setting("offsets.topic.num.partitions"))
        return offsets_partition(group_id, n)

    # --- time ----------------------------------------------------------------------------------

    def abort_timed_out(self) -> None:
        self.writes.retry()
        if self._coordinator is None or self.lookup(TRANSACTION_STATE) is None:
            return
        for result in self.coordinator.abort_timed_out(self.now_ms(), self._new_producer_id):
            if result.markers is not None:
                log.info("aborting transaction %s: past its timeout", result.markers.transactional_id)
            self.writes.apply(result)

    def expire_ids(self) -> None:
        if self._coordinator is not None and self.lookup(TRANSACTION_STATE) is not None:
            self.writes.store(self.coordinator.expire(self.now_ms()))

    # --- what the writes ask of the service ---------------------------------------------------------

    def write_marker(
        self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> ErrorCode:
        """One marker from WriteTxnMarkers (an admin's abort of a hanging transaction)."""
        return self.writes.write_marker(topic, partition, producer_id, epoch, commit, coordinator_epoch)

    def settle_offsets(self, producer_id: int, commit: bool, partition: int) -> None:
        """A marker on `__consumer_offsets` partition `partition` settles the producer's pending
        offsets of that partition's groups in the group coordinator."""
        self.groups.coordinator.txn_offsets.complete(
            producer_id, commit, lambda g: self.offsets_partition_of(g) == partition
        )

    def offsets_shard_error(self, partition: int) -> ErrorCode:
        """NONE when the group coordinator has the groups of `__consumer_offsets` partition
        `partition` loaded here now (cluster mode: the shard is ACTIVE; a single node: always)."""
        return self.groups.shards.partition_error(partition)

    def read_partition(self, p: int) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) of `__transaction_state` partition `p` (blocking: a thread)."""
        return read_state_records(self.partition_log(TRANSACTION_STATE, p))
