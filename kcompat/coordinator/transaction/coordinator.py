"""TransactionCoordinator: Kafka's transaction decisions (TransactionCoordinator.scala), pure.

Every operation takes the time and returns a TxnResult: the error (or producer id and epoch) to
answer, the `__transaction_state` records to append BEFORE answering, and the markers to write
(a MarkerJob). After a MarkerJob's markers are all in their partitions the server calls
`complete`, which moves Prepare* to Complete* and returns that record. The state is changed at
once, and the caller appends the records before it yields to the loop: no two requests interleave
between a decision and its record. Cluster mode, whose Complete* record is answered only once
replicated, takes it from `completion` and calls `complete` after (Kafka's pending state).

Errors, as Kafka's coordinator answers them:
  InitProducerId  timeout <= 0 or over transaction.max.timeout.ms: INVALID_TRANSACTION_TIMEOUT;
                  markers pending: CONCURRENT_TRANSACTIONS; a KIP-360 producer id/epoch that is
                  not the current (or just-bumped) one: PRODUCER_FENCED; an open transaction: the
                  epoch is bumped (fencing the old instance), the transaction aborted, and the
                  caller retries on CONCURRENT_TRANSACTIONS.
  AddPartitions / AddOffsets / EndTxn  unknown id or another producer id:
                  INVALID_PRODUCER_ID_MAPPING; another epoch: PRODUCER_FENCED; markers pending:
                  CONCURRENT_TRANSACTIONS; EndTxn without a transaction (or the opposite of the
                  one completing): INVALID_TXN_STATE; a retried EndTxn of a completed one: NONE.

Transactions v2 (KIP-890 part 2; `client_transaction_version` 2, from EndTxn v5, TxnOffsetCommit
v5 and Produce v12's implicit adds): EndTxn bumps the epoch, so the markers carry an epoch above
every batch of the transaction and the producer goes on with the new one (EndTxn v5 answers it).
At the last epoch (Short.MaxValue - 1) the bump takes a new producer id, in force once the markers
are written (the markers carry the old id with epoch Short.MaxValue). A retried EndTxn names the
epoch before the bump (or the id before the new one) and is answered with the current pair; any
other epoch is PRODUCER_FENCED. An abort with nothing added (the producer's record never reached
a partition) is allowed from Empty and Complete*: the epoch is bumped and nothing is marked.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kcompat.coordinator.transaction.log_records import (
    VALUE_VERSION,
    decode,
    encode_key,
    encode_value,
    transaction_partition,
)
from kcompat.coordinator.transaction.state import (
    COMPLETED,
    PREPARING,
    TopicPartition,
    TransactionMetadata,
)
from kcompat.coordinator.transaction.state import TransactionState as S
from kcompat.wire.error_codes import ErrorCode

MAX_EPOCH = 0x7FFF - 1  # Short.MaxValue - 1: a bump past it takes a new producer id
TV2 = 2  # transaction.version 2: the epoch bump on every EndTxn


@dataclass(frozen=True)
class TxnConfig:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms
    num_partitions: int = 50  # transaction.state.log.num.partitions
    transaction_version: int = 2  # the finalized transaction.version (its record format: 0 -> v0)


@dataclass(frozen=True)
class MarkerJob:
    """Write a COMMIT or ABORT marker for producer_id/epoch into each partition, then `complete`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


# (partition of __transaction_state, key, value or None)
TxnRecord = tuple[int, bytes, bytes | None]


@dataclass
class TxnResult:
    error: ErrorCode = ErrorCode.NONE
    producer_id: int = -1
    producer_epoch: int = -1
    records: list[TxnRecord] = field(default_factory=list)
    markers: MarkerJob | None = None


class TransactionCoordinator:
    def __init__(self, config: TxnConfig) -> None:
        self.config = config
        self.txns: dict[str, TransactionMetadata] = {}
        self._by_producer: dict[int, str] = {}

    # --- records ---

    def _record(self, m: TransactionMetadata) -> TxnRecord:
        p = transaction_partition(m.transactional_id, self.config.num_partitions)
        version = VALUE_VERSION if self.config.transaction_version >= 1 else 0
        return p, encode_key(m.transactional_id), encode_value(m, version)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one `__transaction_state` record at load (DecodeError for bytes that are not one)."""
        txn_id, m = decode(key, value)
        old = self.txns.pop(txn_id, None)
        if old is not None:
            self._by_producer.pop(old.producer_id, None)
        if m is not None:
            self.txns[txn_id] = m
            self._by_producer[m.producer_id] = txn_id

    def pending_markers(self, owned: Callable[[str], bool] = lambda _id: True) -> list[MarkerJob]:
        """After load: the transactions (of the ids `owned` names) whose markers a crash, or the
        previous coordinator, may have left unwritten."""
        return [
            self._job(m)
            for m in self.txns.values()
            if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and owned(m.transactional_id)
        ]

    def unload(self, owned: Callable[[str], bool]) -> int:
        """Kafka's shard unload (cluster mode, leadership of a `__transaction_state` partition
        lost): forget the transactional ids `owned` names. Returns how many went."""
        gone = [txn_id for txn_id in self.txns if owned(txn_id)]
        for txn_id in gone:
            m = self.txns.pop(txn_id)
            if self._by_producer.get(m.producer_id) == txn_id:
                del self._by_producer[m.producer_id]
        return len(gone)

    # --- lookups ---

    def transactional_id_of(self, producer_id: int) -> str | None:
        return self._by_producer.get(producer_id)

    def verify(
        self, txn_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn VerifyOnly, a partition leader's question (KIP-890 part 1), answered as
        Kafka's coordinator does: TRANSACTION_ABORTABLE for a partition not in the transaction (the
        leader turns it into what its client understands), PRODUCER_FENCED for another epoch."""
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif m.producer_epoch != epoch:
            error = ErrorCode.PRODUCER_FENCED
        elif m.state in PREPARING:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            return {
                tp: ErrorCode.NONE if tp in m.partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in partitions
            }
        return dict.fromkeys(partitions, error)

    def in_transaction(self, producer_id: int, producer_epoch: int, tp: TopicPartition) -> ErrorCode:
        """KIP-890 part 1, the leader's check of a transactional batch: is `tp` in the open transaction?"""
        txn_id = self._by_producer.get(producer_id)
        m = self.txns.get(txn_id) if txn_id is not None else None
        if m is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch < m.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if m.state is not S.ONGOING or producer_epoch != m.producer_epoch or tp not in m.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # --- requests ---

    def init_producer_id(
        self,
        txn_id: str,
        timeout_ms: int,
        now_ms: int,
        new_producer_id: Callable[[], int],
        expected_producer_id: int = -1,
        expected_epoch: int = -1,
    ) -> TxnResult:
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return TxnResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        m = self.txns.get(txn_id)
        if m is None:
            m = TransactionMetadata(txn_id, new_producer_id(), 0, timeout_ms, txn_last_update_ms=now_ms)
            self.txns[txn_id] = m
            self._by_producer[m.producer_id] = txn_id
            return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch, [self._record(m)])
        if m.state in PREPARING or m.state is S.DEAD:
            return TxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected_producer_id != -1:
            if expected_producer_id == m.producer_id and expected_epoch == m.last_producer_epoch != -1:
                if m.state in COMPLETED:  # a retry of the bump that already happened
                    return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch)
            elif (expected_producer_id, expected_epoch) != (m.producer_id, m.producer_epoch) and not (
                expected_producer_id == m.previous_producer_id and expected_epoch >= MAX_EPOCH
            ):  # (the second: a TV2 producer whose last EndTxn took the new id never learnt it)
                return TxnResult(ErrorCode.PRODUCER_FENCED)
        if m.state is S.ONGOING:
            # A new instance: fence the old one with a new epoch and abort what it left open.
            result = self._fence_and_abort(m, now_ms, new_producer_id)
            result.error = ErrorCode.CONCURRENT_TRANSACTIONS
            return result
        self._bump(m, new_producer_id)
        m.txn_timeout_ms = timeout_ms
        m.partitions.clear()
        m.transition(S.EMPTY, now_ms)
        m.txn_start_ms = -1
        return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch, [self._record(m)])

    def add_partitions(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
        client_transaction_version: int = 0,
    ) -> TxnResult:
        """AddPartitionsToTxn / AddOffsetsToTxn (v1 clients), or the implicit add of a TV2 producer's
        Produce or TxnOffsetCommit (client_transaction_version 2)."""
        m, error = self._check(txn_id, producer_id, epoch)
        if m is None:
            return TxnResult(error)
        if m.state in PREPARING or m.state is S.DEAD:
            return TxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        new = set(partitions)
        if m.state is S.ONGOING and new <= m.partitions:
            return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch)
        if m.state in COMPLETED:
            m.partitions.clear()
        m.partitions |= new
        m.client_transaction_version = client_transaction_version
        m.transition(S.ONGOING, now_ms)
        return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch, [self._record(m)])

    def end_txn(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        commit: bool,
        now_ms: int,
        client_transaction_version: int = 0,
        new_producer_id: Callable[[], int] | None = None,
    ) -> TxnResult:
        """EndTxn; with client_transaction_version 2 (EndTxn v5) the epoch is bumped (module doc)."""
        m = self.txns.get(txn_id)
        if m is None:
            return TxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        bumps = client_transaction_version >= TV2
        v2 = m.client_transaction_version >= TV2  # the transaction's own version judges retries
        retry_bump = v2 and m.producer_id == producer_id and m.producer_epoch == epoch + 1
        retry_overflow = (
            v2 and m.previous_producer_id == producer_id and epoch == MAX_EPOCH and m.producer_epoch == 0
        )
        if m.producer_id != producer_id and not retry_overflow:
            return TxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        done, preparing = (
            (S.COMPLETE_COMMIT, S.PREPARE_COMMIT) if commit else (S.COMPLETE_ABORT, S.PREPARE_ABORT)
        )
        if retry_bump or retry_overflow:
            if m.state is done:
                return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch)
            if m.state is preparing:
                return TxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
            return TxnResult(
                ErrorCode.PRODUCER_FENCED if m.state is S.ONGOING else ErrorCode.INVALID_TXN_STATE
            )
        if epoch != m.producer_epoch:
            return TxnResult(ErrorCode.PRODUCER_FENCED)
        if m.state is preparing or m.state is S.DEAD or m.state is S.PREPARE_EPOCH_FENCE:
            return TxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if m.state in PREPARING:  # completing the opposite way
            return TxnResult(ErrorCode.INVALID_TXN_STATE)
        if m.state is S.ONGOING or (bumps and not commit):  # (the second: an abort with nothing added)
            if m.state is not S.ONGOING:
                m.partitions.clear()
                m.txn_start_ms = now_ms
            if bumps:
                self._bump_for_end(m, new_producer_id)
            m.client_transaction_version = client_transaction_version
            m.transition(preparing, now_ms)
            pid, pepoch = (
                (m.next_producer_id, 0) if m.next_producer_id != -1 else (m.producer_id, m.producer_epoch)
            )
            return TxnResult(ErrorCode.NONE, pid, pepoch, [self._record(m)], self._job(m))
        if m.state is done and not v2:
            return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch)  # a v1 retry
        return TxnResult(ErrorCode.INVALID_TXN_STATE)

    def complete(self, job: MarkerJob, now_ms: int) -> TxnResult:
        """Every marker of `job` is written: Prepare* -> Complete* (and a new producer id in force)."""
        m = self.txns.get(job.transactional_id)
        if m is None or not self._completes(m, job):
            return TxnResult()
        old_id = m.producer_id
        self._finish(m, now_ms)
        if m.producer_id != old_id:
            self._by_producer.pop(old_id, None)
            self._by_producer[m.producer_id] = m.transactional_id
        return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch, [self._record(m)])

    def completion(self, job: MarkerJob, now_ms: int) -> TxnResult:
        """The Complete* record `complete` would write, the state left in Prepare*: Kafka's pending
        transition. Cluster mode appends it and calls `complete` only once it is replicated, so
        meanwhile every request for the id gets CONCURRENT_TRANSACTIONS and no record of the next
        transaction can land in the log before it."""
        m = self.txns.get(job.transactional_id)
        if m is None or not self._completes(m, job):
            return TxnResult()
        done = copy.deepcopy(m)
        self._finish(done, now_ms)
        return TxnResult(ErrorCode.NONE, done.producer_id, done.producer_epoch, [self._record(done)])

    @staticmethod
    def _completes(m: TransactionMetadata, job: MarkerJob) -> bool:
        return m.producer_id == job.producer_id and m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)

    @staticmethod
    def _finish(m: TransactionMetadata, now_ms: int) -> None:
        m.transition(S.COMPLETE_COMMIT if m.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT, now_ms)
        m.partitions.clear()
        if m.next_producer_id != -1:
            m.previous_producer_id, m.producer_id = m.producer_id, m.next_producer_id
            m.producer_epoch, m.last_producer_epoch, m.next_producer_id = 0, -1, -1

    # --- time ---

    def abort_timed_out(self, now_ms: int, new_producer_id: Callable[[], int]) -> list[TxnResult]:
        """Open transactions past their timeout: epoch bumped (the producer is fenced), aborted."""
        return [
            self._fence_and_abort(m, now_ms, new_producer_id)
            for m in list(self.txns.values())
            if m.state is S.ONGOING and m.txn_start_ms + m.txn_timeout_ms < now_ms
        ]

    def expire(self, now_ms: int) -> list[TxnRecord]:
        """Transactional ids idle for transactional.id.expiration.ms: removed, tombstones to write."""
        out: list[TxnRecord] = []
        for m in list(self.txns.values()):
            if m.state in COMPLETED and m.txn_last_update_ms + self.config.id_expiration_ms < now_ms:
                m.transition(S.DEAD, now_ms)
                del self.txns[m.transactional_id]
                self._by_producer.pop(m.producer_id, None)
                p = transaction_partition(m.transactional_id, self.config.num_partitions)
                out.append((p, encode_key(m.transactional_id), None))
        return out

    # --- helpers ---

    def _check(
        self, txn_id: str, producer_id: int, epoch: int
    ) -> tuple[TransactionMetadata | None, ErrorCode]:
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            return None, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != epoch:
            return None, ErrorCode.PRODUCER_FENCED
        return m, ErrorCode.NONE

    def _bump(self, m: TransactionMetadata, new_producer_id: Callable[[], int]) -> None:
        if m.producer_epoch >= MAX_EPOCH:
            self._by_producer.pop(m.producer_id, None)
            m.producer_id, m.producer_epoch, m.last_producer_epoch = new_producer_id(), 0, -1
            self._by_producer[m.producer_id] = m.transactional_id
        else:
            m.last_producer_epoch = m.producer_epoch
            m.producer_epoch += 1

    def _bump_for_end(self, m: TransactionMetadata, new_producer_id: Callable[[], int] | None) -> None:
        """The TV2 bump of EndTxn: the markers take epoch + 1; at the last epoch, a new id follows."""
        if m.producer_epoch >= MAX_EPOCH:
            if new_producer_id is None:
                raise ValueError("an exhausted epoch needs a new producer id")
            m.next_producer_id = new_producer_id()
        m.last_producer_epoch = m.producer_epoch
        m.producer_epoch += 1

    def _fence_and_abort(
        self, m: TransactionMetadata, now_ms: int, new_producer_id: Callable[[], int]
    ) -> TxnResult:
        m.transition(S.PREPARE_EPOCH_FENCE, now_ms)
        if (
            m.producer_epoch < MAX_EPOCH
        ):  # at the limit the abort keeps the epoch; the next init takes a new id
            m.last_producer_epoch = m.producer_epoch
            m.producer_epoch += 1
        m.transition(S.PREPARE_ABORT, now_ms)
        return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch, [self._record(m)], self._job(m))

    def _job(self, m: TransactionMetadata) -> MarkerJob:
        return MarkerJob(
            m.transactional_id,
            m.producer_id,
            m.producer_epoch,
            m.state is S.PREPARE_COMMIT,
            tuple(sorted(m.partitions)),
        )
