"""The per-record checks of a produced batch (Kafka's LogValidator), with KIP-467's record errors.

Kafka looks at every record of a batch it appends: a record without a key is refused by a
compacted topic (INVALID_RECORD), and under CreateTime a timestamp older than
message.timestamp.before.max.ms or further ahead than message.timestamp.after.max.ms is refused
(INVALID_TIMESTAMP). One bad record rejects the whole batch; the Produce response (v8+) names each
bad record by its index in the batch, with Kafka's message.

kcompat stores batches as sent and does not unpack them. The header alone clears the common case:
a topic that is not compacted and a batch whose baseTimestamp and maxTimestamp both lie inside the
window (producers write the first record's time as baseTimestamp and deltas from it, so a record
older than the first is not looked for). Only otherwise are the records decoded.
"""

from __future__ import annotations

from typing import NamedTuple

from kcompat.log.config import LONG_MAX, LogConfig
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import BatchHeader
from kcompat.wire.records import decode_batch

NO_TIMESTAMP = -1


class RecordErrors(NamedTuple):
    """Why a batch was refused: the partition's error, its message and [(batch_index, message)]."""

    error: ErrorCode
    message: str
    records: list[tuple[int, str]]


def _java_long(value: int) -> int:
    """`value` wrapped to a signed 64-bit long, as Kafka's subtraction of two timestamps is."""
    return (value + 2**63) % 2**64 - 2**63


def _outside(ts: int, now: int, before: int, after: int) -> bool:
    diff = _java_long(now - ts)
    return diff > before or -diff > after


def check_records(
    batch: bytes | bytearray | memoryview,
    h: BatchHeader,
    conf: LogConfig,
    now: int,
    topic: str,
    partition: int,
) -> RecordErrors | None:
    """None when the batch may be appended, else the record errors Kafka would report."""
    create_time = conf.message_timestamp_type == "CreateTime"
    before, after = conf.message_timestamp_before_max_ms, conf.message_timestamp_after_max_ms
    if not conf.compact:
        if not create_time:
            return None
        # Exact integers here, Java's wrapping below: an extreme value only sends us to the records.
        newest, oldest = h.max_timestamp, h.base_timestamp
        if (newest == NO_TIMESTAMP or newest - now <= after) and (
            before == LONG_MAX or oldest == NO_TIMESTAMP or now - oldest <= before
        ):
            return None
    try:
        _, records = decode_batch(batch, verify_crc=False)
    except DecodeError as e:
        return RecordErrors(ErrorCode.CORRUPT_MESSAGE, f"Record batch is corrupt: {e}", [])
    errors: list[tuple[int, str]] = []
    bad_time = False
    for index, record in enumerate(records):
        if conf.compact and record.key is None:
            errors.append(
                (
                    index,
                    f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}",
                )
            )
        elif (
            create_time
            and record.timestamp != NO_TIMESTAMP
            and _outside(record.timestamp, now, before, after)
        ):
            bad_time = True
            errors.append(
                (
                    index,
                    f"Timestamp {record.timestamp} of message with offset {record.offset} is out of "
                    f"range. The timestamp should be within [{_java_long(now - before)}, "
                    f"{_java_long(now + after)}]",
                )
            )
    if not errors:
        return None
    if bad_time:
        return RecordErrors(
            ErrorCode.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            errors,
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return RecordErrors(
        ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]",
        errors,
    )
