"""Building v2 record batches for the log tests, independently of the code under test.

Layout per implementation.html 5.3: a 61-byte header (see kcompat/wire/record_batch.py) then the
records, each `varint length | int8 attrs | varlong tsDelta | varint offsetDelta | varint keyLen |
key | varint valueLen | value | varint headerCount(0)`.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from kcompat.wire.compression import compress


def _uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _zigzag(v: int) -> bytes:
    return _uvarint((v << 1) ^ (v >> 63) if v < 0 else v << 1)


def record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")
    body += _zigzag(ts_delta) + _zigzag(offset_delta)
    body += _zigzag(-1) if key is None else _zigzag(len(key)) + key
    body += _zigzag(-1) if value is None else _zigzag(len(value)) + value
    body += _zigzag(0)
    return _zigzag(len(body)) + bytes(body)


def batch(
    records: list[tuple[bytes | None, bytes | None]] | int = 1,
    *,
    base_offset: int = 0,
    timestamp: int = 1_000,
    timestamps: list[int] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    attributes: int = 0,
    value_size: int = 10,
) -> bytes:
    """A valid batch. `records` is a list of (key, value) or a count of keyed records."""
    if isinstance(records, int):
        records = [(b"k%d" % i, b"v" * value_size) for i in range(records)]
    ts = timestamps or [timestamp + i for i in range(len(records))]
    payload = b"".join(record(i, ts[i] - ts[0], k, v) for i, (k, v) in enumerate(records))
    if compression:
        payload = compress(compression, payload)
    attrs = attributes | compression
    size = 61 + len(payload)
    head = struct.pack(
        ">qiibIhiqqqhii", base_offset, size - 12, -1, 2, 0, attrs, len(records) - 1,
        ts[0], max(ts), producer_id, producer_epoch, base_sequence, len(records),
    )  # fmt: skip
    buf = bytearray(head + payload)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)
