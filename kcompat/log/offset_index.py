"""The sparse offset index: `<base offset>.index`, as Kafka's OffsetIndex.

Entry layout, 8 bytes, big-endian, one per `index.interval.bytes` of log (Kafka 4.0 indexes per batch):

     0  relativeOffset  uint32   last offset of the indexed batch - segment base offset
     4  position        uint32   byte position of that batch in the .log file

An entry says "the batch starting at `position` ends at offset base + relativeOffset", so to read
offset t: take the last entry with relativeOffset <= t - base, and scan batches forward from its
position (at most index.interval.bytes plus one batch) to the first batch whose last offset >= t.
Positions increase with offsets, so the same entries also bound a byte range (`lookup_position`).
No checksum: after a crash the file is rebuilt from the log.
"""

from __future__ import annotations

import struct
from pathlib import Path

from kcompat.log.index import CorruptIndex, MmapIndex

ENTRY = struct.Struct(">II")
ENTRY_SIZE = 8


class OffsetIndex(MmapIndex):
    __slots__ = ()
    ENTRY = ENTRY
    REL_OFFSET_AT = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, writable: bool = True) -> None:
        super().__init__(path, base_offset, max_index_size, writable=writable)

    @property
    def last_offset(self) -> int:
        """Absolute offset of the last entry, or the base offset when there is none."""
        mm, n = self._mm, self._entries
        if mm is None or n == 0:
            return self.base_offset
        rel: int = ENTRY.unpack_from(mm, (n - 1) * ENTRY_SIZE)[0]
        return self.base_offset + rel

    def append(self, offset: int, position: int) -> None:
        """Index the batch at `position` whose last offset is `offset`; offsets must increase."""
        rel = offset - self.base_offset
        if not 0 <= rel <= 0xFFFFFFFF:
            raise ValueError(f"offset {offset} is outside segment {self.base_offset}")
        if self._entries and offset <= self.last_offset:
            raise ValueError(f"offset {offset} is not above the last indexed offset {self.last_offset}")
        self._append_raw(rel, position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(absolute offset, position) of the last entry at or below `target_offset`; (base, 0) if none."""
        e = self._largest_lower_bound(0, target_offset - self.base_offset)
        if e is None:
            return self.base_offset, 0
        return self.base_offset + e[0], e[1]

    def lookup_position(self, max_position: int) -> tuple[int, int]:
        """(absolute offset, position) of the last entry whose position <= max_position; (base, 0) if none."""
        e = self._largest_lower_bound(1, max_position)
        if e is None:
            return self.base_offset, 0
        return self.base_offset + e[0], e[1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= `offset` (log truncation)."""
        e = self._smallest_upper_bound(0, offset - self.base_offset)
        if e is None:
            return
        lo, hi = 0, self._entries - 1
        mm = self._mm
        assert mm is not None
        rel = offset - self.base_offset
        while lo < hi:  # first entry with relative offset >= rel
            mid = (lo + hi) // 2
            if ENTRY.unpack_from(mm, mid * ENTRY_SIZE)[0] >= rel:
                hi = mid
            else:
                lo = mid + 1
        self.truncate_to_entries(lo)

    def sanity_check(self, log_size: int) -> None:
        """Raise CorruptIndex unless entries increase and every position lies inside the log."""
        if self.torn:
            raise CorruptIndex(f"{self.path.name} is not a whole number of entries")
        mm, n = self._mm, self._entries
        if mm is None or n == 0:
            return
        prev_rel = prev_pos = -1
        # Kafka checks only the last entry; checking them all is cheap at load (<= 1.3 M entries,
        # and only for segments whose index was not trimmed by a clean roll).
        for i in range(n):
            rel, pos = ENTRY.unpack_from(mm, i * ENTRY_SIZE)
            if rel <= prev_rel or pos <= prev_pos or pos >= log_size:
                raise CorruptIndex(
                    f"{self.path.name}: entry {i} ({rel}, {pos}) is out of order or past the log"
                )
            prev_rel, prev_pos = rel, pos
