"""Frames out of one side's bytes (sans-IO), a large one streamed when the other side can take it.

Either side's frames: a client's requests (`grow`: a frame larger than the read buffer gets a
buffer that grows as its bytes arrive, as wire/framing.FrameReader does for untrusted peers, so a
silent 100 MB size prefix costs little) or an upstream's answers (the proxy's own peer, answering
what clients asked for: a buffer of the frame's size at once, received into directly). And when
`open_stream` gives a Stream for a large frame (answer_stream.py, request_stream.py) no buffer at
all: its bytes go on as they come, in pieces of at most the read buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kcompat.wire.framing import FrameSizeError

STREAM_MIN = 256 << 10  # frames smaller than this are held whole: cheap, and the hooks see them
_PREFIX = 4
_GROWTH = 4  # a growing body: GROWTH times what arrived, then GROWTH-fold (wire/framing.py's why)


class Stream(Protocol):
    def feed(self, data: memoryview) -> None: ...  # copies out what it keeps before returning
    def done(self) -> None: ...


class RelayReader:
    __slots__ = (
        "_body",
        "_body_view",
        "_buf",
        "_chunk",
        "_end",
        "_got",
        "_grow",
        "_left",
        "_max_size",
        "_on_frame",
        "_open",
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

    @property
    def streaming(self) -> bool:
        return self._stream is not None

    def get_buffer(self) -> memoryview:
        if self._body_view is not None:
            return self._body_view[self._got :]
        if not self._buf:
            self._buf = bytearray(self._chunk)
            self._view = memoryview(self._buf)
        if self._stream is not None:
            return self._view[: min(self._left, self._chunk)]
        if self._end == self._chunk:  # a partial frame at the end: to the front
            n = self._end - self._start
            self._view[:n] = self._view[self._start : self._end]
            self._start, self._end = 0, n
        return self._view[self._end :]

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
            stream = self._stream
            self._left -= n
            if not self._left:
                self._stream = None
            stream.feed(self._view[:n])
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
                stream.feed(part)
            else:
                self._size, self._got = size, have
                self._enlarge(min(size, max(have * _GROWTH, 64 << 10)) if self._grow else size)
                self._body[:have] = part  # type: ignore[index]
            return
        if self._start == self._end:
            self._start = self._end = 0
