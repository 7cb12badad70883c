"""`__transaction_state` records, in Kafka's formats (transaction-coordinator-records/*.json).

    key    int16 version 0, TransactionLogKey v0 {TransactionalId}
    value  int16 version, TransactionLogValue: v1 (flexible, with the tagged fields of
           transactions v2: PreviousProducerId, NextProducerId, ClientTransactionVersion) while
           transaction.version >= 1 is finalized, else v0, as Kafka chooses; null = tombstone
A transactional id lives in partition abs(javaHashCode(id)) % transaction.state.log.num.partitions,
as a group does in `__consumer_offsets`. TransactionPartitions is null in the Empty state.
"""

from __future__ import annotations

from kcompat.coordinator.record_pair import offsets_partition
from kcompat.coordinator.transaction.state import TransactionMetadata, TransactionState
from kcompat.wire.codec import MessageCodec
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages.txn_records import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE
from kcompat.wire.primitives import Reader, Writer
from kcompat.wire.types.txn_records import PartitionsSchema, TransactionLogKey, TransactionLogValue

KEY_VERSION = 0
VALUE_VERSION = 1  # transaction.version >= 1 (0 below it)
_KEY = MessageCodec(TRANSACTION_LOG_KEY)
_VALUE = MessageCodec(TRANSACTION_LOG_VALUE)


def transaction_partition(transactional_id: str, num_partitions: int) -> int:
    return offsets_partition(transactional_id, num_partitions)


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(KEY_VERSION)
    _KEY.write(w, TransactionLogKey(transactional_id=transactional_id), KEY_VERSION)
    return w.getvalue()


def encode_value(m: TransactionMetadata, version: int = VALUE_VERSION) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(p)
    value = TransactionLogValue(
        producer_id=m.producer_id,
        producer_epoch=m.producer_epoch,
        transaction_timeout_ms=m.txn_timeout_ms,
        transaction_status=int(m.state),
        transaction_partitions=None
        if m.state is TransactionState.EMPTY
        else [PartitionsSchema(topic=t, partition_ids=ps) for t, ps in by_topic.items()],
        transaction_last_update_timestamp_ms=m.txn_last_update_ms,
        transaction_start_timestamp_ms=m.txn_start_ms,
        previous_producer_id=m.previous_producer_id,
        next_producer_id=m.next_producer_id,
        client_transaction_version=m.client_transaction_version,
    )
    w = Writer()
    w.int16(version)
    _VALUE.write(w, value, version)
    return w.getvalue()


def decode(key: bytes, value: bytes | None) -> tuple[str, TransactionMetadata | None]:
    """(transactional id, metadata or None for a tombstone); DecodeError for bytes that are not one."""
    r = Reader(memoryview(key))
    version = r.int16()
    if version != KEY_VERSION:
        raise DecodeError(f"transaction log key version {version}", "key")
    k = _KEY.decode(r, KEY_VERSION)
    if value is None:
        return k.transactional_id, None
    r = Reader(memoryview(value))
    version = r.int16()
    if version not in (0, 1):
        raise DecodeError(f"transaction log value version {version}", "value")
    v = _VALUE.decode(r, version)
    try:
        state = TransactionState(v.transaction_status)
    except ValueError:
        raise DecodeError(f"transaction status {v.transaction_status}", "value") from None
    m = TransactionMetadata(
        transactional_id=k.transactional_id,
        producer_id=v.producer_id,
        producer_epoch=v.producer_epoch,
        txn_timeout_ms=v.transaction_timeout_ms,
        state=state,
        partitions={(t.topic, p) for t in v.transaction_partitions or () for p in t.partition_ids},
        txn_start_ms=v.transaction_start_timestamp_ms,
        txn_last_update_ms=v.transaction_last_update_timestamp_ms,
        client_transaction_version=v.client_transaction_version,
        next_producer_id=v.next_producer_id,
        previous_producer_id=v.previous_producer_id,
    )
    return k.transactional_id, m
