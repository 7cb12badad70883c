"""What a partition leader answers a transactional Produce whose check at the transaction
coordinator failed, as Kafka's ReplicaManager turns AddPartitionsToTxnManager's errors into
Produce's codes. One table for both ways the check is made: at a coordinator on another broker
(AddPartitionsToTxn v5, cluster/txn_channels.py) and in process when this broker coordinates the
transactional id (txn_service.py); Kafka's leader makes the same round trip to itself, so the
answers must not differ.

    the coordinator's code                               Produce's code
    CONCURRENT_TRANSACTIONS (the last transaction's       NOT_ENOUGH_REPLICAS: retriable for every
    markers still being written), NETWORK_EXCEPTION,      producer, and not a reason to refresh
    COORDINATOR_LOAD_IN_PROGRESS / _NOT_AVAILABLE,        metadata
    NOT_COORDINATOR
    PRODUCER_FENCED                                       INVALID_PRODUCER_EPOCH
    TRANSACTION_ABORTABLE, to a Produce before v11        INVALID_TXN_STATE
    CLUSTER_AUTHORIZATION_FAILED (the whole request)      INVALID_TXN_STATE
"""

from __future__ import annotations

from kcompat.wire.error_codes import ErrorCode

RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


def produce_error(code: ErrorCode, transaction_abortable: bool) -> tuple[ErrorCode, str]:
    """Produce's code and message for the coordinator's `code` (NONE: the batch may be appended).
    `transaction_abortable`: the Produce version knows TRANSACTION_ABORTABLE (v11+)."""
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        code = ErrorCode.INVALID_TXN_STATE  # never shown to the producer as such
    elif code == ErrorCode.PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH  # what producers expect here
    elif code == ErrorCode.TRANSACTION_ABORTABLE and not transaction_abortable:
        code = ErrorCode.INVALID_TXN_STATE
    if code in RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
        return ErrorCode.NOT_ENOUGH_REPLICAS, (
            f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}"
        )
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, "Partition was not added to the transaction"
    return code, code.name
