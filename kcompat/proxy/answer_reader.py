"""Answer frames out of the upstream's bytes (sans-IO), a large one streamed when its client can.

Unlike wire/framing.FrameReader (made for untrusted clients: a large frame's buffer grows as its
bytes arrive, copied at each step), the upstream is the proxy's own peer and answers what clients
asked for: a frame larger than the read buffer gets a buffer of its size at once, received into
directly, or, when `open_stream` gives an AnswerStream for it (answer_stream.py), none at all: its
bytes go on as they come.
"""

from __future__ import annotations

from collections.abc import Callable

from kcompat.proxy.answer_stream import STREAM_MIN, AnswerStream
from kcompat.wire.framing import FrameSizeError

CHUNK = 256 << 10  # the read buffer; a streamed answer is received in pieces of at most this
_PREFIX = 4


class AnswerReader:
    __slots__ = (
        "_body",
        "_body_view",
        "_buf",
        "_end",
        "_got",
        "_left",
        "_on_frame",
        "_open",
        "_start",
        "_stream",
        "_view",
    )

    def __init__(
        self, open_stream: Callable[[int], AnswerStream | None], on_frame: Callable[[bytes | bytearray], None]
    ) -> None:
        self._open = open_stream
        self._on_frame = on_frame
        self._buf = bytearray(CHUNK)
        self._view = memoryview(self._buf)
        self._start = self._end = 0
        self._body: bytearray | None = None
        self._body_view: memoryview | None = None
        self._got = 0
        self._stream: AnswerStream | None = None
        self._left = 0

    @property
    def streaming(self) -> bool:
        return self._stream is not None

    def get_buffer(self) -> memoryview:
        if self._body_view is not None:
            return self._body_view[self._got :]
        if self._stream is not None:
            return self._view[: min(self._left, CHUNK)]
        if self._end == CHUNK:  # a partial frame at the end: to the front
            n = self._end - self._start
            self._view[:n] = self._view[self._start : self._end]
            self._start, self._end = 0, n
        return self._view[self._end :]

    def buffer_updated(self, n: int) -> None:
        """Raises FrameSizeError (a negative size) and the stream's DecodeError."""
        if self._body is not None:
            self._got += n
            if self._got == len(self._body):
                frame, self._body, self._body_view = self._body, None, None
                self._on_frame(frame)
                self._cut()
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

    def _cut(self) -> None:
        view = self._view
        while self._end - self._start >= _PREFIX and self._body is None and self._stream is None:
            start = self._start
            size = int.from_bytes(view[start : start + _PREFIX], "big", signed=True)
            if size < 0:
                raise FrameSizeError(size, 2**31 - 1, bytes(view[start : start + _PREFIX]))
            have = self._end - start - _PREFIX
            if have >= size:
                self._start = start + _PREFIX + size
                self._on_frame(view[start + _PREFIX : self._start].tobytes())
                continue
            stream = self._open(size) if size >= STREAM_MIN else None
            if stream is None and _PREFIX + size <= CHUNK:
                break  # it fits: wait for the rest
            part = view[start + _PREFIX : self._end]
            self._start = self._end = 0
            if stream is not None:
                self._stream, self._left = stream, size - have
                stream.feed(part)
            else:
                self._body = bytearray(size)
                self._body[:have] = part
                self._body_view, self._got = memoryview(self._body), have
            return
        if self._start == self._end:
            self._start = self._end = 0
