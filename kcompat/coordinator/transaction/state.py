"""Kafka's transaction states (TransactionState.java: ids as stored in `__transaction_state`) and metadata.

The table VALID_PREVIOUS is Kafka's validPreviousStates: a transition to a state is allowed only
from the states listed for it. TV1 paths:

    Empty / CompleteCommit / CompleteAbort --AddPartitions/AddOffsets--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --all markers written--> CompleteCommit
    Ongoing --EndTxn(abort)--> PrepareAbort  --all markers written--> CompleteAbort
    Ongoing --InitProducerId of a new instance, or timeout--> PrepareEpochFence --> PrepareAbort
Transactions v2 add: EndTxn bumps the epoch on every commit and abort (the markers carry the new
one), and an abort with nothing added goes Empty / Complete* --> PrepareAbort.
    Empty / CompleteCommit / CompleteAbort --transactional.id.expiration.ms--> Dead (tombstone)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """As DescribeTransactions/ListTransactions spell it."""
        return "".join(w.capitalize() for w in self.name.split("_"))


S = TransactionState
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset(
        {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    ),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})  # no transaction open
PREPARING = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE})  # markers pending


class IllegalTransition(Exception):
    pass


TopicPartition = tuple[str, int]


@dataclass
class TransactionMetadata:
    """One transactional id's state (Kafka's TransactionMetadata)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState = S.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_ms: int = -1
    txn_last_update_ms: int = -1
    last_producer_epoch: int = -1  # the epoch before the last bump (a retried InitProducerId matches it)
    # Transactions v2 (KIP-890 part 2): the client's transaction.version (0 for v1 clients), and
    # the producer id that replaces this one once the epoch is exhausted (taken at EndTxn, in
    # force once the markers are written), and the one it replaced (a retried EndTxn names it).
    client_transaction_version: int = 0
    next_producer_id: int = -1
    previous_producer_id: int = -1

    def transition(self, to: TransactionState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[to]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {to.kafka_name}")
        if to is S.ONGOING and self.state is not S.ONGOING:
            self.txn_start_ms = now_ms
        self.state = to
        self.txn_last_update_ms = now_ms
