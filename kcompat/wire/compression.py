"""Kafka's four record codecs, by the id that sits in bits 0-2 of a batch's attributes.

    0 none   1 gzip   2 snappy   3 lz4   4 zstd        (5-7 are not defined)

gzip    RFC 1952 members; Java writes one, but concatenated members are read too.
snappy  Java clients send the xerial "stream" framing, which we also write:

            0  magic     \\x82 S N A P P Y \\x00   8 bytes
            8  version   int32 (1)
           12  compat    int32 (1)              some producers write these little-endian: ignored
           16  blocks    (int32 length, raw snappy block of at most 32 KiB uncompressed)*

        librdkafka and franz-go may send one raw snappy block instead; both are read.
lz4     the LZ4 frame format (KIP-57): independent 64 KiB blocks, no content size, no checksums,
        as Java's KafkaLZ4BlockOutputStream writes. Magic-0 message sets carry a header checksum
        computed the broken pre-0.10 way; `decompress(..., legacy_lz4_checksum=True)` repairs it.
zstd    standard frames; producers may omit the content size, so output is streamed.

Every decompressor stops at `max_size` output bytes, so a tiny batch cannot expand into gigabytes
(a "decompression bomb"), and every failure of a codec library comes out as DecodeError.

Measured (benchmarks/bench_records.py): python-snappy >= 0.7 is a thin layer over cramjam, so
cramjam is used directly for snappy; lz4 and zstd use the `lz4` and `zstandard` packages, whose
streaming decompressors can stop at a size cap.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import TYPE_CHECKING

from kcompat.wire.errors import DecodeError

if TYPE_CHECKING:
    import cramjam
    import lz4.frame
    import zstandard

Buffer = bytes | bytearray | memoryview

DEFAULT_MAX_SIZE = 64 * 1024 * 1024  # beyond any sane batch: Kafka's message.max.bytes is ~1 MiB


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


NONE = Compression.NONE
GZIP = Compression.GZIP
SNAPPY = Compression.SNAPPY
LZ4 = Compression.LZ4
ZSTD = Compression.ZSTD

# Kafka's default levels (KIP-390): gzip Deflater default, lz4 9, zstd 3.
GZIP_LEVEL = 6
LZ4_LEVEL = 9
ZSTD_LEVEL = 3

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024  # xerial SnappyOutputStream's default, what Java producers use
_I32 = struct.Struct(">i")

_LZ4_MAGIC = b"\x04\x22\x4d\x18"

# What a corrupt input raises: zlib's, lz4.frame's RuntimeError, ValueError; and cramjam's and
# zstandard's own once they are loaded.
_CORRUPT: tuple[type[Exception], ...] = (zlib.error, RuntimeError, ValueError)
_loaded = False


def _load_libraries() -> None:
    """cramjam (snappy), lz4 and zstandard, imported by the first batch that needs one: about
    2.6 MB resident and 9 ms of every start otherwise, for a broker that may never see one."""
    global cramjam, lz4, zstandard, _CORRUPT, _loaded
    import cramjam
    import lz4.frame
    import zstandard

    _CORRUPT = (zlib.error, cramjam.DecompressionError, RuntimeError, zstandard.ZstdError, ValueError)
    _loaded = True


def codec(attributes: int) -> Compression:
    """The codec named by a batch's attributes; DecodeError for the undefined ids 5-7."""
    cid = attributes & 0x07
    try:
        return Compression(cid)
    except ValueError:
        raise DecodeError(f"unknown compression codec id {cid}", "attributes") from None


def compress(codec_id: int, data: Buffer, level: int | None = None) -> bytes:
    """`data` compressed with the codec, framed as Java's producer frames it."""
    if codec_id == GZIP:
        c = zlib.compressobj(GZIP_LEVEL if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if not _loaded:
        _load_libraries()
    if codec_id == SNAPPY:
        return _xerial_compress(data)
    if codec_id == LZ4:
        out: bytes = lz4.frame.compress(
            data,
            compression_level=LZ4_LEVEL if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        return out
    if codec_id == ZSTD:
        z = zstandard.ZstdCompressor(level=ZSTD_LEVEL if level is None else level)
        return z.compress(data)
    if codec_id == NONE:
        return bytes(data)
    raise ValueError(f"unknown compression codec id {codec_id}")


def decompress(
    codec_id: int,
    data: Buffer,
    max_size: int = DEFAULT_MAX_SIZE,
    *,
    legacy_lz4_checksum: bool = False,
) -> bytes:
    """`data` decompressed; DecodeError if it is corrupt or would exceed `max_size` bytes."""
    try:
        if codec_id == GZIP:
            return _gunzip(data, max_size)
        if not _loaded:
            _load_libraries()
        if codec_id == SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec_id == LZ4:
            if legacy_lz4_checksum:
                data = _repair_lz4_header_checksum(data)
            return _lz4_decompress(data, max_size)
        if codec_id == ZSTD:
            return _zstd_decompress(data, max_size)
        if codec_id == NONE:
            return bytes(data)
    except DecodeError:
        raise
    except _CORRUPT as e:
        raise DecodeError(f"{Compression(codec_id).name.lower()} data is corrupt ({e})", "records") from None
    raise DecodeError(f"unknown compression codec id {codec_id}", "attributes")


def _too_big(max_size: int) -> DecodeError:
    return DecodeError(f"decompresses to more than {max_size} bytes", "records")


def _gunzip(data: Buffer, max_size: int) -> bytes:
    out = bytearray()
    rest: Buffer = data
    while True:
        d = zlib.decompressobj(31)
        out += d.decompress(rest, max_size + 1 - len(out))
        if len(out) > max_size:
            raise _too_big(max_size)
        if not d.eof:
            if d.unconsumed_tail:  # stopped at the cap with input left: more output follows
                raise _too_big(max_size)
            raise DecodeError("gzip data is truncated", "records")
        rest = d.unused_data
        if not rest:
            return bytes(out)


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for i in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[i : i + XERIAL_BLOCK_SIZE])
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data)
    if len(view) >= 16 and view[:8] == XERIAL_MAGIC:
        out = bytearray()
        pos, end = 16, len(view)
        while pos < end:
            if end - pos < 4:
                raise DecodeError("xerial snappy block length is truncated", "records")
            (n,) = _I32.unpack_from(view, pos)
            pos += 4
            if n < 0 or n > end - pos:
                raise DecodeError(f"xerial snappy block of {n} bytes exceeds the {end - pos} left", "records")
            out += _raw_snappy(view[pos : pos + n], max_size - len(out), max_size)
            pos += n
        return bytes(out)
    return _raw_snappy(view, max_size, max_size)


def _raw_snappy(block: memoryview, room: int, max_size: int) -> bytes:
    # The raw format starts with its uncompressed length: check it before allocating.
    size = _snappy_preamble(block)
    if size > room:
        raise _too_big(max_size)
    out = bytes(cramjam.snappy.decompress_raw(block))
    if len(out) != size:
        raise DecodeError("snappy block length disagrees with its preamble", "records")
    return out


def _snappy_preamble(block: memoryview) -> int:
    result = shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result
        shift += 7
    raise DecodeError("snappy block has no valid length preamble", "records")


def _lz4_decompress(data: Buffer, max_size: int) -> bytes:
    out = bytearray()
    rest: Buffer = data
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        out += d.decompress(rest, max_length=max_size + 1 - len(out))
        if len(out) > max_size:
            raise _too_big(max_size)
        if not d.eof:
            raise DecodeError("lz4 frame is truncated", "records")
        rest = d.unused_data or b""
        if not rest:
            return bytes(out)


def _zstd_decompress(data: Buffer, max_size: int) -> bytes:
    # zstandard's stream reader handles frames without a content size and stops at the cap, but
    # it returns a truncated frame's partial output silently: walk the frames first to catch that.
    _check_zstd_frames(memoryview(data))
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as r:
        out: bytes = r.read(max_size + 1)
    if len(out) > max_size:
        raise _too_big(max_size)
    return out


_ZSTD_MAGIC = 0xFD2FB528
_U32LE = struct.Struct("<I")


def _check_zstd_frames(view: memoryview) -> None:
    """Check that `view` is whole zstd frames (RFC 8878 section 3.1), reading only headers."""
    pos, end = 0, len(view)
    if end == 0:
        raise DecodeError("zstd data is empty", "records")
    while pos < end:
        if end - pos < 4:
            raise DecodeError("zstd frame magic is truncated", "records")
        (magic,) = _U32LE.unpack_from(view, pos)
        pos += 4
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame: uint32 size, then that many bytes
            if end - pos < 4:
                raise DecodeError("zstd skippable frame is truncated", "records")
            (n,) = _U32LE.unpack_from(view, pos)
            pos += 4 + n
            if pos > end:
                raise DecodeError("zstd skippable frame is truncated", "records")
            continue
        if magic != _ZSTD_MAGIC:
            raise DecodeError("zstd data has no frame magic", "records")
        if pos >= end:
            raise DecodeError("zstd frame header is truncated", "records")
        fhd = view[pos]
        fcs_flag, single_segment, checksum, dict_flag = fhd >> 6, fhd >> 5 & 1, fhd >> 2 & 1, fhd & 3
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        pos += 1 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag] + fcs_size
        while True:
            if end - pos < 3:
                raise DecodeError("zstd block header is truncated", "records")
            bh = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            pos += 3
            last, btype, bsize = bh & 1, bh >> 1 & 3, bh >> 3
            if btype == 3:
                raise DecodeError("zstd block has the reserved type", "records")
            pos += 1 if btype == 1 else bsize  # an RLE block stores its one byte
            if pos > end:
                raise DecodeError("zstd block is truncated", "records")
            if last:
                break
        pos += 4 if checksum else 0
        if pos > end:
            raise DecodeError("zstd frame checksum is truncated", "records")


# Kafka before 0.10 computed the lz4 frame header checksum over the magic as well as the frame
# descriptor (KAFKA-3160). Magic-0 message sets keep that; rewrite it so a standard decoder agrees.
def _repair_lz4_header_checksum(data: Buffer) -> bytes:
    buf = bytearray(data)
    if len(buf) < 7 or buf[:4] != _LZ4_MAGIC:
        return bytes(buf)
    desc_len = 2 + (8 if buf[4] & 0x08 else 0) + (4 if buf[4] & 0x01 else 0)
    hc_pos = 4 + desc_len
    if len(buf) <= hc_pos:
        return bytes(buf)
    buf[hc_pos] = (xxh32(bytes(buf[4:hc_pos])) >> 8) & 0xFF
    return bytes(buf)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of short inputs (frame descriptors): the lz4 frame header checksum's hash."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                (lane,) = struct.unpack_from("<I", data, pos + 4 * i)
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
