"""The transaction coordinator (Kafka's TransactionCoordinator), pure: no I/O, no clock.

    state.py        Kafka's transaction states and their allowed transitions, as a table
    log_records.py  `__transaction_state` keys and values in Kafka's formats
    coordinator.py  the decisions: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
                    timeouts and expiry; each returns the records to append and the markers to write
The server (kcompat/server/transactions/txn_service.py) appends, writes markers, and keeps the timers.
"""

from kcompat.coordinator.transaction.coordinator import (
    MarkerJob,
    TransactionCoordinator,
    TxnConfig,
    TxnResult,
)
from kcompat.coordinator.transaction.state import TransactionMetadata, TransactionState

__all__ = [
    "MarkerJob",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TransactionState",
    "TxnConfig",
    "TxnResult",
]
