"""ListOffsets by time over a log's segments: the first record at or after a timestamp, and the
record with the largest timestamp (KIP-734). Functions of the segment list, which PartitionLog
hands in (Kafka's UnifiedLog.fetchOffsetByTimestamp, searching its local log)."""

from __future__ import annotations

from collections.abc import Sequence

from kcompat.log.errors import KafkaStorageError
from kcompat.log.record_view import RecordView, first_record_at_or_after, iter_records
from kcompat.log.segment import LogSegment
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import BatchHeader


def offset_for_timestamp(
    segments: Sequence[LogSegment], timestamp: int, log_start_offset: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after `timestamp` (ListOffsets), or None.

    Finds the first segment whose largest timestamp reaches the target, then the batch through
    the time index, then decodes that one batch to find the record.
    """
    for seg in segments:
        if seg.max_timestamp_so_far < timestamp:
            continue
        found = seg.find_batch_by_timestamp(timestamp, log_start_offset)
        if found is None:
            continue
        pos, h = found
        data = memoryview(seg.log.pread(h.size, pos))
        try:
            hit = first_record_at_or_after(data, h, timestamp, log_start_offset)
        except DecodeError as e:
            raise KafkaStorageError(f"stored batch at offset {h.base_offset} does not decode: {e}") from e
        if hit is not None:
            return hit
    return None


def max_timestamp_offset(segments: Sequence[LogSegment]) -> tuple[int, int]:
    """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3); (-1, -1) if none."""
    best: LogSegment | None = None
    for seg in segments:
        if seg.max_timestamp_so_far >= 0 and (
            best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far
        ):
            best = seg
    if best is None:
        return -1, -1
    found = best.translate_offset(best.offset_of_max_timestamp_so_far)
    if found is None:
        return -1, -1
    pos, h = found
    for r in _records_at(best, pos, h):
        if r.timestamp == h.max_timestamp:
            return r.offset, r.timestamp
    return h.last_offset, h.max_timestamp


def _records_at(seg: LogSegment, pos: int, h: BatchHeader) -> list[RecordView]:
    data = memoryview(seg.log.pread(h.size, pos))
    try:
        return iter_records(data, h)
    except DecodeError as e:
        raise KafkaStorageError(f"stored batch at offset {h.base_offset} does not decode: {e}") from e
