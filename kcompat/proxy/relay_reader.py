"""Frames out of one side's bytes (sans-IO), a large one streamed when the other side can take it.

Either side's frames: a client's requests (`grow`: a frame larger than the read buffer gets a
buffer that grows as its bytes arrive, as wire/framing.FrameReader does for untrusted peers, so a
silent 100 MB size prefix costs little) or an upstream's answers (the proxy's own peer, answering
what clients asked for: a buffer of the frame's size at once, received into directly). And when
`open_stream` gives a Stream for a large frame (answer_stream.py, request_stream.py) no buffer to
hold it: its bytes are received into pieces of at most PIECE bytes, and what is in is handed to the
stream every HAND bytes (and at a piece's or the frame's end), which passes it to the other side's
transport as it is: no copy out of a reused read buffer. What was handed over is never written
again (reads go on after it, or into the next piece), so a transport may keep it until sent. The
frame's first bytes, read before its size was known, go on in the read buffer itself, which is then
replaced. Pieces come from a Pool and are reused once nothing refers to them: fresh memory for each
cost as much as the copy did (pages faulted in and zeroed).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from typing import Protocol

from kcompat.wire.framing import FrameSizeError

STREAM_MIN = 256 << 10  # frames smaller than this are held whole: cheap, and the hooks see them
PIECE = 256 << 10  # a streamed frame is received into pieces of this size (its last one smaller)
HAND = 128 << 10  # and handed on as soon as this much of a piece is in (and at the piece's end)
_GIVE_MIN = 16 << 10  # a frame's first bytes in the read buffer: fewer than this are copied out
_PREFIX = 4
_GROWTH = 4  # a growing body: GROWTH times what arrived, then GROWTH-fold (wire/framing.py's why)


class Pool:
    """Buffers of one size, reused once nothing but the pool refers to one (the transport that
    sent it dropped its views: a view keeps its buffer alive, so a buffer still being sent is
    never handed out again). The one freed last is taken first: its memory is still in the CPU's
    caches. At most `keep` are kept; beyond that a buffer is fresh and left to the allocator."""

    def __init__(self, size: int, keep: int) -> None:
        self.size = size
        self._keep = keep
        self._buffers: list[bytearray] = []  # the one handed out last, last

    def take(self) -> bytearray:
        buffers = self._buffers
        for i in range(len(buffers) - 1, -1, -1):
            if sys.getrefcount(buffers[i]) == 2:  # the list's and the call's: free
                buffer = buffers.pop(i)
                buffers.append(buffer)
                return buffer
        buffer = bytearray(self.size)
        if len(buffers) < self._keep:
            buffers.append(buffer)
        return buffer


PIECES = Pool(PIECE, 32)  # the process's: at most 8 MiB kept for the next streamed frames


def send(transport: asyncio.Transport, chunks: Sequence[bytes | bytearray | memoryview]) -> None:
    """Chunks (pieces among them) to a transport: one by `write`, which uvloop sends at once;
    `writelines` waits for the loop's turn."""
    if len(chunks) == 1:
        transport.write(chunks[0])
    else:
        transport.writelines(chunks)


class Stream(Protocol):
    def feed(self, data: memoryview) -> None: ...  # its memory is never written again: keep it as is
    def done(self) -> None: ...


class RelayReader:
    __slots__ = (
        "_body",
        "_body_view",
        "_buf",
        "_chunk",
        "_end",
        "_filled",
        "_got",
        "_grow",
        "_hand",
        "_handed",
        "_left",
        "_max_size",
        "_on_frame",
        "_open",
        "_piece",
        "_piece_size",
        "_pool",
        "_size",
        "_start",
        "_stream",
        "_view",
    )

    def __init__(
        self,
        open_stream: Callable[[int], Stream | None],
        on_frame: Callable[[bytes | bytearray], None],
        *,
        max_size: int = 2**31 - 1,
        chunk: int = 256 << 10,
        grow: bool = False,
        piece: int = PIECE,
        hand: int = HAND,
        pool: Pool = PIECES,
    ) -> None:
        self._open = open_stream
        self._on_frame = on_frame
        self._max_size = max_size
        self._chunk = chunk
        self._grow = grow
        self._buf = bytearray()  # allocated at the first bytes
        self._view = memoryview(self._buf)
        self._start = self._end = 0
        self._body: bytearray | None = None
        self._body_view: memoryview | None = None
        self._size = self._got = 0
        self._stream: Stream | None = None
        self._left = 0
        self._piece_size = piece
        self._pool = pool
        self._piece: memoryview | None = None  # a streamed frame's piece being received into
        self._filled = self._handed = 0
        self._hand = hand

    @property
    def streaming(self) -> bool:
        return self._stream is not None

    def get_buffer(self) -> memoryview:
        if self._body_view is not None:
            return self._body_view[self._got :]
        if self._stream is not None:
            if self._piece is None:
                self._piece, self._filled, self._handed = self._new_piece(), 0, 0
            return self._piece[self._filled :]
        if not self._buf:
            self._buf = self._pool.take() if self._chunk == self._pool.size else bytearray(self._chunk)
            self._view = memoryview(self._buf)
        if self._end == self._chunk:  # a partial frame at the end: to the front
            n = self._end - self._start
            self._view[:n] = self._view[self._start : self._end]
            self._start, self._end = 0, n
        return self._view[self._end :]

    def _new_piece(self) -> memoryview:
        size = min(self._left, self._piece_size)
        if self._piece_size != self._pool.size:
            return memoryview(bytearray(size))
        return memoryview(self._pool.take())[:size]

    def buffer_updated(self, n: int) -> None:
        """Raises FrameSizeError (a negative or too large size) and the stream's DecodeError."""
        if self._body is not None:
            self._got += n
            if self._got == self._size:
                frame, self._body, self._body_view = self._body, None, None
                self._on_frame(frame)
                self._cut()
            elif self._got == len(self._body):
                self._enlarge(min(self._size, self._got * _GROWTH))
            return
        if self._stream is not None:
            stream, piece = self._stream, self._piece
            assert piece is not None
            self._left -= n
            self._filled += n
            if self._filled < len(piece) and self._filled - self._handed < self._hand:
                return
            part = piece[self._handed : self._filled]  # never written again: reads go on after it
            self._handed = self._filled
            if not self._left or len(piece) - self._filled < self._hand:
                self._piece = None  # a short rest would make a short read: the next piece instead
            if not self._left:
                self._stream = None
            stream.feed(part)
            if self._stream is None:
                stream.done()
                self._cut()
            return
        self._end += n
        self._cut()

    def _enlarge(self, size: int) -> None:
        body = bytearray(size)
        if self._body is not None:
            body[: self._got] = self._body_view[: self._got]  # type: ignore[index]
        self._body, self._body_view = body, memoryview(body)

    def _cut(self) -> None:
        view = self._view
        while self._end - self._start >= _PREFIX and self._body is None and self._stream is None:
            start = self._start
            size = int.from_bytes(view[start : start + _PREFIX], "big", signed=True)
            if size < 0 or size > self._max_size:
                raise FrameSizeError(size, self._max_size, bytes(view[start : start + _PREFIX]))
            have = self._end - start - _PREFIX
            if have >= size:
                self._start = start + _PREFIX + size
                self._on_frame(view[start + _PREFIX : self._start].tobytes())
                continue
            stream = self._open(size) if size >= STREAM_MIN else None
            if stream is None and _PREFIX + size <= self._chunk:
                break  # it fits: wait for the rest
            part = view[start + _PREFIX : self._end]
            self._start = self._end = 0
            if stream is not None:
                self._stream, self._left = stream, size - have
                if have >= _GIVE_MIN:  # the read buffer goes with them; a new one is made
                    self._buf = bytearray()
                    self._view = memoryview(self._buf)
                else:
                    part = memoryview(part.tobytes())
                stream.feed(part)
            else:
                self._size, self._got = size, have
                self._enlarge(min(size, max(have * _GROWTH, 64 << 10)) if self._grow else size)
                self._body[:have] = part  # type: ignore[index]
            return
        if self._start == self._end:
            self._start = self._end = 0
