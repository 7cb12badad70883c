"""The four codecs: round trips, caps, corrupt input (interop with the clients' codecs: compat_tests/test_wire_client_codecs.py)."""

from __future__ import annotations

import contextlib
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.wire.compression import (
    XERIAL_MAGIC,
    Compression,
    codec,
    compress,
    decompress,
    xxh32,
)
from kcompat.wire.errors import DecodeError

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
PAYLOAD = b"".join(b"record %d with some repetition; " % i for i in range(5000))  # ~170 KB, > 2 lz4 blocks


@given(st.binary(max_size=70_000), st.sampled_from(CODECS))
@settings(max_examples=40, deadline=None)
def test_round_trip(data: bytes, cid: Compression) -> None:
    assert decompress(cid, compress(cid, data)) == data


def test_snappy_is_written_in_xerial_framing_with_32k_blocks() -> None:
    out = compress(Compression.SNAPPY, PAYLOAD)
    assert out[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    assert [len(b) for b in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)
    assert b"".join(bytes(b) for b in blocks) == PAYLOAD


def test_snappy_reads_raw_blocks_and_little_endian_xerial_versions() -> None:
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(PAYLOAD))) == PAYLOAD
    framed = bytearray(compress(Compression.SNAPPY, PAYLOAD))
    framed[8:16] = struct.pack("<ii", 1, 1)  # as some non-Java producers write it
    assert decompress(Compression.SNAPPY, framed) == PAYLOAD


def test_lz4_is_written_as_kafka_frames() -> None:
    out = compress(Compression.LZ4, PAYLOAD)
    assert out[:4] == b"\x04\x22\x4d\x18"
    flg, bd = out[4], out[5]
    assert flg >> 6 == 1 and flg & 0x20  # version 01, independent blocks
    assert not flg & 0x08 and not flg & 0x04 and not flg & 0x10  # no content size, no checksums
    assert bd == 0x40  # 64 KiB blocks
    assert out[6] == (xxh32(out[4:6]) >> 8) & 0xFF  # correct header checksum (KIP-57)


def test_lz4_with_content_size_and_checksums_decodes() -> None:
    frame = lz4.frame.compress(PAYLOAD, store_size=True, content_checksum=True, block_checksum=True)
    assert decompress(Compression.LZ4, frame) == PAYLOAD


def test_legacy_lz4_header_checksum_is_repaired() -> None:
    frame = bytearray(compress(Compression.LZ4, PAYLOAD))
    frame[6] = (xxh32(bytes(frame[0:6])) >> 8) & 0xFF  # pre-0.10 Kafka hashed the magic too
    if frame[6] == (xxh32(bytes(frame[4:6])) >> 8) & 0xFF:
        pytest.fail("broken and correct checksums coincide; pick another payload")
    with pytest.raises(DecodeError):
        decompress(Compression.LZ4, frame)
    assert decompress(Compression.LZ4, frame, legacy_lz4_checksum=True) == PAYLOAD


def test_xxh32_known_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_zstd_without_content_size_and_several_frames() -> None:
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    assert zstandard.frame_content_size(no_size) == -1  # "unknown"
    assert decompress(Compression.ZSTD, no_size) == PAYLOAD
    streamed = zstandard.ZstdCompressor().compressobj()
    chunked = streamed.compress(PAYLOAD[:1000]) + streamed.compress(PAYLOAD[1000:]) + streamed.flush()
    assert decompress(Compression.ZSTD, chunked) == PAYLOAD
    assert decompress(Compression.ZSTD, no_size + no_size) == PAYLOAD * 2


def test_gzip_reads_concatenated_members() -> None:
    one = compress(Compression.GZIP, PAYLOAD)
    assert decompress(Compression.GZIP, one + one) == PAYLOAD * 2


@pytest.mark.parametrize("cid", CODECS)
def test_decompression_is_capped(cid: Compression) -> None:
    bomb = compress(cid, bytes(4_000_000))
    assert len(bomb) < 200_000
    with pytest.raises(DecodeError, match="more than 1000000 bytes"):
        decompress(cid, bomb, max_size=1_000_000)
    assert len(decompress(cid, bomb, max_size=4_000_000)) == 4_000_000


@pytest.mark.parametrize("cid", CODECS)
def test_every_truncation_raises_decode_error(cid: Compression) -> None:
    data = compress(cid, PAYLOAD[:3000])
    for cut in range(len(data) - 1):
        with pytest.raises(DecodeError):
            r = decompress(cid, data[:cut])
            # a few codecs can end on a valid boundary; then the output must at least be short
            if r != PAYLOAD[:3000]:
                raise DecodeError("short")


@given(st.binary(max_size=300), st.sampled_from(CODECS))
@settings(max_examples=400, deadline=None)
def test_garbage_only_raises_decode_error(data: bytes, cid: Compression) -> None:
    with contextlib.suppress(DecodeError):
        decompress(cid, data, max_size=1 << 20)


@given(st.binary(max_size=200), st.sampled_from(CODECS))
@settings(max_examples=200, deadline=None)
def test_garbage_after_a_valid_header_only_raises_decode_error(tail: bytes, cid: Compression) -> None:
    head = compress(cid, PAYLOAD[:500])[:16]
    with contextlib.suppress(DecodeError):
        decompress(cid, head + tail, max_size=1 << 20)


def test_codec_ids() -> None:
    assert [codec(a) for a in (0, 1, 2, 3, 4, 0x0C)] == [0, 1, 2, 3, 4, 4]
    for bad in (5, 6, 7):
        with pytest.raises(DecodeError):
            codec(bad)
    with pytest.raises(DecodeError):
        decompress(5, b"x")
    assert zlib.decompress(compress(Compression.GZIP, b"abc"), 31) == b"abc"
