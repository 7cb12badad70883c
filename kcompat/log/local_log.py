"""LocalLog: a partition's segments on this broker's disk (Kafka's LocalLog), owned by a PartitionLog.

Kafka cuts its partition log in two, and kcompat cuts it in the same place. LocalLog is the
ordered list of segments and what is done to them as files: roll a new active segment, append
batches whose offsets are already decided, read whole batches by offset, fsync and the recovery
point, truncate, remove segments, delete the directory. The PartitionLog above it (Kafka's
UnifiedLog) decides what goes in and what goes: it validates and numbers appends, keeps producer
state and leader epochs, and owns the log start offset, the high watermark and the LSO, retention
and DeleteRecords. LocalLog knows none of those: it is told where to cut and what to write.

    segments:   [base 0 ......][base 1200 .....][base 2371 ... active]
                                                                     ^ log_end_offset
    recovery_point: everything below it is fsynced; a start after an unclean stop re-validates
    the batches from the segment holding it to the end (recovery.py).

Threads. As Kafka's, LocalLog is not thread-safe for writers: every method that changes it runs
under the owning PartitionLog's lock. Readers take no lock: they read `_view`, an immutable
(segments, base offsets) pair that writers replace whole (copy-on-write, as Kafka's docs describe),
so a reader binary-searches a consistent list even while segments are added or deleted. Deleted
segments' files stay readable through the descriptors held by any FetchSlice in flight.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from kcompat.log.batch_scan import iter_whole_batches
from kcompat.log.config import LogConfig
from kcompat.log.errors import OffsetOutOfRange
from kcompat.log.log_file import EMPTY_SLICE, FetchSlice, FilePiece
from kcompat.log.segment import BatchPlacement, LogSegment
from kcompat.log.txn_index import AbortedTxn, collect_aborted
from kcompat.wire.checksum import crc32c
from kcompat.wire.record_batch import CRC_START


class LocalLog:
    # Slots: one of these per partition, thousands of them in a broker.
    __slots__ = (
        "_view",
        "config",
        "directory",
        "last_flush_ms",
        "log_end_offset",
        "partition",
        "recovery_point",
        "topic",
        "unflushed_messages",
    )

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        now_ms: int,
    ) -> None:
        """`segments`: the loaded ones (recovery.load_segments), oldest first, the last active; at
        least one. Loading validated everything in them, so the recovery point starts at their end."""
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._view: tuple[tuple[LogSegment, ...], tuple[int, ...]] = ((), ())
        self.set_segments(segments)
        # The offset the next appended record gets. A plain attribute, read by every Fetch and
        # Produce through PartitionLog (a property costs as much again); only LocalLog writes it.
        self.log_end_offset = segments[-1].load_next_offset()
        self.recovery_point = self.log_end_offset
        self.unflushed_messages = 0  # appended since the last full flush (flush.messages)
        self.last_flush_ms = now_ms  # of the last full flush (flush.ms)

    # --- the segment list ---

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._view[0]

    @property
    def active_segment(self) -> LogSegment:
        return self._view[0][-1]

    @property
    def size(self) -> int:
        return sum(s.size for s in self._view[0])

    def set_segments(self, segments: list[LogSegment]) -> None:
        """Replace the segment list whole: readers see the old or the new one, never a mix."""
        self._view = (tuple(segments), tuple(s.base_offset for s in segments))

    def segments_from(self, offset: int) -> tuple[LogSegment, ...]:
        """The segment holding `offset` (the first one if `offset` is below it) and every later one."""
        segments, bases = self._view
        return segments[max(bisect.bisect_right(bases, offset) - 1, 0) :]

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment) -> None:
        """Put `new` (compaction output) in the place of `old`, consecutive segments of this log;
        the caller has renamed the files (the cleaner's swap protocol)."""
        current = self.segments
        first = next(i for i, s in enumerate(current) if s is old[0])
        self.set_segments([*current[:first], new, *current[first + len(old) :]])

    def update_config(self, config: LogConfig) -> None:
        """A changed topic config (AlterConfigs), for this log and its segments' next decisions."""
        self.config = config
        for s in self.segments:
            s.config = config

    # --- writes ---

    def append(
        self, data: memoryview | list[bytes | memoryview], placements: list[BatchPlacement], next_offset: int
    ) -> None:
        """Write batches whose offsets are already in them to the active segment; the log end moves to
        `next_offset`. On KafkaStorageError nothing moved (the segment cut what it had written)."""
        self._view[0][-1].append(data, placements)
        self.unflushed_messages += next_offset - self.log_end_offset
        self.log_end_offset = next_offset

    def roll(self, now_ms: int) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset; the new active segment
        (the current one, unchanged, while it is empty: a roll never leaves an empty sealed segment)."""
        old = self.active_segment
        if old.size == 0:
            return old
        old.on_become_inactive()
        new = self._new_segment(self.log_end_offset, now_ms)
        self.set_segments([*self.segments, new])
        return new

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        new = LogSegment(self.directory, base_offset, self.config, created_ms=now_ms, active=True)
        if new.size:  # leftovers with that name (a crash after a truncation): start clean
            new.log.truncate(0)
            new.reset_indexes()
        return new

    def unflushed_segments(self, *, active: bool = True) -> list[LogSegment]:
        """The segments a flush must fsync: from the one holding the recovery point on (without the
        active one when `active` is False)."""
        segments = self.segments_from(self.recovery_point)
        return list(segments if active else segments[:-1])

    def mark_flushed(self, offset: int) -> None:
        """Everything below `offset` is fsynced: the recovery point moves up to it (never down)."""
        self.recovery_point = max(self.recovery_point, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at and after `offset`: whole batches, so the log end may end up below
        it. The segment holding `offset` becomes the active one, later segments are deleted, and the
        recovery point comes down with the log end. `offset` must not be below the first segment."""
        segs = self.segments
        doomed = [s for s in segs if s.base_offset > offset or (s.base_offset == offset and s is not segs[0])]
        keep = [s for s in segs if s not in doomed]
        active = keep[-1]
        active.truncate_to(offset)
        active.make_active()
        self.set_segments(keep)
        for s in doomed:
            s.delete()
        self.log_end_offset = active.read_next_offset()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        """Delete every segment and go on with one empty segment at `offset`."""
        for s in self.segments:
            s.delete()
        self.set_segments([self._new_segment(offset, now_ms)])
        self.log_end_offset = offset
        self.recovery_point = offset

    def remove_segments(self, doomed: list[LogSegment]) -> None:
        """Take segments out of the list (readers stop finding them), then unlink their files."""
        ids = {id(s) for s in doomed}
        self.set_segments([s for s in self.segments if id(s) not in ids])
        for s in doomed:
            s.delete()

    def close(self, *, sync: bool = True) -> None:
        """Close every segment: indexes trimmed and, with `sync`, everything fsynced."""
        for s in self.segments:
            s.close(sync=sync)

    def delete(self) -> None:
        """Delete every segment, then every other file of the directory (the owning log's producer
        snapshots and epoch checkpoint among them), then the directory."""
        for s in self.segments:
            s.delete()
        self.set_segments([])
        for name in os.listdir(self.directory):
            with contextlib.suppress(IsADirectoryError):
                os.unlink(self.directory / name)
        os.rmdir(self.directory)

    # --- reads ---

    def read(
        self, offset: int, max_bytes: int, min_one_batch: bool = True, max_offset: int | None = None
    ) -> FetchSlice:
        """Whole batches from the one holding `offset`, up to `max_bytes` (the first batch may exceed
        it unless `min_one_batch` is False) and, with `max_offset` (a batch boundary: the LSO or the
        high watermark), only batches below it. Empty at the log end; OffsetOutOfRange beyond it.

        Cost: a binary search over segment base offsets, one over the mmap'd index, and a header scan
        of at most index.interval.bytes plus one batch. Nothing is copied: the slice names file
        ranges that the response sends with os.sendfile.
        """
        segments, bases = self._view
        leo = self.log_end_offset
        if offset > leo:
            raise OffsetOutOfRange(
                f"offset {offset} is beyond the log end offset {leo} of {self.topic}-{self.partition}"
            )
        if max_offset is not None and max_offset < leo:
            return self._read_below(offset, max_bytes, min_one_batch, max_offset)
        if offset == leo:
            return EMPTY_SLICE
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        pieces: list[FilePiece] = []
        first = -1
        remaining = max_bytes
        while i < len(segments):
            seg = segments[i]
            end = seg.size
            got = seg.read(offset, remaining, min_one_batch=min_one_batch and not pieces)
            if got is not None:
                pos, length, base = got
                if length == 0:
                    break
                pieces.append(FilePiece(seg.log, pos, length))
                if first < 0:
                    first = base
                remaining -= length
                if pos + length < end or remaining <= 0:
                    break
            i += 1
            if i < len(segments):
                offset = segments[i].base_offset
        return FetchSlice(tuple(pieces), first) if pieces else EMPTY_SLICE

    def _read_below(self, offset: int, max_bytes: int, min_one_batch: bool, max_offset: int) -> FetchSlice:
        """`read` cut at the position of the batch starting at `max_offset`: still file slices, the
        last one shortened, never unpacked."""
        if offset >= max_offset:
            return EMPTY_SLICE
        got = self.read(offset, max_bytes, min_one_batch)
        pieces: list[FilePiece] = []
        segments, bases = self._view
        # The cap: the position of the batch at max_offset in the segment holding it.
        seg = segments[max(bisect.bisect_right(bases, max_offset) - 1, 0)]
        found = seg.translate_offset(max_offset)
        cap = found[0] if found is not None else seg.size
        for piece in got.pieces:
            if piece.file is seg.log:
                if piece.position >= cap:
                    break
                pieces.append(
                    FilePiece(
                        piece.file, piece.position, min(piece.length, cap - piece.position), piece.handle
                    )
                )
                break
            pieces.append(piece)
        return FetchSlice(tuple(pieces), got.first_offset) if pieces else EMPTY_SLICE

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound), from the `.txnindex` of
        the segment holding `fetch_offset` onwards."""
        return collect_aborted(
            (s.txn_index for s in self.segments_from(fetch_offset)), fetch_offset, upper_bound
        )

    def verify(self) -> list[str]:
        """Problems found by re-reading every batch (CRC, offsets); empty when the log is sound."""
        problems = []
        expect = self.segments[0].base_offset if self.segments else 0
        for seg in self.segments:
            for pos, h, data in iter_whole_batches(seg.log, 0, seg.size):
                if h is None:
                    problems.append(f"segment {seg.base_offset}: unreadable batch at {pos}")
                    break
                if crc32c(data[CRC_START:]) != h.crc:
                    problems.append(f"segment {seg.base_offset}: CRC mismatch at offset {h.base_offset}")
                if h.base_offset < expect:
                    problems.append(f"segment {seg.base_offset}: offset {h.base_offset} below {expect}")
                expect = h.last_offset + 1
        return problems
