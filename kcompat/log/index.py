"""The life cycle Kafka's AbstractIndex gives its sparse index files, shared by both indexes.

A file of fixed-size big-endian entries, sorted by key, mapped into memory:

  * created preallocated (ftruncate, so sparse on disk) to segment.index.bytes rounded down to a
    whole number of entries, because an mmap cannot grow in place;
  * appended to through the map, so an append is a store into the page cache;
  * trimmed to entries * entry size when its segment is rolled or closed, so a sealed index is
    exactly its entries (what Kafka's tools expect: entries = file length / entry size); an index
    that never got an entry has no file unless its segment outgrew index.interval.bytes
    (recovery.py takes a missing one as empty otherwise);
  * looked up by binary search for the last entry whose key is <= the target.

The preallocated file is sparse: a store into a page the filesystem has not allocated makes it
find a block then, and on a full disk it cannot, which is a SIGBUS that kills the process. So the
blocks under the next entry are allocated first (posix_fallocate, a page at a time); when that
fails the entry is skipped (IndexFull), which only makes lookups scan further.

A preallocated file left behind by a crash has zero padding after its real entries. No entry after
the first can hold relative offset 0 (entries are strictly increasing), so the first entry past 0
with relative offset 0 marks the end: found by bisection, no scan.

Thread safety: one writer. Readers on other threads take (map, entries) once per lookup; a resize
installs a new map and never closes the old one (it goes when the last reader drops it), and a
shrink never cuts below the entries a reader can see, so a reader never touches unmapped pages.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from pathlib import Path
from typing import ClassVar

from kcompat.log.log_files import PartitionFile


class IndexFull(Exception):
    """No room for another entry: the segment must roll."""


class IndexSpaceUnavailable(IndexFull):
    """The filesystem cannot allocate the page under the next entry (disk full): skip the entry."""


class CorruptIndex(Exception):
    """The file is not a valid index for its segment: rebuild it from the log."""


class MmapIndex(PartitionFile):
    # Slots: one of these per partition (or per segment), thousands of them in a broker.
    __slots__ = (
        "_backed",
        "_closed",
        "_entries",
        "_in_memory",
        "_length",
        "_mm",
        "_pending",
        "_unsynced",
        "base_offset",
        "max_index_size",
        "torn",
    )

    ENTRY: ClassVar[struct.Struct]
    REL_OFFSET_AT: ClassVar[int]  # byte position of the u32 relative offset inside an entry

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        size = self.ENTRY.size
        # The map keeps its own duplicate of the descriptor; ours is closed once the map exists
        # (one descriptor per index instead of two), and reopened by path for the rare resize.
        # An index without entries has no map at all (and a new one no file yet): it is created
        # with the first entry, so a partition with little data holds only its log's descriptor,
        # and creating thousands of partitions creates only their logs (Kafka's LazyIndex).
        self._pending = False
        # Entries that fit in one page are read into memory and the file is mapped only when it
        # changes: CPython's mmap (before 3.13) keeps a duplicate descriptor per map, and a start
        # after a clean stop finds every active time index holding one closing entry, which would
        # be a second descriptor per partition (a sealed segment's small indexes, two more).
        self._in_memory = False
        self._unsynced = False  # entries stored through a map since dropped: flush() syncs by path
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            fd = -1
        length = data_end = 0
        try:
            if fd >= 0:
                length = data_end = os.fstat(fd).st_size
                # Entries lie in the allocated head of a preallocated file (see _allocate); probing
                # its holes would fault in zero pages: ~13 ms an index on a busy disk, 5,000
                # partitions' worth after a kill -9 took a minute.
                with contextlib.suppress(OSError):
                    data_end = min(length, os.lseek(fd, 0, os.SEEK_HOLE))
            # A length that is not whole entries means a torn or cut file: the owner rebuilds it.
            self.torn = length % size != 0
            if length == 0:
                self._pending = True
                length = max_index_size // size * size if writable else 0
                self._mm: mmap.mmap | bytes | None = None
            else:
                if length % size:
                    length -= length % size
                    os.ftruncate(fd, length)
                data_end = min(data_end, length)
                if data_end <= mmap.PAGESIZE:
                    # A whole page, as a map would be: a reader that took this buffer before the
                    # first append mapped the file reads zeros past it, never out of bounds.
                    self._mm = os.pread(fd, data_end, 0).ljust(mmap.PAGESIZE, b"\0")
                    self._in_memory = True
                else:
                    self._mm = mmap.mmap(fd, length)
        finally:
            if fd >= 0:
                os.close(fd)
        self._closed = False
        self._length = length
        self._entries = 0 if self._pending else self._count_entries(data_end)
        # Bytes of the file known to have blocks under them (the pages holding the entries).
        self._backed = self._entries * size // mmap.PAGESIZE * mmap.PAGESIZE

    def _materialise(self) -> None:
        """Create (or grow) the file to its preallocated length and map it: the first entry is due."""
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, self._length)
            self._mm = mmap.mmap(fd, self._length)
        finally:
            os.close(fd)
        self._pending = False
        self._in_memory = False
        self._backed = 0

    def _mapped(self) -> mmap.mmap:
        """The map, made now if the entries were only read into memory (a change is due)."""
        if self._in_memory:
            self._materialise()
            self._backed = self._entries * self.ENTRY.size // mmap.PAGESIZE * mmap.PAGESIZE
        assert isinstance(self._mm, mmap.mmap)
        return self._mm

    # --- size and life cycle ---

    @property
    def has_file(self) -> bool:
        return not self._pending

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY.size

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def size_bytes(self) -> int:
        return self._entries * self.ENTRY.size

    def _count_entries(self, data_end: int) -> int:
        n = min(self._length, data_end) // self.ENTRY.size
        mm = self._mm
        if mm is None or n == 0:
            return n
        if not any(mm[: self.ENTRY.size]):
            # An all-zero first entry is preallocated space, not an entry: offset index entries never
            # point at position 0 and time index entries never hold timestamp 0 (a killed broker's
            # new segment leaves exactly this).
            return 0
        if n == 1:
            return n
        lo, hi = 1, n  # first i >= 1 whose relative offset is 0, or n
        at = self.REL_OFFSET_AT
        while lo < hi:
            mid = (lo + hi) // 2
            if struct.unpack_from(">I", mm, mid * self.ENTRY.size + at)[0] == 0:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def resize(self, new_length: int) -> None:
        """Grow (preallocate) or shrink the file; entries beyond the new size are dropped."""
        size = self.ENTRY.size
        new_length = max(new_length // size * size, self._entries * size)
        if new_length == self._length:
            return
        if self._pending:  # no file yet: it gets this length when it is created
            self._length = new_length
            return
        if self._in_memory:  # the file holds the entries: it gets this length when mapped
            old, self._length = self._length, new_length
            if new_length < old and os.stat(self._path).st_size > new_length:
                os.truncate(self._path, new_length)  # a trim: the file is exactly its entries
            return
        # No msync first: the map's dirty pages are the file's page cache, which ftruncate and a new
        # map keep; a later flush() syncs them (an msync here cost ~10 ms per index at start-up).
        fd = os.open(self._path, os.O_RDWR)
        try:
            os.ftruncate(fd, new_length)
            self._mm = mmap.mmap(fd, new_length) if new_length else None
        finally:
            os.close(fd)
        self._length = new_length
        self._backed = min(self._backed, new_length)

    def trim(self, *, empty_file: bool = False) -> None:
        """Cut the file to its real entries (on roll and on close). An index that never got an entry
        has no file, and gets an empty one only with `empty_file` (its segment is large enough that
        the loader would otherwise rebuild it): creating files is most of what a clean stop costs."""
        self.resize(self._entries * self.ENTRY.size)
        if self._pending:
            if empty_file:
                os.close(os.open(self._path, os.O_WRONLY | os.O_CREAT, 0o644))
        elif isinstance(self._mm, mmap.mmap) and self._length <= mmap.PAGESIZE:
            # A sealed index of a page or less is read into memory, as a start reads it, and its map
            # dropped (with the descriptor the map keeps): else every roll left a descriptor behind.
            # A reader holding the map goes on with it; its dirty pages stay in the page cache.
            self._mm = bytes(self._mm[: self._length]).ljust(mmap.PAGESIZE, b"\0")
            self._in_memory = True
            self._unsynced = True

    def reset(self) -> None:
        """Forget every entry (before a rebuild); zero the old ones so a crash cannot resurrect them."""
        self.truncate_to_entries(0)

    def truncate_to_entries(self, n: int) -> None:
        if n >= self._entries:
            return
        size = self.ENTRY.size
        old = self._entries
        zeros = bytes((old - n) * size)
        self._entries = n
        if self._in_memory:  # zeroed in the file too, without mapping it (a crash must not resurrect them)
            fd = os.open(self._path, os.O_RDWR)
            try:
                os.pwrite(fd, zeros, n * size)
            finally:
                os.close(fd)
            mm = bytearray(self._mm or b"")
            mm[n * size : old * size] = zeros
            self._mm = bytes(mm)  # a new buffer: a reader keeps the one it took
        elif isinstance(self._mm, mmap.mmap):
            self._mm[n * size : old * size] = zeros

    def flush(self) -> None:
        if isinstance(self._mm, mmap.mmap):
            self._mm.flush()
        elif self._unsynced:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:  # the segment was deleted meanwhile: nothing to sync
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._unsynced = False

    def close(self, *, sync: bool = True) -> None:
        """Trim, flush (unless the caller syncs the filesystem) and release the file (clean shutdown)."""
        if self._closed:
            return
        self.trim()
        if sync:
            self.flush()
        if isinstance(self._mm, mmap.mmap):
            self._mm.close()
        self._mm = None
        self._closed = True

    def rename(self, new_path: Path) -> None:
        if self._pending and not self.path.exists():
            self.path = new_path
            return
        os.replace(self._path, new_path)
        self.path = new_path

    # --- entries ---

    def _append_raw(self, *fields: int) -> None:
        if self.is_full:
            raise IndexFull(f"{self.path.name} is full ({self._entries} entries)")
        if self._pending:
            try:
                self._materialise()
            except OSError as e:
                raise IndexSpaceUnavailable(f"{self.path.name}: cannot create it: {e}") from e
        mm = self._mapped()
        at = self._entries * self.ENTRY.size
        if at + self.ENTRY.size > self._backed:
            self._allocate(at + self.ENTRY.size)
        self.ENTRY.pack_into(mm, at, *fields)
        self._entries += 1  # after the store: a reader on another thread never sees half an entry

    def _allocate(self, end: int) -> None:
        """Give the file blocks up to the page holding byte `end` before the map stores there."""
        page = mmap.PAGESIZE
        stop = min(-(-end // page) * page, self._length)
        try:
            fd = os.open(self._path, os.O_RDWR)
            try:
                os.posix_fallocate(fd, self._backed, stop - self._backed)
            finally:
                os.close(fd)
        except OSError as e:
            raise IndexSpaceUnavailable(f"{self.path.name}: no space for entry {self._entries}: {e}") from e
        self._backed = stop

    def _entry(self, mm: mmap.mmap | bytes, i: int) -> tuple[int, ...]:
        return self.ENTRY.unpack_from(mm, i * self.ENTRY.size)

    def _largest_lower_bound(self, key_field: int, target: int) -> tuple[int, ...] | None:
        """The last entry whose field `key_field` is <= target, or None if every entry is above it."""
        mm, n = self._mm, self._entries
        if mm is None or n == 0:
            return None
        unpack = self.ENTRY.unpack_from
        size = self.ENTRY.size
        if unpack(mm, 0)[key_field] > target:
            return None
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if unpack(mm, mid * size)[key_field] <= target:
                lo = mid
            else:
                hi = mid - 1
        return unpack(mm, lo * size)

    def _smallest_upper_bound(self, key_field: int, target: int) -> tuple[int, ...] | None:
        """The first entry whose field `key_field` is >= target, or None."""
        mm, n = self._mm, self._entries
        if mm is None or n == 0:
            return None
        unpack = self.ENTRY.unpack_from
        size = self.ENTRY.size
        if unpack(mm, (n - 1) * size)[key_field] < target:
            return None
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if unpack(mm, mid * size)[key_field] >= target:
                hi = mid
            else:
                lo = mid + 1
        return unpack(mm, lo * size)

    def all_entries(self) -> list[tuple[int, ...]]:
        mm = self._mm
        if mm is None:
            return []
        return [self._entry(mm, i) for i in range(self._entries)]
