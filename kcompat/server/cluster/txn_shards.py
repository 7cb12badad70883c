"""Cluster mode: the transaction coordinator's shards, one per `__transaction_state` partition this
broker leads (Kafka's TransactionStateManager: loadTransactionsForTxnTopicPartition on election,
removeTransactionsForTxnTopicPartition on resignation). Leadership, loading and waiting for
replication are CoordinatorShards'; a shard here is the transactional ids of one partition:

    loaded   ─► its records replayed into the TransactionCoordinator; the transactions found in
                PrepareCommit/PrepareAbort get their markers written (the old coordinator may have
                died between Prepare* and Complete*), as a restart does on one node
    unloaded ─► its transactional ids leave the coordinator (their requests: NOT_COORDINATOR)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from kcompat.server.cluster.coordinator_shards import CoordinatorShards
from kcompat.storage.topic_store import TRANSACTION_STATE
from kcompat.wire.errors import DecodeError

if TYPE_CHECKING:
    from kcompat.coordinator.transaction import MarkerJob, TransactionCoordinator


class TransactionService(Protocol):
    """What the shards need of the broker's TransactionService (txn_service.py)."""

    @property
    def coordinator(self) -> TransactionCoordinator: ...
    def read_partition(self, p: int) -> list[tuple[bytes, bytes | None]]: ...
    def complete_after_load(self, job: MarkerJob) -> None: ...


log = logging.getLogger("kcompat.server.transactions")

# Kafka appends to the transaction log with request.timeout.ms (default 30 s) as its acks=all
# timeout; kcompat has no broker-side request.timeout.ms setting yet, so its default.
TXN_LOG_APPEND_TIMEOUT_MS = 30_000


class TxnShards(CoordinatorShards[TransactionService]):
    topic_name = TRANSACTION_STATE
    log = log

    def on_image(self) -> None:
        super().on_image()
        coordinator = self.service.coordinator
        n = self.table.num_partitions
        if n > 0 and coordinator.config.num_partitions != n:  # the topic's count wins over the setting
            coordinator.config = dataclasses.replace(coordinator.config, num_partitions=n)

    def _read(self, p: int) -> list[tuple[bytes, bytes | None]]:
        return self.service.read_partition(p)

    def _replay(self, p: int, records: list[tuple[bytes, bytes | None]]) -> str:
        coordinator = self.service.coordinator
        for key, value in records:
            try:
                coordinator.replay(key, value)
            except DecodeError as e:
                log.error("skipping an unreadable %s-%d record: %s", TRANSACTION_STATE, p, e)
        mine = self._owned(p)
        pending = coordinator.pending_markers(mine)
        for job in pending:
            self.service.complete_after_load(job)
        ids = sum(1 for txn_id in coordinator.txns if mine(txn_id))
        return f"{len(records)} record(s), {ids} transactional id(s), {len(pending)} to complete"

    def _drop(self, p: int) -> None:
        self.service.coordinator.unload(self._owned(p))

    def _owned(self, p: int) -> Callable[[str], bool]:
        return lambda txn_id: self.table.partition(txn_id) == p
