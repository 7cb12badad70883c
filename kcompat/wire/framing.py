"""Size-prefixed frames out of a byte stream, without I/O (sans-IO, in the style of h11).

    frame = size int32 | size bytes

A FrameReader is a small state object: the caller puts the bytes it received in (feed, or
get_buffer + buffer_updated to receive straight into the reader's buffer, as asyncio's
BufferedProtocol does) and takes complete frames out with next_frame, which answers None while
more bytes are needed. A negative size, or one over `max_size`, raises FrameSizeError as soon as
its four bytes are in, before any of the frame is buffered; the reader stays failed.

Memory follows the bytes received, not the sizes claimed: frames that fit the read buffer are cut
out of it (as bytearrays of their own, so a caller may keep views of a frame, and patch a produced
batch in place rather than copy it again); a larger one is received
into a buffer of its own, at most GROWTH times the bytes received so far (never less than
BODY_STEP) and grown GROWTH-fold as it fills, so a 100 MiB prefix followed by silence costs 64 KiB
(Kafka allocates the whole size at once). The read buffer itself is allocated at the first bytes and can be given back
(release) when it holds nothing, so thousands of idle connections hold no buffer each.
"""

from __future__ import annotations

from collections.abc import MutableSequence

from kcompat.wire.errors import DecodeError

PREFIX = 4
# The least first buffer of a frame larger than the read buffer. It is sized GROWTH times what has
# arrived and grows GROWTH-fold, not twofold from 64 KiB: a 256 KiB Produce then took three
# allocations (past malloc's mmap threshold: fresh pages, zeroed) and two copies, 1.29 against 1.04
# CPU s per GB produced with one; a fixed 1 MiB first buffer let 50 silent 100 MiB prefixes hold
# 50 MiB (compat_tests/test_limits_attack.py).
BODY_STEP = 64 << 10
GROWTH = 4


class FrameSizeError(DecodeError):
    """A size prefix that is negative or over the limit; `prefix` is its four raw bytes."""

    def __init__(self, size: int, max_size: int, prefix: bytes) -> None:
        self.size = size
        self.max_size = max_size
        self.prefix = prefix
        why = f"invalid frame size {size}" if size < 0 else f"frame size {size} is larger than {max_size}"
        super().__init__(why + size_hint(prefix))


def size_hint(prefix: bytes) -> str:
    """Name the usual culprits of an absurd size prefix: another protocol on the Kafka port."""
    if prefix[:1] == b"\x16" and prefix[1:2] == b"\x03":
        return " (looks like a TLS handshake: is the client configured for SSL?)"
    if prefix in (b"GET ", b"POST", b"HEAD", b"PUT ", b"PRI "):
        return " (looks like HTTP)"
    return ""


class FrameReader:
    """Frames of at most `max_size` bytes (prefix excluded) out of the bytes given to it."""

    __slots__ = (
        "_body",
        "_body_size",
        "_body_view",
        "_buffer_size",
        "_end",
        "_error",
        "_got",
        "_max_size",
        "_rbuf",
        "_ready",
        "_rview",
        "_start",
    )

    def __init__(self, max_size: int, *, buffer_size: int = 64 << 10) -> None:
        self._max_size = max_size
        self._buffer_size = buffer_size  # frames larger than this get a buffer of their own
        self._rbuf = bytearray()
        self._rview = memoryview(self._rbuf)
        self._start = 0  # unconsumed bytes of the read buffer: _rbuf[_start:_end]
        self._end = 0
        self._body: bytearray | None = None  # a frame too large for the read buffer, being received
        self._body_view: memoryview | None = None
        self._body_size = 0  # its size; the buffer grows towards it as the bytes arrive
        self._got = 0  # its bytes received so far
        self._ready: bytearray | None = None  # that frame, complete: handed out before the read buffer's
        self._error: FrameSizeError | None = None

    @property
    def max_size(self) -> int:
        return self._max_size

    @max_size.setter
    def max_size(self, value: int) -> None:
        """A new bound for frames whose size prefix is not yet read (SASL raises it after login)."""
        self._max_size = value

    # -- bytes in ---------------------------------------------------------------------------------

    def get_buffer(self) -> memoryview:
        """Where the next bytes go (never empty); say how many arrived with buffer_updated."""
        if self._body_view is not None:
            return self._body_view[self._got :]
        if self._end == len(self._rbuf):
            if not self._rbuf:
                self._rbuf = bytearray(self._buffer_size)
                self._rview = memoryview(self._rbuf)
            elif self._start:
                self._compact()
            else:  # full of complete frames nobody took yet: only a caller that feeds ahead gets here
                self._rbuf = self._rbuf + bytes(len(self._rbuf))
                self._rview = memoryview(self._rbuf)
        return self._rview[self._end :]

    def buffer_updated(self, n: int) -> None:
        """`n` bytes were written at the start of the last get_buffer()."""
        if self._body_view is None:
            self._end += n
            return
        self._got += n
        if self._got == self._body_size:  # complete: later bytes go to the read buffer again
            self._ready, self._body, self._body_view = self._body, None, None
        elif self._got == len(self._body_view):
            self._grow_body()

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Copy `data` in (get_buffer + buffer_updated, for callers that already hold the bytes)."""
        view = memoryview(data)
        while view:
            buf = self.get_buffer()
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    # -- frames out -------------------------------------------------------------------------------

    def next_frame(self) -> bytes | bytearray | None:
        """The next complete frame without its prefix, or None until more bytes arrive.

        Raises FrameSizeError for a negative or too large size prefix (and again on every call after).
        """
        out: list[bytes | bytearray] = []
        self.take(out, 1, 1)
        return out[0] if out else None

    def take(self, out: MutableSequence[bytes | bytearray], count: int, nbytes: int) -> int:
        """Append complete frames to `out`, at most `count`, stopping once `nbytes` are reached (the
        frame that crosses it included); return the bytes appended. The batch form of next_frame:
        one call per read, not per frame, on the hot path.

        Raises FrameSizeError as next_frame does (frames before the bad prefix are in `out` by then).
        """
        if self._error is not None:
            raise self._error
        added = 0
        if self._ready is not None:  # a large frame, complete: it comes before the read buffer's bytes
            if count <= 0 or nbytes <= 0:
                return 0
            frame, self._ready = self._ready, None
            out.append(frame)
            added = len(frame)
            count -= 1
        elif self._body is not None:
            return 0
        start, end = self._start, self._end
        view, max_size = self._rview, self._max_size
        incomplete = True
        while end - start >= PREFIX:
            if count <= 0 or added >= nbytes:
                incomplete = False
                break
            size = int.from_bytes(view[start : start + PREFIX], "big", signed=True)
            if size < 0 or size > max_size:
                self._start = start
                self._error = FrameSizeError(size, max_size, bytes(view[start : start + PREFIX]))
                raise self._error
            stop = start + PREFIX + size
            if stop > end:
                if size + PREFIX > len(self._rbuf):
                    self._start = start
                    self._start_body(size)
                    return added
                break
            out.append(bytearray(view[start + PREFIX : stop]))
            added += size
            count -= 1
            start = stop
        if start == end:
            start = end = 0
        elif start and incomplete:
            # an incomplete frame (which fits) moves to the front to make room for the rest
            view[: end - start] = view[start:end]
            end -= start
            start = 0
        self._start, self._end = start, end
        return added

    # -- state ------------------------------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out as frames (prefixes included)."""
        ready = 0 if self._ready is None else PREFIX + len(self._ready)
        if self._body is not None:
            return ready + PREFIX + self._got
        return ready + self._end - self._start

    @property
    def expected(self) -> int | None:
        """Prefix plus size of the first frame not yet handed out, once its prefix is in."""
        if self._ready is not None:
            return PREFIX + len(self._ready)
        if self._body is not None:
            return PREFIX + self._body_size
        if self._end - self._start < PREFIX:
            return None
        return PREFIX + int.from_bytes(self._rview[self._start : self._start + PREFIX], "big", signed=True)

    def release(self) -> None:
        """Give back the read buffer if it holds nothing (and no view of it is in use)."""
        if self._rbuf and self._start == self._end and self._body is None and self._ready is None:
            try:
                self._rview.release()
            except BufferError:  # a view of it is still in use somewhere: keep it
                return
            self._rbuf = bytearray()
            self._rview = memoryview(self._rbuf)
            self._start = self._end = 0

    def clear(self) -> None:
        """Drop everything held (the connection is closing)."""
        self._body = self._body_view = self._ready = None
        self._start = self._end = 0

    # -- inside -----------------------------------------------------------------------------------

    def _compact(self) -> None:
        start, end = self._start, self._end
        self._rview[: end - start] = self._rview[start:end]
        self._start, self._end = 0, end - start

    def _start_body(self, size: int) -> None:
        """Receive the rest of a frame too large for the read buffer straight into one of its own."""
        have = self._end - self._start - PREFIX
        self._body_size = size
        self._body = bytearray(min(size, max(BODY_STEP, GROWTH * have)))
        self._body_view = memoryview(self._body)
        self._body_view[:have] = self._rview[self._start + PREFIX : self._end]
        self._got = have
        self._start = self._end = 0
        if have == len(self._body):  # a read buffer larger than BODY_STEP filled it already
            self._grow_body()

    def _grow_body(self) -> None:
        """Grow the buffer of a large frame GROWTH-fold (up to its size) once the bytes so far fill it."""
        assert self._body is not None and self._body_view is not None
        old = self._body
        new = bytearray(min(self._body_size, GROWTH * len(old)))
        new[: len(old)] = old
        self._body_view.release()
        self._body, self._body_view = new, memoryview(new)
