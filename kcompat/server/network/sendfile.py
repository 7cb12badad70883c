"""The one seam that writes response chunks to a non-blocking socket, file slices zero-copy.

A response is a list of chunks in wire order: bytes-like chunks (headers, encoded fields) and file
slices (whole record batches that stay in the segment file). Bytes go out with send/sendmsg,
consecutive ones gathered into one sendmsg; file pieces go out with os.sendfile(sock, fd, offset,
count), which copies page cache to socket inside the kernel. uvloop has neither loop.sendfile nor
loop.sock_sendfile, and a socket owned by a transport cannot take add_writer, so the connection
layer keeps the raw socket and calls `ChunkWriter.flush()` whenever the socket is writable.

Reading a slice into memory and sending the bytes is the fallback, used where sendfile is
impossible (os.sendfile missing, or the kernel refuses this fd pair) and on TLS sockets, whose
bytes OpenSSL must encrypt (Kafka's SslTransportLayer copies too; kernel TLS would let sendfile
work, but Python 3.11's ssl cannot turn it on); `STATS` counts both paths. A TLS socket takes no
sendmsg: consecutive small buffers are joined into one write instead, and a write OpenSSL could
not finish (SSLWantWriteError) is retried with the same bytes, as OpenSSL requires.

A small piece (at most `_INLINE_MAX` bytes, a few batches: what a fetch of many quiet partitions
returns) is read with one pread when it comes up to be sent and goes out gathered with the bytes
around it: a Fetch of 1,000 partitions then costs ~1,000 preads and a few sendmsg calls instead of
1,000 sendfile calls and 1,000 sends between them, each of which wakes the receiver (measured
here: 28 ms of flushing down to a few). Larger pieces keep sendfile's zero copy.

A piece holds a reference to its file (kcompat.log.log_file.FilePiece -> LogFile), and the writer
holds the piece until its last byte is sent, so the descriptor stays open even if the segment is
deleted or rolled meanwhile. A file that shrank under a slice (truncation) cannot honour the size
already declared in the response: that raises SliceTruncated, and the connection must be closed.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from time import perf_counter
from typing import Protocol, TypeGuard, cast, runtime_checkable

from kcompat.server.network import turns
from kcompat.server.network.tls_socket import TlsSocket

# At most this many buffers per sendmsg (Linux IOV_MAX is 1024), and about this many bytes of
# them (a socket buffer or two: gathering further only reads ahead of a full socket).
_MAX_IOV = 512
_GATHER_BYTES = 512 * 1024
# File pieces up to this size are read and gathered with the bytes around them (see above).
_INLINE_MAX = 16 * 1024
# The copying fallback reads this much of a slice at a time.
_FALLBACK_BLOCK = 256 * 1024
# One sendfile call moves at most this much (Linux caps a call at 0x7ffff000 bytes).
_MAX_SENDFILE = 0x7FFFF000

# errnos that mean "sendfile cannot do this fd pair", not "the connection is broken".
_SENDFILE_UNSUPPORTED = frozenset(
    {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ESPIPE, errno.EOVERFLOW}
)

_sendfile = getattr(os, "sendfile", None)
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError)
# Joined writes on a TLS socket stop growing at this size (a few TLS records).
_TLS_JOIN = 64 * 1024


@runtime_checkable
class FilePiece(Protocol):
    """`length` bytes at `position` of an open file; `fd` must stay open while the piece is referenced."""

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...


class FileSlice(Protocol):
    """File pieces in wire order (kcompat.log.log_file.FetchSlice); len() is their total size."""

    def __iter__(self) -> Iterator[FilePiece]: ...

    def __len__(self) -> int: ...


BytesLike = bytes | bytearray | memoryview
Chunk = BytesLike | FileSlice | FilePiece


class SliceTruncated(OSError):
    """The file ended before the piece did: the declared response size can no longer be honoured."""


@dataclass(slots=True)
class SendStats:
    """Process-wide counters of how file bytes reached sockets."""

    sendfile_calls: int = 0
    sendfile_bytes: int = 0
    fallback_pieces: int = 0
    fallback_bytes: int = 0
    inline_pieces: int = 0  # small pieces read and gathered with the bytes around them
    inline_bytes: int = 0

    def reset(self) -> None:
        self.sendfile_calls = self.sendfile_bytes = self.fallback_pieces = self.fallback_bytes = 0
        self.inline_pieces = self.inline_bytes = 0


STATS = SendStats()


class _Piece:
    """A file piece being sent: where the next byte is, and the fallback's pending block."""

    __slots__ = ("block", "copying", "offset", "remaining", "source")

    def __init__(self, source: FilePiece) -> None:
        self.source = source  # keeps the file (and so its fd) alive until the last byte is sent
        self.offset = source.position
        self.remaining = source.length
        self.copying = _sendfile is None
        if self.copying:
            STATS.fallback_pieces += 1
        self.block: memoryview | None = None  # fallback: bytes read but not yet sent


def _is_piece(chunk: object) -> TypeGuard[FilePiece]:
    # Not isinstance(chunk, FilePiece): a runtime Protocol check costs ~10 us, on every Fetch.
    return hasattr(chunk, "fd")


def _expand(chunks: Iterable[Chunk]) -> Iterator[memoryview | _Piece]:
    for chunk in chunks:
        if isinstance(chunk, bytes | bytearray | memoryview):
            view = memoryview(chunk)
            if view.nbytes:
                yield view if view.format == "B" and view.ndim == 1 else view.cast("B")
        elif _is_piece(chunk):
            if chunk.length > 0:
                yield _Piece(chunk)
        else:
            for piece in cast("FileSlice", chunk):
                if piece.length > 0:
                    yield _Piece(piece)


class ChunkWriter:
    """The outgoing queue of one non-blocking socket.

    `add()` appends a response's chunks; `flush()` writes as much as the socket takes without
    blocking and returns True once everything is sent (False: wait until writable, call again;
    also after turns.TURN_SECONDS of writing, so that other connections get the loop meanwhile).
    Socket errors propagate as OSError; the caller closes the connection.
    """

    __slots__ = ("_fd", "_items", "_sock", "_tls", "pending")

    def __init__(self, sock: socket.socket | TlsSocket) -> None:
        self._sock = sock
        self._fd = sock.fileno()
        self._items: deque[memoryview | _Piece] = deque()
        self.pending = 0  # bytes queued and not yet sent, file bytes included
        self._tls = isinstance(sock, ssl.SSLSocket | TlsSocket)

    def __bool__(self) -> bool:
        return bool(self._items)

    def add(self, chunks: Iterable[Chunk]) -> None:
        for item in _expand(chunks):
            self._items.append(item)
            if isinstance(item, memoryview):
                self.pending += item.nbytes
            else:
                self.pending += item.remaining
                if self._tls and not item.copying:
                    item.copying = True
                    STATS.fallback_pieces += 1

    def clear(self) -> None:
        """Drop everything queued (the connection is closing); releases the file references."""
        self._items.clear()
        self.pending = 0

    def flush(self) -> bool:
        items = self._items
        give_turn_at = perf_counter() + turns.TURN_SECONDS
        while items:
            head = items[0]
            if isinstance(head, memoryview) or self._inline(0):
                if not self._send_bytes():
                    return False
            elif not self._send_piece(head):
                return False
            if items and perf_counter() >= give_turn_at:
                # A turn for the loop (a fetch of many small slices is many preads): returning False
                # as for a full socket, the caller waits for writability, which comes at once.
                return False
        return True

    def _inline(self, i: int) -> bool:
        """Whether item `i` is bytes, reading it in first if it is a small file piece not yet begun."""
        item = self._items[i]
        if isinstance(item, memoryview):
            return True
        if item.remaining > _INLINE_MAX or item.offset != item.source.position or item.remaining == 0:
            return False
        fd = item.source.fd
        if fd < 0:
            raise SliceTruncated(errno.EBADF, "the segment file of a fetch slice was closed")
        data = os.pread(fd, item.remaining, item.offset)
        if len(data) < item.remaining:
            raise SliceTruncated(errno.EIO, "segment file ended before the fetch slice did")
        STATS.inline_pieces += 1
        STATS.inline_bytes += len(data)
        self._items[i] = memoryview(data)  # the piece (and its hold on the file) is dropped
        return True

    def _gather(self, limit: int) -> list[memoryview]:
        """The leading bytes items (small pieces read in), at most _MAX_IOV and about `limit` bytes."""
        items = self._items
        bufs: list[memoryview] = []
        size = 0
        n = len(items)
        while len(bufs) < n and len(bufs) < _MAX_IOV and size < limit and self._inline(len(bufs)):
            item = items[len(bufs)]
            assert isinstance(item, memoryview)
            bufs.append(item)
            size += item.nbytes
        return bufs

    def _send_bytes(self) -> bool:
        items = self._items
        if self._tls:
            return self._send_tls_bytes()
        if len(items) > 1 and (bufs := self._gather(_GATHER_BYTES)) and len(bufs) > 1:
            try:
                sent = cast(socket.socket, self._sock).sendmsg(bufs)  # TLS goes by _send_tls_bytes
            except (BlockingIOError, InterruptedError):
                return False
        else:
            head = items[0]
            assert isinstance(head, memoryview)
            try:
                sent = self._sock.send(head)
            except (BlockingIOError, InterruptedError):
                return False
        return self._sent(sent)

    def _send_tls_bytes(self) -> bool:
        items = self._items
        head = items[0]
        assert isinstance(head, memoryview)
        data: memoryview | bytes = head
        if head.nbytes < _TLS_JOIN and len(items) > 1 and len(bufs := self._gather(_TLS_JOIN)) > 1:
            data = b"".join(bufs)
        try:
            sent = self._sock.send(data)
        except _WOULD_BLOCK:
            return False
        return self._sent(sent)

    def _sent(self, sent: int) -> bool:
        """Drop the `sent` bytes from the front of the queue; False after a short write (the socket
        buffer is full)."""
        self.pending -= sent
        items = self._items
        while sent:
            head = items[0]
            assert isinstance(head, memoryview)
            if sent >= head.nbytes:
                sent -= head.nbytes
                items.popleft()
            else:
                items[0] = head[sent:]
                return False
        return True

    def _send_piece(self, piece: _Piece) -> bool:
        fd = piece.source.fd
        if fd < 0:
            raise SliceTruncated(errno.EBADF, "the segment file of a fetch slice was closed")
        while piece.remaining or piece.block is not None:
            if piece.copying:
                if not self._copy_some(piece, fd):
                    return False
                continue
            try:
                n = _sendfile(self._fd, fd, piece.offset, min(piece.remaining, _MAX_SENDFILE))  # type: ignore[misc]
            except (BlockingIOError, InterruptedError):
                return False
            except OSError as e:
                if e.errno not in _SENDFILE_UNSUPPORTED:
                    raise
                piece.copying = True
                STATS.fallback_pieces += 1
                continue
            STATS.sendfile_calls += 1
            if n == 0:
                raise SliceTruncated(errno.EIO, "segment file ended before the fetch slice did")
            STATS.sendfile_bytes += n
            piece.offset += n
            piece.remaining -= n
            self.pending -= n
        self._items.popleft()
        return True

    def _copy_some(self, piece: _Piece, fd: int) -> bool:
        """The fallback: pread a block of the slice and send it; False when the socket is full."""
        if piece.block is None:
            if piece.remaining == 0:
                return True
            data = os.pread(fd, min(piece.remaining, _FALLBACK_BLOCK), piece.offset)
            if not data:
                raise SliceTruncated(errno.EIO, "segment file ended before the fetch slice did")
            piece.offset += len(data)
            piece.remaining -= len(data)
            piece.block = memoryview(data)
        try:
            n = self._sock.send(piece.block)
        except _WOULD_BLOCK:
            return False
        STATS.fallback_bytes += n
        self.pending -= n
        rest = piece.block[n:]
        piece.block = rest if rest.nbytes else None
        return piece.block is None


async def send_chunks(sock: socket.socket, chunks: Iterable[Chunk]) -> None:
    """Write `chunks` to a non-blocking socket on the running loop, waiting while it is full.

    For a socket that has no other writer; a connection with its own queue uses ChunkWriter.
    """
    writer = ChunkWriter(sock)
    writer.add(chunks)
    if writer.flush():
        return
    loop = asyncio.get_running_loop()
    fd = sock.fileno()
    while True:
        ready = loop.create_future()
        loop.add_writer(fd, _wake, ready)
        try:
            await ready
        finally:
            loop.remove_writer(fd)
        if writer.flush():
            return


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)
