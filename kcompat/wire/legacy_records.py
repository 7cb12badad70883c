"""Legacy message sets (magic 0 and 1), decoded for reading old data only; never written.

    MessageSet => (offset int64, messageSize int32, Message)*
    Message    =>
        crc         uint32     CRC-32 (zlib's) of magic .. end of value
        magic       int8       0 or 1
        attributes  int8       bits 0-2 codec (1 gzip, 2 snappy, 3 lz4), bit 3 LogAppendTime (magic 1)
        timestamp   int64      magic 1 only
        key         bytes      int32 length, -1 = null
        value       bytes      int32 length, -1 = null

A compressed message is a wrapper: its value is a whole message set, compressed. Inner messages
are never compressed again. Magic-1 inner offsets are relative (0..n-1) and the wrapper's offset
is the last inner message's absolute offset; magic-0 inner offsets are absolute already.
A LogAppendTime wrapper's timestamp is every inner message's timestamp.

A truncated message at the end of the outer set is left out (fetch responses cut sets short);
truncation inside a wrapper is an error.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from kcompat.wire import compression as codecs
from kcompat.wire.errors import DecodeError

Buffer = bytes | bytearray | memoryview

_ENTRY = struct.Struct(">qi")
_HEAD = struct.Struct(">IbB")  # crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
LOG_OVERHEAD = 12
MIN_MESSAGE_SIZE = {0: 14, 1: 22}  # crc + magic + attributes (+ timestamp) + two lengths
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class LegacyRecord:
    offset: int
    timestamp: int  # -1 for magic 0, which has none
    log_append_time: bool
    key: bytes | None
    value: bytes | None
    magic: int


@dataclass(frozen=True, slots=True)
class _Message:
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: memoryview | None


def decode_message_set(
    buf: Buffer, *, verify_crc: bool = True, max_uncompressed: int = codecs.DEFAULT_MAX_SIZE
) -> list[LegacyRecord]:
    """Every record of a magic-0/1 message set, wrappers unpacked. Raises only DecodeError."""
    out: list[LegacyRecord] = []
    budget = max_uncompressed
    for i, m in enumerate(_messages(memoryview(buf), verify_crc, allow_truncated_tail=True)):
        codec = m.attributes & 0x07
        if codec == codecs.NONE:
            out.append(_record(m, m.offset, m.timestamp, bool(m.attributes & 0x08 and m.magic)))
            continue
        try:
            records, used = _unwrap(m, codec, verify_crc, budget)
        except DecodeError as e:
            raise e.within(f"message_set[{i}]") from None
        out.extend(records)
        budget -= used  # the cap holds for the whole set, not per wrapper
    return out


def _unwrap(m: _Message, codec: int, verify_crc: bool, max_size: int) -> tuple[list[LegacyRecord], int]:
    if codec > codecs.LZ4:
        raise DecodeError(f"compression codec id {codec} is not allowed in magic {m.magic}", "attributes")
    if m.value is None:
        raise DecodeError("compressed wrapper message has a null value", "value")
    data = codecs.decompress(codec, m.value, max_size, legacy_lz4_checksum=m.magic == 0)
    inner = list(_messages(memoryview(data), verify_crc, allow_truncated_tail=False))
    if not inner:
        raise DecodeError("compressed wrapper message holds no messages", "value")
    log_append = bool(m.magic and m.attributes & 0x08)
    base = m.offset - inner[-1].offset if m.magic == 1 else 0
    out: list[LegacyRecord] = []
    for j, im in enumerate(inner):
        if im.attributes & 0x07:
            raise DecodeError("inner message is compressed again", f"inner[{j}].attributes")
        if im.magic != m.magic:
            raise DecodeError(
                f"inner magic {im.magic} differs from wrapper magic {m.magic}", f"inner[{j}].magic"
            )
        ts = m.timestamp if log_append else im.timestamp
        out.append(_record(im, base + im.offset, ts, log_append))
    return out, len(data)


def _record(m: _Message, offset: int, timestamp: int, log_append: bool) -> LegacyRecord:
    value = None if m.value is None else bytes(m.value)
    return LegacyRecord(offset, timestamp, log_append, m.key, value, m.magic)


def _messages(view: memoryview, verify_crc: bool, allow_truncated_tail: bool) -> list[_Message]:
    out: list[_Message] = []
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            if allow_truncated_tail:
                break
            raise DecodeError(f"message header needs {LOG_OVERHEAD} bytes, {end - pos} left", "message_set")
        offset, size = _ENTRY.unpack_from(view, pos)
        if size < MIN_MESSAGE_SIZE[0]:
            raise DecodeError(f"message size {size} is below the minimum", f"message_set[{len(out)}].size")
        if size > end - pos - LOG_OVERHEAD:
            if allow_truncated_tail:
                break
            raise DecodeError(
                f"message of {size} bytes exceeds the {end - pos - LOG_OVERHEAD} left", "message_set"
            )
        try:
            out.append(_message(view[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size], offset, verify_crc))
        except DecodeError as e:
            raise e.within(f"message_set[{len(out)}]") from None
        pos += LOG_OVERHEAD + size
    return out


def _message(msg: memoryview, offset: int, verify_crc: bool) -> _Message:
    crc, magic, attributes = _HEAD.unpack_from(msg, 0)
    if magic not in (0, 1):
        raise DecodeError(f"magic {magic} is not a legacy message", "magic")
    if len(msg) < MIN_MESSAGE_SIZE[magic]:
        raise DecodeError(f"{len(msg)} bytes cannot hold a magic-{magic} message", "size")
    if verify_crc and zlib.crc32(msg[4:]) != crc:
        raise DecodeError(f"CRC-32 {zlib.crc32(msg[4:]):#010x} does not match stored {crc:#010x}", "crc")
    pos = 6
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _I64.unpack_from(msg, pos)
        pos += 8
    key, pos = _nullable(msg, pos, "key")
    value, pos = _nullable(msg, pos, "value")
    if pos != len(msg):
        raise DecodeError(f"{len(msg) - pos} bytes left after the value", "size")
    return _Message(offset, magic, attributes, timestamp, None if key is None else bytes(key), value)


def _nullable(msg: memoryview, pos: int, field: str) -> tuple[memoryview | None, int]:
    if len(msg) - pos < 4:
        raise DecodeError("length is truncated", field)
    (n,) = _I32.unpack_from(msg, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or n > len(msg) - pos:
        raise DecodeError(f"length {n} exceeds the {len(msg) - pos} bytes left", field)
    return msg[pos : pos + n], pos + n
