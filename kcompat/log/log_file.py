"""A segment's `.log` file, and the file slices that reads hand to the server for sendfile.

The active segment's file is opened once and appended with pwrite at its known end. A sealed
segment's is opened on demand, its descriptor kept in the bounded cache of sealed_files.py. A
descriptor is not closed when the segment is deleted (retention, compaction, truncation): it is
closed when the last holder lets go (CPython frees it as soon as no FetchSlice and no segment refers
to it), so a slice handed to the network layer stays readable even if its segment is deleted
meanwhile, just as an unlinked file stays readable through an open descriptor.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kcompat.log.errors import KafkaStorageError
from kcompat.log.log_files import PartitionFile
from kcompat.log.sealed_files import SEALED_FILES, Descriptor


class LogFile(PartitionFile):
    __slots__ = ("__weakref__", "_h", "_sealed", "size")

    def __init__(self, path: Path, *, sealed: bool = False) -> None:
        self.path = path
        self._h: Descriptor | None = None
        self._sealed = False
        if sealed:  # an existing sealed file is not opened until read
            try:
                self.size = os.stat(path).st_size
                self._sealed = True
                return
            except FileNotFoundError:
                pass
            except OSError as e:
                raise KafkaStorageError(f"cannot open {path}: {e}") from e
        self._h = self._open()
        self.size = os.fstat(self._h.fd).st_size
        if sealed:
            self.seal()

    def _open(self) -> Descriptor:
        try:
            return Descriptor(os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644))
        except OSError as e:
            raise KafkaStorageError(f"cannot open {self.path}: {e}") from e

    def handle(self) -> Descriptor:
        """The open descriptor (opened now if a sealed file's was let go)."""
        h = self._h
        if h is None:
            h = self._h = self._open()
        if self._sealed:
            SEALED_FILES.touch(self)
        return h

    @property
    def fd(self) -> int:
        return self.handle().fd

    def seal(self) -> None:
        """The segment was rolled: its descriptor may be let go (and opened again when read)."""
        if not self._sealed:
            self._sealed = True
            if self._h is not None:
                SEALED_FILES.touch(self)

    def pin(self) -> None:
        """Keep the descriptor open from now on (the segment is active again, or is being deleted:
        readers of it then go on reading what they found)."""
        if self._sealed:
            self.handle()
            self._sealed = False
            SEALED_FILES.forget(self)

    def let_go(self) -> None:
        """Called by the cache: drop the descriptor (closed once no file piece holds it)."""
        if self._sealed:
            self._h = None

    def append(self, data: bytes | bytearray | memoryview | list[bytes | memoryview]) -> int:
        """Write `data` (a buffer, or buffers written in order with one pwritev) at the end; return
        the position it starts at.

        On any OSError (ENOSPC, EROFS, EIO) the file is cut back to its old size, so no partial
        batch is left behind, and KafkaStorageError is raised.
        """
        start = self.size
        pos = start
        h = self.handle()  # held through the writes: a sealed file's could be let go meanwhile
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
        if self._sealed:
            SEALED_FILES.forget(self)
            self._sealed = False
        h, self._h = self._h, Descriptor(-1)
        if h is not None:
            h.close()


@dataclass(frozen=True, slots=True)
class FilePiece:
    """`length` bytes at `position` of one segment file: whole batches, ready for os.sendfile."""

    file: LogFile
    position: int
    length: int
    handle: Descriptor | None = None  # held: the descriptor stays open while the piece lives

    def __post_init__(self) -> None:
        if self.handle is None:
            object.__setattr__(self, "handle", self.file.handle())

    @property
    def fd(self) -> int:
        assert self.handle is not None
        return self.handle.fd

    def read(self) -> bytes:
        return self.file.pread(self.length, self.position)


@dataclass(frozen=True, slots=True)
class FetchSlice:
    """The answer to a read: whole record batches as file pieces, in offset order.

    `len()` is the byte count the Fetch response declares for the records field; the server sends
    each piece with os.sendfile(sock, piece.fd, piece.position, piece.length), or, as a fallback,
    the bytes of `read_bytes()`.
    """

    pieces: tuple[FilePiece, ...] = ()
    first_offset: int = -1  # base offset of the first batch, -1 when empty

    def __len__(self) -> int:
        return sum(p.length for p in self.pieces)

    def __iter__(self) -> Iterator[FilePiece]:
        return iter(self.pieces)

    def read_bytes(self) -> bytes:
        if len(self.pieces) == 1:
            return self.pieces[0].read()
        return b"".join(p.read() for p in self.pieces)


EMPTY_SLICE = FetchSlice()
