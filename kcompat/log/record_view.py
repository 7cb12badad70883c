"""The records inside one stored v2 batch, for the two places the engine must look inside a batch:
compaction (keys, tombstones) and offset-for-timestamp (the first record at or after a time).

Record layout (implementation.html 5.3.2), after the 61-byte batch header, possibly compressed:

    length          varint   bytes after this field
    attributes      int8     unused
    timestampDelta  varlong  from the batch's baseTimestamp
    offsetDelta     varint   from the batch's baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value (a tombstone)
    value           bytes
    headersCount    varint, then headers

`body` keeps the bytes from keyLength to the end of the record, so a record can be re-encoded
against another base timestamp without touching its key, value or headers.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcompat.wire.compression import decompress
from kcompat.wire.errors import DecodeError
from kcompat.wire.primitives import Reader, encode_varint, encode_varlong
from kcompat.wire.record_batch import HEADER_SIZE, BatchHeader


@dataclass(frozen=True, slots=True)
class RecordView:
    offset: int
    timestamp: int  # as a consumer sees it (the batch's max timestamp under LogAppendTime)
    encoded_timestamp: int  # baseTimestamp + timestampDelta, as stored
    offset_delta: int
    attributes: int
    key: bytes | None
    has_value: bool
    body: memoryview  # keyLength .. end of record

    def encode(self, base_timestamp: int) -> bytes:
        """This record, with its timestamp expressed against `base_timestamp`."""
        inner = (
            bytes((self.attributes,))
            + encode_varlong(self.encoded_timestamp - base_timestamp)
            + encode_varint(self.offset_delta)
            + bytes(self.body)
        )
        return encode_varint(len(inner)) + inner


def records_payload(batch: memoryview, h: BatchHeader) -> memoryview:
    """The uncompressed record bytes of a batch."""
    raw = batch[HEADER_SIZE : h.size]
    if h.compression == 0:
        return raw
    return memoryview(decompress(h.compression, raw))


def iter_records(batch: memoryview, h: BatchHeader) -> list[RecordView]:
    """Every record of the batch; DecodeError if the records do not parse."""
    payload = records_payload(batch, h)
    r = Reader(payload)
    out = []
    log_append = h.log_append_time
    for _ in range(h.records_count):
        length = r.varint()
        end = r.pos + length
        if length < 0 or end > r.end:
            raise DecodeError(f"record length {length} runs past the batch", "records")
        attributes = r.int8() & 0xFF
        ts_delta = r.varlong()
        offset_delta = r.varint()
        body_start = r.pos
        key_len = r.varint()
        key = bytes(r.raw(key_len)) if key_len >= 0 else None
        value_len = r.varint()
        if value_len >= 0:
            r.raw(value_len)
        r.pos = end
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        out.append(
            RecordView(
                h.base_offset + offset_delta,
                ts,
                h.base_timestamp + ts_delta,
                offset_delta,
                attributes,
                key,
                value_len >= 0,
                payload[body_start:end],
            )
        )
    return out


def _uvarint_at(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint is too long", "records")


def first_record_at_or_after(
    batch: memoryview, h: BatchHeader, timestamp: int, min_offset: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= `timestamp` and offset >= `min_offset`.

    Reads only each record's length, timestamp delta and offset delta (no objects per record): the
    ListOffsets-by-time path decodes one batch per lookup.
    """
    if h.log_append_time:
        return next(((r.offset, r.timestamp) for r in iter_records(batch, h) if r.offset >= min_offset), None)
    buf = bytes(records_payload(batch, h))
    pos, end = 0, len(buf)
    base_ts, base_off = h.base_timestamp, h.base_offset
    try:
        for _ in range(h.records_count):
            zz, pos = _uvarint_at(buf, pos)
            length = (zz >> 1) ^ -(zz & 1)
            next_pos = pos + length
            if length < 0 or next_pos > end:
                raise DecodeError(f"record length {length} runs past the batch", "records")
            zz, p = _uvarint_at(buf, pos + 1)  # after the attributes byte
            ts = base_ts + ((zz >> 1) ^ -(zz & 1))
            if ts >= timestamp:
                zz, p = _uvarint_at(buf, p)
                offset = base_off + ((zz >> 1) ^ -(zz & 1))
                if offset >= min_offset:
                    return offset, ts
            pos = next_pos
    except IndexError:
        raise DecodeError("record runs past the batch", "records") from None
    return None
