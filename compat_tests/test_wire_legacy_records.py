"""Legacy message sets v0/v1 built by kafka-python decode as kafka-python itself reads them."""

from __future__ import annotations

import contextlib
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kcompat.wire.compression import Compression, compress, xxh32
from kcompat.wire.errors import DecodeError
from kcompat.wire.legacy_records import decode_message_set

BASE_TS = 1_700_000_000_000


def _build(magic: int, codec: int, n: int = 5) -> bytes:
    b = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(n):
        b.append(
            i,
            BASE_TS + i if magic else None,
            None if i % 2 else b"k%d" % i,
            b"v" * 40 * i if i != 3 else None,
        )
    return bytes(b.build())


def _as_broker_stored(data: bytes, last_offset: int) -> bytes:
    """A producer writes wrapper offset 0; the broker stores the last inner message's offset there."""
    return struct.pack(">q", last_offset) + data[8:]


# kafka-python writes magic-0 lz4 only with xxhash installed; test_magic0_lz4_... covers it by hand.
@pytest.mark.parametrize(("magic", "codec"), [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)])
def test_matches_kafka_python_reader(magic: int, codec: int) -> None:
    data = _build(magic, codec)
    if codec:
        data = _as_broker_stored(data, 104 if magic == 1 else 4)
    ours = decode_message_set(data)
    theirs = []
    mr = MemoryRecords(data)
    while (batch := mr.next_batch()) is not None:
        assert batch.magic == magic
        theirs.extend(batch)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in ours] == [
        (t.offset, t.timestamp if magic else -1, t.key, t.value) for t in theirs
    ]
    assert len(ours) == 5
    if codec and magic == 1:
        assert [r.offset for r in ours] == [100, 101, 102, 103, 104]


def _message(magic: int, attributes: int, key: bytes | None, value: bytes | None, ts: int = 0) -> bytes:
    body = struct.pack(">bB", magic, attributes) + (struct.pack(">q", ts) if magic else b"")
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    return struct.pack(">I", zlib.crc32(body)) + body


def _entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


def test_magic0_lz4_with_the_old_broken_header_checksum() -> None:
    inner = b"".join(_entry(i, _message(0, 0, None, b"value %d" % i)) for i in range(3))
    frame = bytearray(compress(Compression.LZ4, inner))
    frame[6] = (xxh32(bytes(frame[:6])) >> 8) & 0xFF  # Kafka 0.8/0.9 hashed the frame magic too
    data = _entry(2, _message(0, 3, None, bytes(frame)))
    assert [(r.offset, r.value) for r in decode_message_set(data)] == [(i, b"value %d" % i) for i in range(3)]


def test_log_append_time_wrapper_stamps_inner_messages() -> None:
    inner = b"".join(_entry(i, _message(1, 0, None, b"x", ts=BASE_TS + i)) for i in range(3))
    data = _entry(12, _message(1, 1 | 0x08, None, compress(Compression.GZIP, inner), ts=BASE_TS + 500))
    recs = decode_message_set(data)
    assert [(r.offset, r.timestamp, r.log_append_time) for r in recs] == [
        (10 + i, BASE_TS + 500, True) for i in range(3)
    ]


def test_truncated_tail_is_left_out_but_inner_truncation_is_an_error() -> None:
    data = _build(1, 0)
    whole = decode_message_set(data)
    assert decode_message_set(data[:-5]) == whole[:-1]
    inner = _entry(0, _message(1, 0, None, b"abc"))[:-2]
    with pytest.raises(DecodeError):
        decode_message_set(_entry(0, _message(1, 1, None, compress(Compression.GZIP, inner))))


def test_nested_compression_and_bad_crc_are_rejected() -> None:
    innermost = _entry(0, _message(1, 0, None, b"abc"))
    nested = _entry(0, _message(1, 1, None, compress(Compression.GZIP, innermost)))
    with pytest.raises(DecodeError, match="compressed again"):
        decode_message_set(_entry(0, _message(1, 1, None, compress(Compression.GZIP, nested))))
    bad = bytearray(_build(0, 0))
    bad[-1] ^= 1
    with pytest.raises(DecodeError, match="CRC-32"):
        decode_message_set(bytes(bad))
    assert len(decode_message_set(bytes(bad), verify_crc=False)) == 5


def test_wrappers_share_one_decompression_cap() -> None:
    inner = _entry(0, _message(1, 0, None, bytes(600_000)))
    wrapper = _entry(0, _message(1, 4 - 3, None, compress(Compression.GZIP, inner)))
    with pytest.raises(DecodeError, match="more than"):
        decode_message_set(wrapper * 2, max_uncompressed=1_000_000)
    assert len(decode_message_set(wrapper * 2)) == 2


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_garbage_only_raises_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_message_set(data)


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_mutated_sets_only_raise_decode_error(data: st.DataObject) -> None:
    buf = bytearray(_build(data.draw(st.sampled_from([0, 1])), data.draw(st.sampled_from([0, 1, 2]))))
    for _ in range(data.draw(st.integers(1, 4))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(DecodeError):
        decode_message_set(bytes(buf), verify_crc=data.draw(st.booleans()))
