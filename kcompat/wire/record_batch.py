"""RecordBatch v2 header: read, verify and patch in place, never unpacking the records.

Layout (implementation.html 5.3.1), offsets in bytes from the batch start:

     0  baseOffset            int64   \
     8  batchLength           int32    | outside the CRC: the broker rewrites
    12  partitionLeaderEpoch  int32    | baseOffset and the leader epoch in place
    16  magic                 int8    /  (magic 2)
    17  crc                   uint32     CRC-32C of bytes 21 .. end of batch
    21  attributes            int16      bits 0-2 codec, 3 timestampType, 4 transactional,
                                         5 control, 6 hasDeleteHorizonMs
    23  lastOffsetDelta       int32
    27  baseTimestamp         int64
    35  maxTimestamp          int64
    43  producerId            int64
    51  producerEpoch         int16
    53  baseSequence          int32
    57  recordsCount          int32
    61  records...

batchLength counts from byte 12 (after baseOffset and itself), so a batch spans 12 + batchLength.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kcompat.wire.checksum import crc32c
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
CRC_START = 21
MAGIC_OFFSET = 16

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LENGTH = struct.Struct(">i")
_OFFSET_AND_LENGTH = struct.Struct(">qi")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class BatchHeader(NamedTuple):
    """The header fields, as a tuple: built per batch on the produce path, so it must be cheap."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The v2 header at `pos`. Raises DecodeError if fewer than 61 bytes are there or magic is not 2."""
    if len(buf) - pos < HEADER_SIZE:
        raise DecodeError(f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left", "record_batch")
    h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if h.magic != 2:
        raise DecodeError(f"magic {h.magic} is not a v2 record batch", "record_batch.magic")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise DecodeError(
            f"batch length {h.batch_length} is shorter than a header", "record_batch.batch_length"
        )
    return h


def peek_offset_and_length(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(baseOffset, batchLength) from the first 12 bytes: enough to walk a log without parsing more."""
    base, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    return base, length


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    """CRC-32C over attributes..end, as the header's crc field should hold."""
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    return crc32c(view[CRC_START:])


def crc_ok(batch: bytes | bytearray | memoryview, header: BatchHeader | None = None) -> bool:
    h = header or read_header(batch)
    return compute_crc(batch) == h.crc


def set_base_offset(batch: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Rewrite baseOffset in place: outside the CRC, so the CRC stays valid."""
    _BASE_OFFSET.pack_into(batch, pos, base_offset)


def set_partition_leader_epoch(batch: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    _LEADER_EPOCH.pack_into(batch, pos + 12, epoch)


def split_batches(buf: bytes | bytearray | memoryview) -> list[tuple[int, int]]:
    """(position, size) of each whole batch in a records blob; a truncated tail is left out.

    Only the 12-byte prefix of each batch is read, so this is cheap enough for the produce path.
    """
    out = []
    pos = 0
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        _, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise DecodeError(f"batch length {length} is shorter than a header", "records")
        size = LOG_OVERHEAD + length
        if pos + size > end:
            break
        out.append((pos, size))
        pos += size
    return out


_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35
_CRC_OFFSET = 17
_MAX_CODEC = 4  # zstd; ids 5-7 are undefined
_MIN_RECORD_SIZE = 7  # see records.py


def set_log_append_time(batch: bytearray | memoryview, ts_ms: int, pos: int = 0) -> None:
    """Stamp the batch with the broker's append time, as Java's DefaultRecordBatch.setMaxTimestamp does.

    Sets the LogAppendTime bit, writes `ts_ms` over maxTimestamp (consumers then report it as every
    record's timestamp) and recomputes the CRC, since both fields lie inside it.
    """
    (length,) = _LENGTH.unpack_from(batch, pos + 8)
    end = pos + LOG_OVERHEAD + length
    if length < HEADER_SIZE - LOG_OVERHEAD or end > len(batch):
        raise ValueError(f"no whole batch at {pos}: length {length}, {len(batch) - pos} bytes present")
    (attributes,) = _ATTRIBUTES.unpack_from(batch, pos + _ATTRIBUTES_OFFSET)
    _ATTRIBUTES.pack_into(batch, pos + _ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _MAX_TIMESTAMP.pack_into(batch, pos + _MAX_TIMESTAMP_OFFSET, ts_ms)
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    _CRC.pack_into(batch, pos + _CRC_OFFSET, crc32c(view[pos + CRC_START : end]))


class RecordBatchError(DecodeError):
    """A produced batch Kafka would reject; `error` is the Kafka error code to answer with."""

    def __init__(self, error: ErrorCode, reason: str, field: str | None = None) -> None:
        super().__init__(reason, field)
        self.error = error

    @property
    def error_name(self) -> str:
        return self.error.name


def validate_batch(buf: bytes | bytearray | memoryview, *, allow_control: bool = False) -> BatchHeader:
    """The header of the one batch that fills `buf`, checked as Kafka checks a produced batch.

    Only the header and the CRC are looked at, never the records (the produce hot path stores the
    batch as it came). CORRUPT_MESSAGE for a size or CRC problem (Java clients retry it),
    INVALID_RECORD for a header no producer should write: wrong magic, unknown codec, a record
    count that disagrees with the offset range, or a control batch from a client.
    """
    n = len(buf)
    if n < HEADER_SIZE:
        raise RecordBatchError(
            ErrorCode.CORRUPT_MESSAGE,
            f"{n} bytes cannot hold a {HEADER_SIZE}-byte batch header",
            "record_batch",
        )
    h = BatchHeader._make(_HEADER.unpack_from(buf, 0))
    if LOG_OVERHEAD + h.batch_length < n and _whole_batch_follows(buf, LOG_OVERHEAD + h.batch_length):
        raise RecordBatchError(
            ErrorCode.INVALID_RECORD, "a produced partition must hold exactly one batch", "record_batch"
        )
    if h.batch_length + LOG_OVERHEAD != n:
        raise RecordBatchError(
            ErrorCode.CORRUPT_MESSAGE,
            f"batch length {h.batch_length} + {LOG_OVERHEAD} disagrees with the {n} bytes sent",
            "record_batch.batch_length",
        )
    if h.magic != 2:
        raise RecordBatchError(
            ErrorCode.INVALID_RECORD,
            f"magic {h.magic}: only v2 batches may be produced",
            "record_batch.magic",
        )
    crc = compute_crc(buf)
    if crc != h.crc:
        raise RecordBatchError(
            ErrorCode.CORRUPT_MESSAGE,
            f"CRC-32C {crc:#010x} does not match stored {h.crc:#010x}",
            "record_batch.crc",
        )
    if h.attributes & COMPRESSION_MASK > _MAX_CODEC:
        raise RecordBatchError(
            ErrorCode.INVALID_RECORD,
            f"unknown compression codec id {h.attributes & COMPRESSION_MASK}",
            "record_batch.attributes",
        )
    if h.is_control and not allow_control:
        raise RecordBatchError(
            ErrorCode.INVALID_RECORD, "clients may not write control batches", "record_batch.attributes"
        )
    if h.records_count <= 0:
        raise RecordBatchError(
            ErrorCode.INVALID_RECORD,
            f"record count {h.records_count} is not positive",
            "record_batch.records_count",
        )
    if h.last_offset_delta != h.records_count - 1:
        raise RecordBatchError(
            ErrorCode.INVALID_RECORD,
            f"last offset delta {h.last_offset_delta} disagrees with {h.records_count} records",
            "record_batch.last_offset_delta",
        )
    if not h.compression and h.records_count * _MIN_RECORD_SIZE > n - HEADER_SIZE:
        raise RecordBatchError(
            ErrorCode.INVALID_RECORD,
            f"{h.records_count} records cannot fit in {n - HEADER_SIZE} bytes",
            "record_batch.records_count",
        )
    return h


def _whole_batch_follows(buf: bytes | bytearray | memoryview, pos: int) -> bool:
    if len(buf) - pos < LOG_OVERHEAD:
        return False
    length: int = _OFFSET_AND_LENGTH.unpack_from(buf, pos)[1]
    return length >= HEADER_SIZE - LOG_OVERHEAD and pos + LOG_OVERHEAD + length <= len(buf)
