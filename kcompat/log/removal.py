"""What removes data from a PartitionLog: retention, DeleteRecords, truncation (Kafka's UnifiedLog
deleteOldSegments, deleteRecords and truncateTo / truncateFullyAndStartAt) with the producer-state
rebuild a truncation needs, and topic deletion. A base class of PartitionLog, kept apart for size: it
works on PartitionLog's state, declared below, and takes `self.lock` as PartitionLog's writers do.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
import threading
from collections.abc import Callable
from pathlib import Path

from kcompat.log.batch_scan import iter_headers
from kcompat.log.config import LogConfig
from kcompat.log.errors import OffsetOutOfRange
from kcompat.log.leader_epoch import LeaderEpochCache
from kcompat.log.producer_state import ProducerStateManager
from kcompat.log.segment import LogSegment
from kcompat.wire.control_batch import MARKER_RECORD_READ, control_type
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import HEADER_SIZE


class LogRemoval:
    # PartitionLog's state (set in its __init__)
    directory: Path
    config: LogConfig
    lock: threading.RLock
    leader_epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    recovery_point: int
    first_dirty_offset: int
    truncations: int
    _view: tuple[tuple[LogSegment, ...], tuple[int, ...]]
    _leo: int
    _log_start_offset: int

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._view[0]

    def _set_segments(self, segments: list[LogSegment]) -> None:
        """Replace the segment list whole: readers see the old or the new one, never a mix."""
        self._view = (tuple(segments), tuple(s.base_offset for s in segments))

    def _roll(self, now_ms: int) -> LogSegment:  # PartitionLog's
        raise NotImplementedError

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (-1: the high watermark).

        Whole segments below it are deleted now. Returns the new log start offset.
        """
        with self.lock:
            if offset == -1:
                offset = self._leo
            if offset < 0 or offset > self._leo:
                raise OffsetOutOfRange(
                    f"cannot delete records before {offset}: the high watermark is {self._leo}"
                )
            if offset > self._log_start_offset:
                self._advance_log_start(offset)
            doomed = self._segments_below_log_start()
            self._remove_segments(doomed)
            return self._log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        self._log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.truncate_head(offset)
        self.first_dirty_offset = max(self.first_dirty_offset, offset)

    def _segments_below_log_start(self) -> list[LogSegment]:
        segs = self.segments
        return [s for s, nxt in itertools.pairwise(segs) if nxt.base_offset <= self._log_start_offset]

    def _remove_segments(self, doomed: list[LogSegment]) -> None:
        """Drop segments from the list (caller holds the lock), then unlink their files."""
        if not doomed:
            return
        ids = {id(s) for s in doomed}
        remaining = [s for s in self.segments if id(s) not in ids]
        self._set_segments(remaining)
        if remaining[0].base_offset > self._log_start_offset:
            self._advance_log_start(remaining[0].base_offset)
        for s in doomed:
            s.delete()

    def run_retention(self, now_ms: int) -> int:
        """Delete old segments by retention.ms / retention.bytes (cleanup.policy delete) and below the
        log start offset (any policy). Returns the number of segments deleted."""
        cfg = self.config
        with self.lock:
            segs = list(self.segments)
            leo = self._leo
            doomed: list[LogSegment] = []

            def take_while(pred: Callable[[LogSegment, LogSegment | None], bool]) -> None:
                for i, s in enumerate(segs):
                    nxt = segs[i + 1] if i + 1 < len(segs) else None
                    upper = nxt.base_offset if nxt else leo
                    if nxt is None and s.size == 0:
                        break
                    if not (pred(s, nxt) and upper <= leo):
                        break
                    if s not in doomed:
                        doomed.append(s)

            if cfg.delete:
                if cfg.retention_ms >= 0:
                    take_while(lambda s, _n: now_ms - s.largest_timestamp > cfg.retention_ms)
                if cfg.retention_bytes >= 0:
                    diff = [sum(s.size for s in segs) - cfg.retention_bytes]

                    def over(s: LogSegment, _n: LogSegment | None) -> bool:
                        if diff[0] - s.size >= 0:
                            diff[0] -= s.size
                            return True
                        return False

                    take_while(over)
            take_while(lambda _s, n: n is not None and n.base_offset <= self._log_start_offset)
            if not doomed:
                self.producer_state.remove_expired(now_ms)
                return 0
            doomed.sort(key=lambda s: s.base_offset)
            if len(doomed) == len(segs):
                self._roll(now_ms)
            self._remove_segments(doomed)
            self.producer_state.remove_expired(now_ms)
            return len(doomed)

    def truncate_to(self, offset: int, *, now_ms: int = 0) -> None:
        """Remove everything at and after `offset` (whole batches; the log end may end up below it)."""
        with self.lock:
            if offset >= self._leo:
                return
            self.truncations += 1
            if offset < self._log_start_offset:
                self._truncate_fully_and_start_at(offset, now_ms)
                return
            segs = list(self.segments)
            doomed = [
                s for s in segs if s.base_offset > offset or (s.base_offset == offset and s is not segs[0])
            ]
            keep = [s for s in segs if s not in doomed]
            active = keep[-1]
            active.truncate_to(offset)
            active.make_active()
            self._set_segments(keep)
            for s in doomed:
                s.delete()
            self._leo = active.read_next_offset()
            self._after_truncation()

    def _truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        old = list(self.segments)
        for s in old:
            s.delete()
        new = LogSegment(self.directory, offset, self.config, created_ms=now_ms, active=True)
        if new.size:
            new.log.truncate(0)
            new.reset_indexes()
        self._set_segments([new])
        self._leo = offset
        self._log_start_offset = offset
        self.leader_epoch_cache.clear()
        self.producer_state.reset(offset)
        self.producer_state.delete_snapshots_after(-1)
        self.recovery_point = offset

    def _after_truncation(self) -> None:
        self.leader_epoch_cache.truncate_from_end(self._leo)
        self.producer_state.delete_snapshots_after(self._leo)
        self._rebuild_producer_state()
        self.recovery_point = min(self.recovery_point, self._leo)
        self.first_dirty_offset = min(self.first_dirty_offset, self._leo)

    def _rebuild_producer_state(
        self, names: list[str] | None = None, *, clean_shutdown: bool = False
    ) -> None:
        """Load the newest snapshot and replay batch headers from it to the log end (`names`: the
        directory's listing, when the caller has it)."""
        ps = self.producer_state
        start = ps.load(self._log_start_offset, self._leo, names, clean_shutdown=clean_shutdown)
        segments, bases = self._view
        i = max(bisect.bisect_right(bases, start) - 1, 0)
        for seg in segments[i:]:
            pos = 0
            if seg.base_offset < start:
                found = seg.translate_offset(start)
                if found is None:
                    continue
                pos = found[0]
            for p, h in iter_headers(seg.log, pos, seg.size):
                if h.last_offset < start:
                    continue
                if not h.is_control or h.producer_id < 0:
                    ps.update(h)
                    continue
                # A marker: an abort missing from the index (lost with an unflushed tail) comes back.
                rec = seg.log.pread(min(MARKER_RECORD_READ, h.size - HEADER_SIZE), p + HEADER_SIZE)
                try:
                    kind = control_type(rec, h)
                except DecodeError:
                    ps.update(h)
                    continue
                aborted = ps.update_control(h, kind)
                if aborted is not None:
                    seg.txn_index.append(aborted)
        ps.map_end_offset = self._leo

    def delete_files(self) -> None:
        """Remove the partition directory (topic deletion)."""
        with self.lock:
            for s in self.segments:
                s.delete()
            self._set_segments([])
            for name in os.listdir(self.directory):
                with contextlib.suppress(IsADirectoryError):
                    os.unlink(self.directory / name)
            os.rmdir(self.directory)
