"""LogSegment: one `.log` file and its two sparse indexes, as Kafka's LogSegment.

    <base offset>.log        batches, each  [baseOffset i64][batchLength i32][rest of a v2 batch]
    <base offset>.index      (relativeOffset u32, position u32)         see offset_index.py
    <base offset>.timeindex  (timestamp i64, relativeOffset u32)        see time_index.py
    <base offset>.txnindex   aborted transactions, 34-byte entries      see txn_index.py

Index entries are added per batch, as Kafka 4.0 does: before a batch is accounted, if more than
`index.interval.bytes` were written since the last entry, the batch gets an offset index entry
(its last offset, its position) and the time index gets (largest timestamp so far, last offset of
the batch holding it) if that timestamp grew. Lookups are a binary search on the mmap'd index then
a header-only scan of at most index.interval.bytes plus one batch.

Not thread-safe for writers (the owning PartitionLog serialises them); reads of a sealed segment
are safe from any thread.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from kcompat.log.batch_scan import iter_headers
from kcompat.log.config import LogConfig
from kcompat.log.errors import KafkaStorageError
from kcompat.log.index import IndexFull
from kcompat.log.log_file import LogFile
from kcompat.log.log_files import index_path, log_path, time_index_path, txn_index_path
from kcompat.log.offset_index import OffsetIndex
from kcompat.log.time_index import NO_TIMESTAMP, TimeIndex
from kcompat.log.txn_index import TransactionIndex
from kcompat.wire.record_batch import BatchHeader, read_header

# (position inside the appended buffer, size, last offset, max timestamp) of each batch appended
BatchPlacement = tuple[int, int, int, int]

MAX_RELATIVE_OFFSET = 0x7FFFFFFF  # Kafka keeps relative offsets within an int


class LogSegment:
    # Slots: one of these per partition (or per segment), thousands of them in a broker.
    __slots__ = (
        "base_offset",
        "bytes_since_last_index_entry",
        "config",
        "created_ms",
        "directory",
        "log",
        "max_timestamp_so_far",
        "offset_index",
        "offset_of_max_timestamp_so_far",
        "rolling_based_timestamp",
        "time_index",
        "txn_index",
    )

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        created_ms: int,
        suffix: str = "",
        active: bool = False,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.created_ms = created_ms
        self.log = LogFile(log_path(directory, base_offset, suffix))
        try:
            self.offset_index = OffsetIndex(
                index_path(directory, base_offset, suffix),
                base_offset,
                config.segment_index_bytes,
                writable=active,
            )
            self.time_index = TimeIndex(
                time_index_path(directory, base_offset, suffix),
                base_offset,
                config.segment_index_bytes,
                writable=active,
            )
            self.txn_index = TransactionIndex(txn_index_path(directory, base_offset, suffix))
        except OSError as e:
            raise KafkaStorageError(f"cannot open the indexes of segment {base_offset}: {e}") from e
        ts, off = self.time_index.last_entry()
        self.max_timestamp_so_far = ts
        self.offset_of_max_timestamp_so_far = off if ts != NO_TIMESTAMP else -1
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp: int | None = None
        if active and self.log.size >= 61:
            self.rolling_based_timestamp = read_header(self.log.pread(61, 0)).max_timestamp

    # --- facts ---

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the file's mtime if no batch carries one (Kafka's largestTimestamp)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        try:
            return int(os.stat(self.log.path).st_mtime * 1000)
        except OSError:
            return 0

    def should_roll(self, batch_bytes: int, max_timestamp: int, last_offset: int, now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll: size, age, full indexes, or an offset the index cannot hold."""
        cfg = self.config
        if self.size > 0:
            base_ts = self.rolling_based_timestamp
            waited = (
                max_timestamp - base_ts if base_ts is not None and base_ts >= 0 else now_ms - self.created_ms
            )
            if waited > cfg.segment_ms:
                return True
        return (
            self.size > cfg.segment_bytes - batch_bytes
            or self.offset_index.is_full
            or self.time_index.is_full
            or last_offset - self.base_offset > MAX_RELATIVE_OFFSET
        )

    # --- writes ---

    def append(
        self,
        data: bytes | bytearray | memoryview | list[bytes | memoryview],
        batches: Sequence[BatchPlacement],
    ) -> int:
        """Write whole batches (offsets already assigned) and index them; returns their file position."""
        start = self.log.append(data)
        if self.rolling_based_timestamp is None and batches:
            self.rolling_based_timestamp = batches[0][3]
        interval = self.config.index_interval_bytes
        oi, ti = self.offset_index, self.time_index
        for pos, size, last_offset, max_ts in batches:
            if max_ts > self.max_timestamp_so_far:
                self.max_timestamp_so_far = max_ts
                self.offset_of_max_timestamp_so_far = last_offset
            if self.bytes_since_last_index_entry > interval:
                # A full index makes the next append roll; entries skipped meanwhile only make lookups
                # scan further, never wrong.
                try:
                    oi.append(last_offset, start + pos)
                    if self.max_timestamp_so_far >= 0:
                        ti.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
                except IndexFull:
                    pass
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += size
        return start

    def index_batch(self, position: int, header: BatchHeader) -> None:
        """Account one batch already in the file (recovery, cleaning) exactly as append() would."""
        # An empty batch (left by compaction) has no record with its timestamp: never index it by time.
        max_ts = header.max_timestamp if header.records_count else -1
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = max_ts
        if max_ts > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_ts
            self.offset_of_max_timestamp_so_far = header.last_offset
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            try:
                self.offset_index.append(header.last_offset, position)
                if self.max_timestamp_so_far >= 0:
                    self.time_index.maybe_append(
                        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
                    )
            except IndexFull:
                pass
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += header.size

    def reset_indexes(self) -> None:
        """Forget the indexes and the timestamps derived from them, before re-indexing the file."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = -1
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp = None

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after it; returns the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(found[1].base_offset)
        self.log.truncate(position)
        ts, off = self.time_index.last_entry()
        self.max_timestamp_so_far = ts
        self.offset_of_max_timestamp_so_far = off if ts != NO_TIMESTAMP else -1
        # Batches after the last index entry are not in the time index: take them into account.
        _, scan_from = self.offset_index.lookup(self.offset_index.last_offset)
        for _, h in iter_headers(self.log, scan_from, self.size):
            if h.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = h.max_timestamp
                self.offset_of_max_timestamp_so_far = h.last_offset
        self.bytes_since_last_index_entry = 0
        if self.size == 0:
            self.rolling_based_timestamp = None
        return removed

    def on_become_inactive(self) -> None:
        """On roll: the time index gets the segment's largest timestamp; indexes shrink to their entries."""
        if self.max_timestamp_so_far >= 0:
            # No disk space for it: the segment's largest timestamp is then found by a scan instead.
            with contextlib.suppress(IndexFull):
                self.time_index.maybe_append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
                )
        self._trim_indexes()

    def _trim_indexes(self) -> None:
        # The loader takes a missing time index as empty (as Kafka does), and a missing offset
        # index too where the segment is too small to have had an entry. An offset index without
        # entries gets an empty file only when the segment is larger than that (one big batch) or
        # has a time index file (Kafka's tools read a time index with its offset index).
        self.time_index.trim()
        self.offset_index.trim(
            empty_file=self.size > self.config.index_interval_bytes or self.time_index.has_file
        )

    def make_active(self) -> None:
        """Give a sealed segment's indexes room to grow again (after truncation re-opens it)."""
        self.offset_index.resize(self.config.segment_index_bytes)
        self.time_index.resize(self.config.segment_index_bytes)

    def flush(self) -> None:
        self.log.flush()
        try:
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        except OSError as e:
            raise KafkaStorageError(f"flush of segment {self.base_offset} indexes failed: {e}") from e

    def close(self, *, sync: bool = True) -> None:
        """Clean close: trimmed indexes, everything fsynced (or, with sync=False, left to the
        caller's one sync of the whole filesystem).

        The closing time index entry (Kafka's close writes it: a Kafka broker loading this dir
        takes the segment's largest timestamp from it) goes only into a time index that has a
        file already: creating one for it would cost a file per small partition at every stop,
        and Kafka takes a segment without time index entries at the log file's mtime. Our next
        start finds the largest timestamp in the tail it scans anyway (load_next_offset)."""
        if self.time_index.has_file and self.max_timestamp_so_far >= 0:
            with contextlib.suppress(IndexFull):
                self.time_index.maybe_append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
                )
        self._trim_indexes()
        if sync:
            self.flush()
        self.offset_index.close(sync=sync)
        self.time_index.close(sync=sync)
        self.log.close()

    def paths(self) -> list[Path]:
        return [self.log.path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def rename_suffix(self, old: str, new: str) -> None:
        """Rename the files from `<name><old>` to `<name><new>` (compaction's swap protocol)."""
        for obj in (self.log, self.offset_index, self.time_index, self.txn_index):
            name = obj.path.name
            assert name.endswith(old), name
            obj.rename(obj.path.with_name(name[: len(name) - len(old)] + new))

    def delete(self) -> None:
        """Unlink the files. Open descriptors and maps stay valid for readers until dropped."""
        with contextlib.suppress(KafkaStorageError):  # out of descriptors: readers get the error
            self.log.pin()  # a reader that found the segment before reads it through to the end
        for p in self.paths():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)

    # --- reads ---

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset >= `offset`, or None."""
        _, pos = self.offset_index.lookup(offset)
        for p, h in iter_headers(self.log, max(pos, start_position), self.log.size):
            if h.last_offset >= offset:
                return p, h
        return None

    def read(
        self, start_offset: int, max_size: int, *, min_one_batch: bool = True
    ) -> tuple[int, int, int] | None:
        """(position, length, first base offset) of whole batches from the one holding `start_offset`.

        At most `max_size` bytes, except that the first batch is returned whole when min_one_batch
        is set (as Kafka does, so a consumer is never stuck behind a batch larger than its fetch
        size). None if the segment holds nothing at or after `start_offset`.
        """
        end = self.log.size  # a snapshot: a concurrent append past it is not returned
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        pos, h = found
        if h.size > max_size:
            return (pos, h.size if min_one_batch else 0, h.base_offset)
        limit = pos + max_size
        if limit >= end:
            return pos, end - pos, h.base_offset
        # The index also orders positions: jump near the limit, then scan a short way to the last
        # batch boundary at or below it.
        _, ipos = self.offset_index.lookup_position(limit)
        stop = scan_from = max(ipos, pos)
        for p, hh in iter_headers(self.log, scan_from, end):
            if p + hh.size > limit:
                break
            stop = p + hh.size
        return pos, stop - pos, h.base_offset

    def find_batch_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch at or after `start_offset` with max timestamp >= `timestamp`."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(ts_offset, start_offset))
        for p, h in iter_headers(self.log, pos, self.log.size):
            if h.max_timestamp >= timestamp and h.last_offset >= start_offset:
                return p, h
        return None

    def load_next_offset(self) -> int:
        """read_next_offset for a segment just opened as the active one, taking the largest
        timestamp of the batches it scans into account too (those past the time index's last
        entry: a clean close adds no closing entry, see close())."""
        _, pos = self.offset_index.lookup(self.offset_index.last_offset)
        nxt = self.base_offset
        for _, h in iter_headers(self.log, pos, self.log.size):
            nxt = h.last_offset + 1
            # An empty batch (left by compaction) has no record with its timestamp (index_batch).
            if h.records_count and h.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = h.max_timestamp
                self.offset_of_max_timestamp_so_far = h.last_offset
        return nxt

    def read_next_offset(self) -> int:
        """One past the last offset in the file (the base offset if it is empty)."""
        _, pos = self.offset_index.lookup(self.offset_index.last_offset)
        nxt = self.base_offset
        for _, h in iter_headers(self.log, pos, self.log.size):
            nxt = h.last_offset + 1
        return nxt

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
