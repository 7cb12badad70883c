"""Records inside a v2 RecordBatch: build a whole batch, or decode one into Record values.

The 61-byte batch header is drawn in record_batch.py. After it come recordsCount records, the
whole run compressed as one blob when attributes bits 0-2 name a codec (compression.py):

    Record =>
        length          varint     bytes from attributes to the end of headers
        attributes      int8       unused, written as 0
        timestampDelta  varlong    timestamp - batch baseTimestamp
        offsetDelta     varint     offset - batch baseOffset
        keyLength       varint     -1 = null key
        key             bytes
        valueLength     varint     -1 = null value
        value           bytes
        headersCount    varint
        Header =>
            keyLength   varint     never null
            key         UTF-8
            valueLength varint     -1 = null value
            value       bytes

The smallest record is 7 bytes (a 1-byte length and six 1-byte fields), which bounds how many
records a buffer can hold before anything is allocated for them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kcompat.wire import compression as codecs
from kcompat.wire.errors import DecodeError
from kcompat.wire.primitives import Reader, encode_varint, encode_varlong
from kcompat.wire.record_batch import (
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    compute_crc,
    read_header,
)

Buffer = bytes | bytearray | memoryview
Headers = tuple[tuple[str, bytes | None], ...]

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1

MIN_RECORD_SIZE = 7
_INT32_MAX = 0x7FFFFFFF

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_CODEC_IDS = frozenset(int(c) for c in codecs.Compression)


@dataclass(frozen=True, slots=True)
class Record:
    """One record with its absolute offset and timestamp (the batch's deltas already applied)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


def build_batch(
    records: list[Record] | tuple[Record, ...],
    *,
    base_offset: int = 0,
    compression: int = codecs.NONE,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
    control: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """A complete v2 batch holding `records`, CRC set.

    Offsets must be >= base_offset and increasing; baseTimestamp is the first record's timestamp
    and maxTimestamp the largest, as Java's MemoryRecordsBuilder writes them. Like Java's and
    kafka-python's producers, a codec that does not shrink the records is still applied (the
    attributes then say so); an empty list makes the empty batch compaction leaves behind.
    """
    if compression not in _CODEC_IDS:
        raise ValueError(f"unknown compression codec id {compression}")
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"timestamp type {timestamp_type} is neither CreateTime (0) nor LogAppendTime (1)")
    if records:
        base_ts = records[0].timestamp
        max_ts = max(r.timestamp for r in records)
        last_delta = records[-1].offset - base_offset
    else:
        base_ts = max_ts = NO_TIMESTAMP
        last_delta = 0
    body = bytearray()
    prev = -1
    for r in records:
        delta = r.offset - base_offset
        if delta <= prev or delta > _INT32_MAX:
            raise ValueError(f"record offset {r.offset} is out of order or too far from base {base_offset}")
        prev = delta
        _encode_record(body, r, delta, r.timestamp - base_ts)
    if compression != 0:
        body = bytearray(codecs.compress(compression, body, compression_level))

    attributes = compression
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    out = bytearray(HEADER_SIZE)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(body),
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out += body
    _CRC.pack_into(out, 17, compute_crc(out))
    return bytes(out)


def _encode_record(out: bytearray, r: Record, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray(b"\x00")
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    _nullable(body, r.key)
    _nullable(body, r.value)
    body += encode_varint(len(r.headers))
    for hkey, hvalue in r.headers:
        k = hkey.encode()
        body += encode_varint(len(k))
        body += k
        _nullable(body, hvalue)
    out += encode_varint(len(body))
    out += body


def _nullable(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += b"\x01"  # zigzag(-1)
    else:
        out += encode_varint(len(data))
        out += data


def decode_batch(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    max_uncompressed: int = codecs.DEFAULT_MAX_SIZE,
) -> tuple[BatchHeader, list[Record]]:
    """The header and every record of the one batch that fills `buf` exactly.

    Raises DecodeError (and nothing else) for a short or overlong buffer, a bad CRC, an unknown
    codec, corrupt or oversized compressed data, a record count that disagrees with the records,
    or records that do not end exactly where the batch does. For LogAppendTime batches every
    record's timestamp is the batch's maxTimestamp, as Java consumers report it.
    """
    h = read_header(buf)
    if h.size != len(buf):
        raise DecodeError(
            f"batch spans {h.size} bytes but the buffer holds {len(buf)} (use split_batches)",
            "record_batch.batch_length",
        )
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if verify_crc and compute_crc(view) != h.crc:
        raise DecodeError(
            f"CRC-32C {compute_crc(view):#010x} does not match stored {h.crc:#010x}", "record_batch.crc"
        )
    if h.records_count < 0:
        raise DecodeError(f"negative record count {h.records_count}", "record_batch.records_count")
    codec = codecs.codec(h.attributes)
    body: memoryview = view[HEADER_SIZE:]
    if codec != codecs.NONE:
        body = memoryview(codecs.decompress(codec, body, max_uncompressed))
    records = decode_records(body, h)
    return h, records


def decode_records(body: memoryview, h: BatchHeader) -> list[Record]:
    """The records of an already decompressed batch body, checked to fill it exactly."""
    count = h.records_count
    if count * MIN_RECORD_SIZE > len(body):
        raise DecodeError(f"{count} records cannot fit in {len(body)} bytes", "record_batch.records_count")
    r = Reader(body)
    out: list[Record] = []
    base_offset = h.base_offset
    base_ts = h.base_timestamp
    append_time = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None
    for i in range(count):
        try:
            out.append(_decode_record(r, base_offset, base_ts, append_time))
        except DecodeError as e:
            raise e.within(f"record_batch.records[{i}]") from None
    if r.remaining():
        raise DecodeError(f"{r.remaining()} bytes left after {count} records", "record_batch.records")
    return out


def _decode_record(r: Reader, base_offset: int, base_ts: int, append_time: int | None) -> Record:
    length = r.varint()
    if length < 0 or length > r.remaining():
        raise DecodeError(f"record length {length} exceeds the {r.remaining()} bytes left", "length")
    end = r.pos + length
    outer_end = r.end
    r.end = end  # fields of this record may not run into the next one
    try:
        r.int8()  # attributes: unused since magic 2
        ts_delta = r.varlong()
        offset_delta = r.varint()
        key = _read_nullable(r, "key")
        value = _read_nullable(r, "value")
        n = r.varint()
        if n < 0 or n * 2 > r.remaining():
            raise DecodeError(f"{n} headers cannot fit in the {r.remaining()} bytes left", "headers")
        headers: list[tuple[str, bytes | None]] = []
        for j in range(n):
            klen = r.varint()
            if klen < 0:
                raise DecodeError(f"header key length {klen}: keys are never null", f"headers[{j}].key")
            try:
                hkey = str(r.raw(klen), "utf-8")
            except UnicodeDecodeError:
                raise DecodeError("header key is not UTF-8", f"headers[{j}].key") from None
            except DecodeError as e:
                raise e.within(f"headers[{j}].key") from None
            headers.append((hkey, _read_nullable(r, f"headers[{j}].value")))
        if r.pos != end:
            raise DecodeError(f"{end - r.pos} bytes left inside the record's length", "length")
    finally:
        r.end = outer_end
    ts = append_time if append_time is not None else base_ts + ts_delta
    return Record(base_offset + offset_delta, ts, key, value, tuple(headers))


def _read_nullable(r: Reader, field: str) -> bytes | None:
    n = r.varint()
    if n == -1:
        return None
    if n < -1:
        raise DecodeError(f"length {n}", field)
    try:
        return bytes(r.raw(n))
    except DecodeError as e:
        raise e.within(field) from None


__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "BatchHeader",
    "Record",
    "build_batch",
    "decode_batch",
    "decode_records",
]
