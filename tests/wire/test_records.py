"""Record v2 encode/decode: round trips and hostile input (cross-checks with kafka-python and aiokafka: compat_tests/test_wire_client_codecs.py)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcompat.wire.compression import Compression
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import HEADER_SIZE, crc_ok, read_header
from kcompat.wire.records import LOG_APPEND_TIME, Record, build_batch, decode_batch

CODECS = list(Compression)
BASE_TS = 1_700_000_000_000

nullable_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), nullable_bytes), max_size=4).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn) -> list[Record]:
    n = draw(st.integers(1, 12))
    gaps = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    base_ts = draw(st.integers(0, 2**50))
    out, offset = [], draw(st.integers(0, 2**40))
    for gap in gaps:
        ts = base_ts + draw(st.integers(-(2**20), 2**20))
        out.append(Record(offset, ts, draw(nullable_bytes), draw(nullable_bytes), draw(headers)))
        offset += gap
    return out


def _sample(n: int = 8) -> list[Record]:
    return [
        Record(
            i,
            BASE_TS + 11 * i,
            None if i % 3 == 0 else b"k%d" % i,
            None if i == 5 else b"payload-%d " % i * 40,
            (("a", b"1"), ("nil", None), ("", b""))[: i % 4],
        )
        for i in range(n)
    ]


@given(record_lists(), st.sampled_from(CODECS), st.booleans())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip(records: list[Record], codec: Compression, transactional: bool) -> None:
    base = records[0].offset
    data = build_batch(
        records, base_offset=base, compression=codec, transactional=transactional,
        producer_id=7 if transactional else -1, producer_epoch=1, base_sequence=0,
    )  # fmt: skip
    h, got = decode_batch(data)
    assert got == records
    assert h.compression == codec
    assert h.is_transactional == transactional
    assert h.last_offset == records[-1].offset
    assert h.max_timestamp == max(r.timestamp for r in records)
    assert h.base_timestamp == records[0].timestamp
    assert crc_ok(data)


def test_empty_batch_round_trips() -> None:
    data = build_batch([], base_offset=42)
    h, got = decode_batch(data)
    assert got == [] and h.records_count == 0 and h.base_offset == 42 and h.max_timestamp == -1


def test_log_append_time_batches_report_max_timestamp() -> None:
    data = build_batch(_sample(), timestamp_type=LOG_APPEND_TIME)
    h, got = decode_batch(data)
    assert h.log_append_time
    assert {r.timestamp for r in got} == {h.max_timestamp}


def test_encode_rejects_offsets_out_of_order() -> None:
    with pytest.raises(ValueError):
        build_batch([Record(5, 0, None, None), Record(5, 0, None, None)])
    with pytest.raises(ValueError):
        build_batch([Record(1, 0, None, None)], base_offset=2)
    with pytest.raises(ValueError):
        build_batch(_sample(), compression=6)


# ---- hostile input: only DecodeError escapes --------------------------------------------------


def _refresh_crc(data: bytearray) -> bytes:
    from kcompat.wire.record_batch import compute_crc

    struct.pack_into(">I", data, 17, compute_crc(data))
    return bytes(data)


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_is_a_decode_error(codec: Compression) -> None:
    data = build_batch(_sample(4), compression=codec)
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            decode_batch(data[:cut])


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_records_with_fixed_up_length_and_crc(codec: Compression) -> None:
    # Cut the records short but keep the header consistent, so the record parser itself must notice.
    data = build_batch(_sample(4), compression=codec)
    for cut in range(HEADER_SIZE, len(data)):
        short = bytearray(data[:cut])
        struct.pack_into(">i", short, 8, cut - 12)
        with pytest.raises(DecodeError):
            decode_batch(_refresh_crc(short))


@given(st.binary(max_size=400), st.sampled_from(CODECS), st.integers(-5, 50))
@settings(max_examples=300, deadline=None)
def test_garbage_records_only_raise_decode_error(body: bytes, codec: Compression, count: int) -> None:
    data = bytearray(build_batch(_sample(1)))[:HEADER_SIZE] + body
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">h", data, 21, codec)
    struct.pack_into(">i", data, 57, count)
    with contextlib.suppress(DecodeError):
        decode_batch(_refresh_crc(data))


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_arbitrary_bytes_only_raise_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_batch(data)


@given(st.data())
@settings(max_examples=150, deadline=None)
def test_mutated_batches_only_raise_decode_error(data: st.DataObject) -> None:
    codec = data.draw(st.sampled_from(CODECS))
    batch = bytearray(build_batch(_sample(3), compression=codec))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(HEADER_SIZE, len(batch) - 1))
        batch[pos] = data.draw(st.integers(0, 255))
    with contextlib.suppress(DecodeError):
        decode_batch(_refresh_crc(batch))


def test_count_disagreeing_with_records_is_rejected() -> None:
    data = bytearray(build_batch(_sample(3)))
    for count in (2, 4, -1, 2**31 - 1):
        struct.pack_into(">i", data, 57, count)
        with pytest.raises(DecodeError, match="records"):
            decode_batch(_refresh_crc(data))


def test_trailing_bytes_after_records_are_rejected() -> None:
    data = bytearray(build_batch(_sample(3))) + b"\x00"
    struct.pack_into(">i", data, 8, len(data) - 12)
    with pytest.raises(DecodeError, match="left after"):
        decode_batch(_refresh_crc(data))


def test_buffer_longer_than_batch_is_rejected() -> None:
    with pytest.raises(DecodeError, match="split_batches"):
        decode_batch(build_batch(_sample(2)) + b"\x00" * 12)


def test_decompression_bomb_is_capped() -> None:
    data = build_batch([Record(0, 0, None, b"\x00" * 2_000_000)], compression=Compression.ZSTD)
    assert len(data) < 1000
    with pytest.raises(DecodeError, match="more than"):
        decode_batch(data, max_uncompressed=1_000_000)
    assert decode_batch(data)[1][0].value == b"\x00" * 2_000_000


@pytest.mark.parametrize("codec", CODECS)
def test_every_single_bit_flip_is_caught_by_the_crc(codec: Compression) -> None:
    data = build_batch(_sample(2), compression=codec)
    for pos in range(21, len(data)):
        for bit in (0, 7):
            flipped = bytearray(data)
            flipped[pos] ^= 1 << bit
            assert not crc_ok(flipped)
            with pytest.raises(DecodeError, match="CRC"):
                decode_batch(flipped)
    assert read_header(data).crc == struct.unpack_from(">I", data, 17)[0]
