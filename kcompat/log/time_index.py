"""The sparse time index: `<base offset>.timeindex`, as Kafka's TimeIndex.

Entry layout, 12 bytes, big-endian:

     0  timestamp       int64    largest timestamp seen in the segment so far
     8  relativeOffset  uint32   last offset of the batch that holds that timestamp - base offset

An entry is added next to each offset index entry, and only when the segment's largest timestamp
has grown, so both fields increase strictly. When a segment stops being active, one last entry with
the segment's largest timestamp is added (Kafka's onBecomeInactiveSegment), so the file's last
entry is the segment's max timestamp. To find the first record with timestamp >= t: take the last
entry with timestamp < t (or the start), and scan batches from the offset it names.
"""

from __future__ import annotations

import struct
from pathlib import Path

from kcompat.log.index import CorruptIndex, IndexFull, MmapIndex

ENTRY = struct.Struct(">qI")
ENTRY_SIZE = 12
NO_TIMESTAMP = -1


class TimeIndex(MmapIndex):
    __slots__ = ()
    ENTRY = ENTRY
    REL_OFFSET_AT = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, writable: bool = True) -> None:
        super().__init__(path, base_offset, max_index_size, writable=writable)

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, absolute offset) of the last entry; (NO_TIMESTAMP, base) if empty."""
        mm, n = self._mm, self._entries
        if mm is None or n == 0:
            return NO_TIMESTAMP, self.base_offset
        ts, rel = ENTRY.unpack_from(mm, (n - 1) * ENTRY_SIZE)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is above the last entry's (Kafka's maybeAppend)."""
        last_ts, last_off = self.last_entry()
        if self._entries and timestamp <= last_ts:
            return
        if self._entries and offset < last_off:
            raise ValueError(f"time index offset {offset} is below the last entry's {last_off}")
        if skip_full_check and self._pending:
            self.resize(ENTRY_SIZE)  # the only entry of a sealed segment: no preallocated file for it
        if self.is_full:
            if skip_full_check:
                # The final entry at roll: make room for it as Kafka does (one entry past the size).
                self.resize(self._length + ENTRY_SIZE)
            else:
                raise IndexFull(f"{self.path.name} is full")
        self._append_raw(timestamp, offset - self.base_offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, absolute offset) of the last entry with timestamp <= target; (NO_TIMESTAMP, base) if none.

        Entries are added only when the maximum grows, so every batch before the entry's batch has
        a max timestamp below the entry's: a scan for the first record >= target may start there.
        """
        e = self._largest_lower_bound(0, target_timestamp)
        if e is None:
            return NO_TIMESTAMP, self.base_offset
        return e[0], self.base_offset + e[1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries that point at offsets >= `offset`."""
        mm, n = self._mm, self._entries
        if mm is None or n == 0:
            return
        rel = offset - self.base_offset
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if ENTRY.unpack_from(mm, mid * ENTRY_SIZE)[1] >= rel:
                hi = mid
            else:
                lo = mid + 1
        self.truncate_to_entries(lo)

    def sanity_check(self, last_offset: int) -> None:
        if self.torn:
            raise CorruptIndex(f"{self.path.name} is not a whole number of entries")
        mm, n = self._mm, self._entries
        if mm is None or n == 0:
            return
        prev_ts, prev_rel = -(2**63), -1
        for i in range(n):
            ts, rel = ENTRY.unpack_from(mm, i * ENTRY_SIZE)
            if ts <= prev_ts or rel < prev_rel or self.base_offset + rel > last_offset:
                raise CorruptIndex(
                    f"{self.path.name}: entry {i} ({ts}, {rel}) is out of order or past the log"
                )
            prev_ts, prev_rel = ts, rel


__all__ = ["NO_TIMESTAMP", "CorruptIndex", "IndexFull", "TimeIndex"]
