"""A large request relayed upstream as its bytes arrive (cut-through), never held whole.

A Produce of librdkafka's default batch is a 1 MB frame: held whole, the proxy's read of it and
its write upstream could not overlap, and its buffer was allocated (and grown) for every request.
Streamed, only its head is held: enough for the request header and, for a Produce, its acks (an
acks=0 Produce gets no answer). `begin` reads the head: None while more is needed; else whether
an answer will come, and the request is owed its place in the answer queue. Only requests that
no hook or virtual cluster needs to see are streamed (ClientConnection.open_request_stream).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from kcompat.wire.errors import DecodeError

FLUSH = 128 << 10  # small pieces are gathered into writes of at least this
PROBE = 4 << 10  # a request header and Produce acks are read from this many bytes first
HEAD_MAX = 64 << 10  # a request whose header and acks are not in its first 64 KiB is not Kafka's
_SIZE = struct.Struct(">i")


class RequestStream:
    """Fed the reader's pieces (relay_reader.py), never written again: they go upstream as they are."""

    def __init__(
        self,
        size: int,
        begin: Callable[[bytes], bool | None],
        write: Callable[[Sequence[Any], bool], None],
    ) -> None:
        self._size = size
        self._begin = begin
        self._write = write
        self._head: bytearray | None = bytearray()  # None once it went on
        self._out: list[memoryview] = []  # the bytes after it, written once FLUSH (fewer writes)
        self._pending = 0

    def feed(self, data: memoryview) -> None:
        """DecodeError: no request header (or Produce acks) in the first HEAD_MAX bytes."""
        if self._head is None:
            self._out.append(data)
            self._pending += len(data)
            if self._pending >= FLUSH:
                self._flush()
            return
        for probe in (PROBE, HEAD_MAX):  # the header is read from a copy of the first bytes only
            answered = self._begin(bytes(self._head) + data[:probe].tobytes())
            if answered is not None or len(data) <= probe:
                break
        if answered is None:
            self._head += data
            if len(self._head) >= min(HEAD_MAX, self._size):
                raise DecodeError("a large request whose header cannot be read")
            return
        head, self._head = self._head, None
        self._write(
            [_SIZE.pack(self._size), head, data] if head else [_SIZE.pack(self._size), data], answered
        )

    def done(self) -> None:
        self._flush()

    def _flush(self) -> None:
        if self._out:
            self._write(self._out, False)
            self._out, self._pending = [], 0
