"""Opening a partition directory: finishing interrupted compaction, validating, re-indexing (Kafka's LogLoader).

On open, in this order:
  1. leftovers are removed: `.deleted` (deletion in progress), `.cleaned` (compaction output not yet
     complete), `.tmp` (checkpoint being written), index files whose `.log` is gone;
  2. each `.log.swap` (complete compaction output) is validated, the segments it replaces (base
     offsets in [swap base, swap next offset)) are deleted, and it is renamed into place;
  3. every segment is opened; a missing or insane index is rebuilt from its log (a rebuild that
     finds a bad batch cuts the log there as step 4 does, later segments included: no hole). A
     missing time index is taken as empty, as Kafka takes it, and so is a missing offset index of
     a segment no larger than index.interval.bytes (it cannot have had an entry);
  4. after an unclean stop, every segment from the one holding the recovery point to the end is
     scanned: each batch must have a readable header, fit in the file, pass its CRC-32C and have
     offsets above the previous batch's. The first batch that fails cuts the log there (the segment
     is truncated and later segments deleted) and ONE warning line says what was cut. The engine
     never refuses to start for a bad tail, and nothing before the first bad batch is touched.
The segments left become the partition's LocalLog (`load_local_log`); its PartitionLog then makes
its producer state agree with them (`rebuild_producer_state`: the newest snapshot, then the batch
headers after it replayed), as it does again after every truncation.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kcompat.log.batch_scan import iter_headers, iter_whole_batches
from kcompat.log.config import LogConfig
from kcompat.log.index import CorruptIndex
from kcompat.log.local_log import LocalLog
from kcompat.log.log_files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    index_path,
    log_path,
    offset_from_name,
    time_index_path,
    txn_index_path,
)
from kcompat.log.segment import LogSegment
from kcompat.wire.checksum import crc32c
from kcompat.wire.control_batch import MARKER_RECORD_READ, control_type
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import CRC_START, HEADER_SIZE, BatchHeader

if TYPE_CHECKING:
    from kcompat.log.leader_epoch import LeaderEpochCache
    from kcompat.log.producer_state import ProducerStateManager

log = logging.getLogger("kcompat.log")

BatchCallback = Callable[[BatchHeader], None]


def recover_segment(
    segment: LogSegment, on_batch: BatchCallback | None = None, *, sealed: bool = True
) -> tuple[int, str | None, int]:
    """Re-index `segment` from its log, cutting it at the first invalid batch.

    A sealed segment's indexes are trimmed afterwards (with the final time index entry); the active
    one keeps its preallocated room. Returns (bytes truncated, why, next offset).
    """
    segment.make_active()
    segment.reset_indexes()
    end = segment.log.size
    valid = 0
    next_offset = segment.base_offset
    reason: str | None = None
    for pos, h, data in iter_whole_batches(segment.log, 0, end):
        if h is None:
            reason = f"unreadable or incomplete batch at position {pos}"
            break
        if crc32c(data[CRC_START:]) != h.crc:
            reason = f"CRC mismatch in the batch at offset {h.base_offset}, position {pos}"
            break
        if h.base_offset < next_offset or h.last_offset_delta < 0:
            reason = f"batch at position {pos} has offset {h.base_offset}, expected at least {next_offset}"
            break
        segment.index_batch(pos, h)
        if on_batch is not None:
            on_batch(h)
        valid = pos + h.size
        next_offset = h.last_offset + 1
    truncated = end - valid
    if truncated:
        segment.log.truncate(valid)
    segment.txn_index.truncate_to(next_offset)  # aborts whose marker was cut are not aborts
    if sealed:
        segment.on_become_inactive()
    return truncated, reason, next_offset


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _remove_leftovers(directory: Path, names: list[str]) -> tuple[list[int], bool]:
    """Delete half-done files; return base offsets of complete `.log.swap` files, and whether any
    file was removed."""
    swaps = []
    removed = False
    for name in names:
        path = directory / name
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")):
            _unlink(path)
            removed = True
        elif name.endswith(SWAP_SUFFIX):
            if name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                swaps.append(offset_from_name(name))
            elif not name.endswith(TXN_INDEX_SUFFIX + SWAP_SUFFIX):
                _unlink(path)  # indexes of a swap segment are rebuilt from its log (not its aborts)
                removed = True
    return sorted(swaps), removed


def _complete_swaps(directory: Path, config: LogConfig, swaps: list[int], now_ms: int) -> None:
    for base in swaps:
        seg = LogSegment(directory, base, config, created_ms=now_ms, suffix=SWAP_SUFFIX, active=True)
        truncated, reason, next_offset = recover_segment(seg)
        if truncated:
            # A swap file is fsynced before it is renamed to .swap: damage means the disk lied.
            log.warning(
                "compaction output %s was damaged (%s): keeping the original segments", seg.log.path, reason
            )
            seg.delete()
            continue
        for name in os.listdir(directory):
            if name.endswith(LOG_SUFFIX) and base <= offset_from_name(name) < next_offset:
                old = offset_from_name(name)
                for p in _segment_files(directory, old):
                    _unlink(p)
        seg.rename_suffix(SWAP_SUFFIX, "")
        seg.offset_index.close()
        seg.time_index.close()
        seg.log.close()


def _segment_files(directory: Path, base: int) -> tuple[Path, ...]:
    return (
        log_path(directory, base),
        index_path(directory, base),
        time_index_path(directory, base),
        txn_index_path(directory, base),
    )


def _offset_indexes(directory: Path, names: list[str], base_set: set[int]) -> set[int]:
    """Base offsets whose offset index file is present; index files of no segment go."""
    indexed: set[int] = set()
    for n in names:
        if n.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
            if offset_from_name(n) not in base_set:
                _unlink(directory / n)
            elif n.endswith(INDEX_SUFFIX):
                indexed.add(offset_from_name(n))
    return indexed


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    now_ms: int,
    recovery_point: int,
    clean_shutdown: bool,
    on_batch: BatchCallback | None = None,
    names: list[str] | None = None,
) -> list[LogSegment]:
    """Open the segments of a partition directory, recovering as needed; oldest first, last one active.

    `names`: the directory's listing, when the caller has it (one listing per partition at start-up).
    """
    if names is None:
        names = os.listdir(directory)
    swaps, removed = _remove_leftovers(directory, names)
    _complete_swaps(directory, config, swaps, now_ms)
    if swaps or removed:
        names = os.listdir(directory)
    bases = sorted(offset_from_name(n) for n in names if n.endswith(LOG_SUFFIX))
    base_set = set(bases)
    indexed = _offset_indexes(directory, names, base_set)

    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        active = i == len(bases) - 1
        seg = LogSegment(directory, base, config, created_ms=now_ms, active=active)
        # A missing time index is an empty one (as Kafka's loader takes it), and so is a missing
        # offset index when the segment is too small to have had an entry: an index file is made
        # with its first entry (index.py), and a close writes none without entries.
        had_indexes = base in indexed or seg.size <= config.index_interval_bytes
        cut: tuple[int, str | None, int] | None = None
        if not had_indexes:
            cut = _rebuild(seg, "its index files are missing", sealed=not active)
        else:
            try:
                seg.offset_index.sanity_check(seg.size)
                if seg.size:
                    seg.time_index.sanity_check(seg.read_next_offset() - 1)
            except CorruptIndex as e:
                cut = _rebuild(seg, str(e), sealed=not active)
        segments.append(seg)
        if cut is not None:
            # The log ends at the cut: later segments would leave a hole of lost offsets behind them.
            later = bases[i + 1 :]
            for b in later:
                for p in _segment_files(directory, b):
                    _unlink(p)
            _report_cut(seg, *cut, dropped=len(later), during="rebuilding its indexes")
            break

    if not clean_shutdown and segments:
        _recover_unflushed(segments, recovery_point, on_batch)
    if segments:
        segments[-1].make_active()
    return segments


def _rebuild(seg: LogSegment, why: str, *, sealed: bool) -> tuple[int, str | None, int] | None:
    """Re-index `seg` from its log; (bytes truncated, why, next offset) if its tail was cut."""
    log.info("rebuilding the indexes of %s: %s", seg.log.path, why)
    truncated, reason, next_offset = recover_segment(seg, sealed=sealed)
    return (truncated, reason, next_offset) if truncated else None


def _report_cut(
    seg: LogSegment, truncated: int, reason: str | None, next_offset: int, *, dropped: int, during: str = ""
) -> None:
    """The one line that says what a recovery cut."""
    log.warning(
        "recovery of %s: %s%s; truncated %d bytes from offset %d%s",
        seg.log.path.parent.name,
        reason,
        f" in {seg.log.path.name} ({during})" if during else "",
        truncated,
        next_offset,
        f" and deleted {dropped} later segment(s)" if dropped else "",
    )


def _recover_unflushed(
    segments: list[LogSegment], recovery_point: int, on_batch: BatchCallback | None
) -> None:
    start = 0
    for i, seg in enumerate(segments):
        if seg.base_offset <= recovery_point:
            start = i
    for i in range(start, len(segments)):
        seg = segments[i]
        truncated, reason, next_offset = recover_segment(seg, on_batch, sealed=i < len(segments) - 1)
        if truncated:
            dropped = segments[i + 1 :]
            for later in dropped:
                later.delete()
            del segments[i + 1 :]
            _report_cut(seg, truncated, reason, next_offset, dropped=len(dropped))
            break


def load_local_log(
    directory: Path,
    topic: str,
    partition: int,
    config: LogConfig,
    epochs: LeaderEpochCache,
    names: list[str],
    *,
    now_ms: int,
    recovery_point: int,
    log_start_offset: int,
    clean_shutdown: bool,
) -> LocalLog:
    """The LocalLog of a partition directory, its segments opened and recovered (`names`: the
    directory's listing, empty for a directory just made: nothing to load). `epochs` learns
    the leader epoch of every batch recovery re-validates. A log without segments gets one empty
    active segment at `log_start_offset`."""

    def on_recovered(h: BatchHeader) -> None:
        if h.partition_leader_epoch > epochs.latest_epoch:
            epochs.assign(h.partition_leader_epoch, h.base_offset)

    segments = (
        []
        if not names
        else load_segments(
            directory,
            config,
            now_ms=now_ms,
            recovery_point=recovery_point,
            clean_shutdown=clean_shutdown,
            on_batch=on_recovered,
            names=names,
        )
    )
    if not segments:
        segments = [LogSegment(directory, log_start_offset, config, created_ms=now_ms, active=True)]
    return LocalLog(directory, topic, partition, config, segments, now_ms=now_ms)


def rebuild_producer_state(
    ps: ProducerStateManager,
    local: LocalLog,
    log_start_offset: int,
    names: list[str] | None = None,
    *,
    clean_shutdown: bool = False,
) -> None:
    """Load the newest producer snapshot and replay batch headers from it to the log end (Kafka's
    rebuildProducerState: at load, and after a truncation). `names`: the directory's listing, when
    the caller has it."""
    leo = local.log_end_offset
    start = ps.load(log_start_offset, leo, names, clean_shutdown=clean_shutdown)
    for seg in local.segments_from(start):
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
    ps.map_end_offset = leo
