"""A segment's `.log` file, and the file slices that reads hand to the server for sendfile.

A segment's file, active or sealed, is opened on demand, its descriptor kept in the bounded cache of
segment_files.py; the active one is appended with pwrite at its end, the size tracked here (so a
let-go descriptor is reopened with nothing to find out). A descriptor is not closed when the
segment is deleted (retention, compaction, truncation): it is closed when the last holder lets go
(CPython frees it as soon as no FetchSlice and no segment refers to it), so a slice handed to the
network layer stays readable even if its segment is deleted meanwhile, just as an unlinked file
stays readable through an open descriptor.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kcompat.log.errors import KafkaStorageError
from kcompat.log.log_files import PartitionFile
from kcompat.log.segment_files import SEGMENT_FILES, Descriptor


class LogFile(PartitionFile):
    __slots__ = ("__weakref__", "_h", "_pinned", "_tick", "size")

    def __init__(self, path: Path) -> None:
        """The file at `path`, created empty when absent."""
        self.path = path
        self._h: Descriptor | None = None
        self._pinned = False  # outside the cache, the descriptor kept: a deleted or closed file
        self._tick = -(1 << 62)  # the cache's tick when it last moved this file to its recent end
        try:
            self.size = os.stat(path).st_size  # an existing file is not opened until used
            return
        except FileNotFoundError:
            pass
        except OSError as e:
            raise KafkaStorageError(f"cannot open {path}: {e}") from e
        self.size = 0
        self.handle()  # creates it

    def _open(self) -> Descriptor:
        try:
            return Descriptor(os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644))
        except OSError as e:
            raise KafkaStorageError(f"cannot open {self.path}: {e}") from e

    def handle(self) -> Descriptor:
        """The open descriptor (opened now if the cache let it go)."""
        h = self._h
        cache = SEGMENT_FILES
        if h is not None and cache.ticks - self._tick < cache.fresh:
            return h  # moved to the recent end lately: no need to again (see segment_files.py)
        if h is None:
            h = self._h = self._open()
        if not self._pinned:
            self._tick = cache.touch(self)
        return h

    @property
    def fd(self) -> int:
        return self.handle().fd

    @property
    def is_open(self) -> bool:
        return self._h is not None

    def pin(self) -> None:
        """Keep the descriptor open from now on, outside the cache (the segment is being deleted:
        readers of it then go on reading what they found)."""
        if not self._pinned:
            self.handle()
            self._pinned = True
            SEGMENT_FILES.forget(self)

    def let_go(self) -> None:
        """Called by the cache: drop the descriptor (closed once no file piece or append holds it)."""
        if not self._pinned:
            self._h = None
            self._tick = -(1 << 62)

    def append(self, data: bytes | bytearray | memoryview | list[bytes | memoryview]) -> int:
        """Write `data` (a buffer, or buffers written in order with one pwritev) at the end; return
        the position it starts at.

        On any OSError (ENOSPC, EROFS, EIO) the file is cut back to its old size, so no partial
        batch is left behind, and KafkaStorageError is raised.
        """
        start = self.size
        pos = start
        h = self.handle()  # held through the writes: the cache may let it go meanwhile
        try:
            if isinstance(data, list):
                total = sum(len(b) for b in data)
                n = os.pwritev(h.fd, data, pos)
                pos += n
                if n < total:  # a short vectored write: finish the rest as one buffer
                    rest = memoryview(b"".join(data))[n:]
                    pos = self._pwrite_all(h, rest, pos)
            else:
                pos = self._pwrite_all(h, memoryview(data), pos)
        except OSError as e:
            # The size we track stays at `start`; recovery cuts any torn tail at the next start.
            with contextlib.suppress(OSError):
                os.ftruncate(h.fd, start)
            raise KafkaStorageError(f"write to {self.path.name} failed: {e}") from e
        self.size = pos
        return start

    @staticmethod
    def _pwrite_all(h: Descriptor, view: memoryview, pos: int) -> int:
        while view:
            n = os.pwrite(h.fd, view, pos)
            pos += n
            view = view[n:]
        return pos

    def pread(self, length: int, position: int) -> bytes:
        h = self.handle()
        try:
            return os.pread(h.fd, length, position)
        except OSError as e:
            raise KafkaStorageError(f"read from {self.path.name} failed: {e}") from e

    def truncate(self, size: int) -> None:
        h = self.handle()
        try:
            os.ftruncate(h.fd, size)
        except OSError as e:
            raise KafkaStorageError(f"truncate of {self.path.name} failed: {e}") from e
        self.size = size

    def flush(self) -> None:
        h = self.handle()
        try:
            os.fsync(h.fd)
        except OSError as e:
            raise KafkaStorageError(f"fsync of {self.path.name} failed: {e}") from e

    def rename(self, new_path: Path) -> None:
        os.replace(self._path, new_path)
        self.path = new_path

    def close(self) -> None:
        self._pinned = True
        SEGMENT_FILES.forget(self)
        h, self._h = self._h, Descriptor(-1)
        if h is not None:
            h.close()


# FilePiece and FetchSlice are made for every partition of every Fetch: not frozen, as a frozen
# dataclass's __init__ costs 4x as much (each field set through object.__setattr__). Treat them as
# values all the same: nothing changes them once made (but the piece's lazily taken handle).
@dataclass(slots=True)
class FilePiece:
    """`length` bytes at `position` of one segment file: whole batches, ready for os.sendfile."""

    file: LogFile
    position: int
    length: int
    # Taken when the piece is first sent (not when read: an answer of thousands of partitions
    # would hold a descriptor each until sent, beyond the cache's bound), then held until the piece
    # is dropped, so the number sendfile uses is never another file's. A segment deleted meanwhile
    # keeps its descriptor (LogSegment.delete pins it), so the piece still reads what it found.
    handle: Descriptor | None = None

    @property
    def fd(self) -> int:
        h = self.handle
        if h is None:
            h = self.file.handle()
            self.handle = h
        return h.fd

    def read(self) -> bytes:
        return self.file.pread(self.length, self.position)


@dataclass(slots=True)
class FetchSlice:
    """The answer to a read: whole record batches as file pieces, in offset order.

    `len()` is the byte count the Fetch response declares for the records field; the server sends
    each piece with os.sendfile(sock, piece.fd, piece.position, piece.length), or, as a fallback,
    the bytes of `read_bytes()`.
    """

    pieces: tuple[FilePiece, ...] = ()
    first_offset: int = -1  # base offset of the first batch, -1 when empty

    def __len__(self) -> int:
        pieces = self.pieces  # asked several times per partition of a fetch: the usual one piece first
        return pieces[0].length if len(pieces) == 1 else sum(p.length for p in pieces)

    def __iter__(self) -> Iterator[FilePiece]:
        return iter(self.pieces)

    def read_bytes(self) -> bytes:
        if len(self.pieces) == 1:
            return self.pieces[0].read()
        return b"".join(p.read() for p in self.pieces)


EMPTY_SLICE = FetchSlice()
