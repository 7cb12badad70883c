"""A segment's `.log` file, and the file slices that reads hand to the server for sendfile.

The file is opened once per segment and appended with pwrite at its known end. Its descriptor is
not closed when the segment is deleted (retention, compaction, truncation): it is closed when the
last holder lets go (CPython frees it as soon as no FetchSlice and no segment refers to it), so a
slice handed to the network layer stays readable even if its segment is deleted meanwhile, just as
an unlinked file stays readable through an open descriptor.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kcompat.log.errors import KafkaStorageError


class LogFile:
    __slots__ = ("__weakref__", "fd", "path", "size")

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise KafkaStorageError(f"cannot open {path}: {e}") from e
        self.size = os.fstat(self.fd).st_size

    def append(self, data: bytes | bytearray | memoryview | list[bytes | memoryview]) -> int:
        """Write `data` (a buffer, or buffers written in order with one pwritev) at the end; return
        the position it starts at.

        On any OSError (ENOSPC, EROFS, EIO) the file is cut back to its old size, so no partial
        batch is left behind, and KafkaStorageError is raised.
        """
        start = self.size
        pos = start
        try:
            if isinstance(data, list):
                total = sum(len(b) for b in data)
                n = os.pwritev(self.fd, data, pos)
                pos += n
                if n < total:  # a short vectored write: finish the rest as one buffer
                    rest = memoryview(b"".join(data))[n:]
                    pos = self._pwrite_all(rest, pos)
            else:
                pos = self._pwrite_all(memoryview(data), pos)
        except OSError as e:
            # The size we track stays at `start`; recovery cuts any torn tail at the next start.
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, start)
            raise KafkaStorageError(f"write to {self.path.name} failed: {e}") from e
        self.size = pos
        return start

    def _pwrite_all(self, view: memoryview, pos: int) -> int:
        while view:
            n = os.pwrite(self.fd, view, pos)
            pos += n
            view = view[n:]
        return pos

    def pread(self, length: int, position: int) -> bytes:
        try:
            return os.pread(self.fd, length, position)
        except OSError as e:
            raise KafkaStorageError(f"read from {self.path.name} failed: {e}") from e

    def truncate(self, size: int) -> None:
        try:
            os.ftruncate(self.fd, size)
        except OSError as e:
            raise KafkaStorageError(f"truncate of {self.path.name} failed: {e}") from e
        self.size = size

    def flush(self) -> None:
        try:
            os.fsync(self.fd)
        except OSError as e:
            raise KafkaStorageError(f"fsync of {self.path.name} failed: {e}") from e

    def rename(self, new_path: Path) -> None:
        os.replace(self.path, new_path)
        self.path = new_path

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        if getattr(self, "fd", -1) >= 0:
            os.close(self.fd)


@dataclass(frozen=True, slots=True)
class FilePiece:
    """`length` bytes at `position` of one segment file: whole batches, ready for os.sendfile."""

    file: LogFile
    position: int
    length: int

    @property
    def fd(self) -> int:
        return self.file.fd

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
