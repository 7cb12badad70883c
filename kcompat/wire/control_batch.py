"""Control batches: the COMMIT/ABORT markers that end a transaction in a partition.

A control batch has attributes 0x20 (control) | 0x10 (transactional), is never compressed and
holds one record (Kafka's EndTransactionMarker / ControlRecordType):
    key    version int16 = 0, type int16 (0 ABORT, 1 COMMIT)
    value  version int16 = 0, coordinatorEpoch int32
The marker takes an offset of its own, so a transaction's offsets are followed by a gap a
consumer never sees a record at.
"""

from __future__ import annotations

import struct

from kcompat.wire.errors import DecodeError
from kcompat.wire.primitives import Reader
from kcompat.wire.record_batch import HEADER_SIZE, BatchHeader
from kcompat.wire.records import Record, build_batch

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
# The record of a marker is at most: length(1) attributes(1) tsDelta(1) offsetDelta(1)
# keyLength(1) key(4) valueLength(1) value(6) headers(1); read a little more to be safe.
MARKER_RECORD_READ = 32


def end_txn_marker(
    producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """One control batch (base offset 0, patched on append) ending `producer_id`'s transaction."""
    record = Record(
        offset=0,
        timestamp=timestamp_ms,
        key=_KEY.pack(0, COMMIT if commit else ABORT),
        value=_VALUE.pack(0, coordinator_epoch),
    )
    return build_batch(
        [record], producer_id=producer_id, producer_epoch=producer_epoch, transactional=True, control=True
    )


def control_type(records: bytes | bytearray | memoryview, h: BatchHeader) -> int:
    """ABORT (0), COMMIT (1) or another control type of the batch whose records start at 0 of `records`.

    `records` are the bytes after the 61-byte batch header (at least MARKER_RECORD_READ of them, or
    the whole rest of the batch). Raises DecodeError if they do not hold a control record key.
    """
    if not h.is_control:
        raise DecodeError("not a control batch")
    r = Reader(memoryview(records))
    r.varint()  # record length
    r.int8()  # attributes
    r.varlong()  # timestamp delta
    r.varint()  # offset delta
    key_len = r.varint()
    if key_len < 4:
        raise DecodeError(f"control record key of {key_len} bytes")
    _version, kind = _KEY.unpack(r.raw(4))
    return int(kind)


def control_type_in_batch(batch: bytes | bytearray | memoryview, h: BatchHeader) -> int:
    """control_type() of a whole batch (header included)."""
    return control_type(memoryview(batch)[HEADER_SIZE : h.size], h)
