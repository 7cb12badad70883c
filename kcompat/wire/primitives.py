"""Kafka's primitive types: a bounds-checked Reader and an appending Writer.

Layouts (big-endian throughout, protocol.html "Protocol Primitive Types"):

    int8 int16 int32 int64 uint16 uint32 float64   fixed width, two's complement / IEEE 754
    boolean                                        int8, 0 or 1 (any non-zero reads as true)
    unsigned varint                                7 bits a byte, low group first, MSB = more
    varint / varlong                               zigzag, then unsigned varint (5 / 10 bytes max)
    uuid                                           16 raw bytes
    STRING / BYTES                                 int16 / int32 length, then data; -1 = null
    COMPACT_STRING / COMPACT_BYTES                 uvarint(length + 1), then data; 0 = null
    ARRAY / COMPACT_ARRAY                          int32 count / uvarint(count + 1); -1 / 0 = null
    tagged fields                                  uvarint count, then (uvarint tag, uvarint size, data)*

Every read checks the bytes actually present before it slices or allocates, and the only
exception it raises is DecodeError.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from typing import Protocol

from kcompat.wire.errors import DecodeError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

Buffer = bytes | bytearray | memoryview


class Sized(Protocol):
    """A chunk that an encoder passes through untouched (a file slice for sendfile, say)."""

    def __len__(self) -> int: ...


class Reader:
    """A cursor over a buffer. Slices it returns are memoryviews of that buffer, not copies."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: Buffer, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise DecodeError(f"needs {n} bytes, {self.end - self.pos} left")

    def _fixed(self, s: struct.Struct) -> int:
        pos = self.pos
        if pos + s.size > self.end:
            raise DecodeError(f"needs {s.size} bytes, {self.end - pos} left")
        self.pos = pos + s.size
        value: int = s.unpack_from(self.buf, pos)[0]
        return value

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uint16(self) -> int:
        return self._fixed(_U16)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def float64(self) -> float:
        pos = self.pos
        if pos + 8 > self.end:
            raise DecodeError(f"needs 8 bytes, {self.end - pos} left")
        self.pos = pos + 8
        value: float = _F64.unpack_from(self.buf, pos)[0]
        return value

    def boolean(self) -> bool:
        return self._fixed(_I8) != 0

    def uvarint(self, max_bytes: int = 5) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        result = 0
        shift = 0
        for i in range(max_bytes):
            if pos + i >= end:
                raise DecodeError("varint runs past the end")
            b = buf[pos + i]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos + i + 1
                return result
            shift += 7
        raise DecodeError(f"varint longer than {max_bytes} bytes")

    def varint(self) -> int:
        u = self.uvarint(5)
        return (u >> 1) ^ -(u & 1)

    def varlong(self) -> int:
        u = self.uvarint(10)
        return (u >> 1) ^ -(u & 1)

    def uuid(self) -> _uuid.UUID:
        return _uuid.UUID(bytes=bytes(self.raw(16)))

    def raw(self, n: int) -> memoryview:
        """The next n bytes as a view, after checking they are there."""
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise DecodeError(f"length {n} exceeds the {self.end - pos} bytes left")
        self.pos = pos + n
        return self.buf[pos : pos + n]

    def _text(self, n: int) -> str:
        try:
            return str(self.raw(n), "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"invalid UTF-8 ({e.reason})") from None

    # Strings and bytes. A null where the schema does not allow one is the caller's check.
    def string(self) -> str | None:
        n = self.int16()
        return None if n == -1 else self._text(self._length(n))

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n == -1 else self._text(n)

    def bytes_(self) -> memoryview | None:
        n = self.int32()
        return None if n == -1 else self.raw(self._length(n))

    def compact_bytes(self) -> memoryview | None:
        n = self.uvarint() - 1
        return None if n == -1 else self.raw(n)

    def array_length(self, min_item_size: int = 1) -> int:
        """An int32 count, checked against the bytes left; -1 means null."""
        return self._count(self.int32(), min_item_size)

    def compact_array_length(self, min_item_size: int = 1) -> int:
        return self._count(self.uvarint() - 1, min_item_size)

    def _length(self, n: int) -> int:
        if n < 0:
            raise DecodeError(f"negative length {n}")
        return n

    def _count(self, n: int, min_item_size: int) -> int:
        if n < -1:
            raise DecodeError(f"negative array length {n}")
        if n * min_item_size > self.end - self.pos:
            raise DecodeError(f"array of {n} cannot fit in the {self.end - self.pos} bytes left")
        return n

    def tagged_fields(self) -> list[tuple[int, memoryview]]:
        """All (tag, data) pairs of a tagged-field section, in order; the caller picks what it knows."""
        count = self.uvarint()
        if count > self.end - self.pos:
            raise DecodeError(f"{count} tagged fields cannot fit in the {self.end - self.pos} bytes left")
        out = []
        last = -1
        for _ in range(count):
            tag = self.uvarint()
            if tag <= last:
                raise DecodeError(f"tag {tag} out of order after {last}")
            last = tag
            out.append((tag, self.raw(self.uvarint())))
        return out


class Writer:
    """Appends encodings to a bytearray; pass-through chunks (file slices) split it into a chunk list."""

    __slots__ = ("buf", "chunks")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.chunks: list[bytes | bytearray | memoryview | Sized] = []

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uvarint(self, v: int) -> None:
        self.buf += encode_uvarint(v)

    def varint(self, v: int) -> None:
        self.buf += encode_uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        self.buf += encode_uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def uuid(self, v: _uuid.UUID) -> None:
        self.buf += v.bytes

    def raw(self, data: Buffer) -> None:
        self.buf += data

    def string(self, v: str | None) -> None:
        if v is None:
            self.buf += _I16.pack(-1)
        else:
            b = v.encode()
            self.buf += _I16.pack(len(b))
            self.buf += b

    def compact_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            b = v.encode()
            self.buf += encode_uvarint(len(b) + 1)
            self.buf += b

    def bytes_(self, v: Buffer | Sized | None) -> None:
        if v is None:
            self.buf += _I32.pack(-1)
        else:
            self.buf += _I32.pack(len(v))
            self._payload(v)

    def compact_bytes(self, v: Buffer | Sized | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.buf += encode_uvarint(len(v) + 1)
            self._payload(v)

    def _payload(self, v: Buffer | Sized) -> None:
        if isinstance(v, (bytes, bytearray, memoryview)):
            self.buf += v
        else:  # a pass-through chunk: end the current bytes chunk and keep the object as it is
            if self.buf:
                self.chunks.append(bytes(self.buf))
                self.buf = bytearray()
            self.chunks.append(v)

    def array_length(self, n: int | None) -> None:
        self.buf += _I32.pack(-1 if n is None else n)

    def compact_array_length(self, n: int | None) -> None:
        self.buf += encode_uvarint(0 if n is None else n + 1)

    def tagged_fields(self, fields: list[tuple[int, bytes]]) -> None:
        self.buf += encode_uvarint(len(fields))
        for tag, data in sorted(fields, key=lambda f: f[0]):
            self.buf += encode_uvarint(tag)
            self.buf += encode_uvarint(len(data))
            self.buf += data

    def size(self) -> int:
        return sum(len(c) for c in self.chunks) + len(self.buf)

    def getvalue(self) -> bytes:
        """All bytes written; only valid when nothing was passed through."""
        if self.chunks:
            raise TypeError("encoding holds pass-through chunks; use finish()")
        return bytes(self.buf)

    def finish(self) -> list[bytes | bytearray | memoryview | Sized]:
        """The encoding as a list of chunks: bytes, and pass-through objects in their places."""
        out = self.chunks
        if self.buf:
            out.append(bytes(self.buf))
        self.chunks, self.buf = [], bytearray()
        return out


def encode_uvarint(v: int) -> bytes:
    if v < 0:
        raise ValueError(f"unsigned varint cannot hold {v}")
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def encode_varint(v: int) -> bytes:
    """Zigzag varint for a signed 32-bit value (record fields)."""
    return encode_uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


def encode_varlong(v: int) -> bytes:
    return encode_uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)
