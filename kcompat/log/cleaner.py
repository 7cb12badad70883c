"""Log compaction for cleanup.policy=compact (and compact,delete), as Kafka's LogCleaner does it.

One pass over a PartitionLog:
  1. cleanable range: whole sealed segments below the first uncleanable offset (the active
     segment's base, the first segment younger than min.compaction.lag.ms, the first open
     transaction); the dirty part starts at `first_dirty_offset` (cleaner-offset-checkpoint);
  2. offset map: latest offset of every key in the dirty part;
  3. each group of consecutive segments (at most segment.bytes together) is recopied keeping a
     record only if no later record has its key, dropping tombstones whose batch's delete horizon
     has passed. A batch whose records all survive is copied byte for byte; otherwise it is rebuilt
     with the same base offset, last offset delta, producer fields and codec (offsets never move).
     A batch losing all its records is kept empty if it is its producer's last (so the producer's
     sequence survives, implementation.html "On compaction"). A batch keeping tombstones without a
     delete horizon gets one: baseTimestamp = now + delete.retention.ms, attribute bit 6 (KIP-534);
     a later pass after that time removes them;
  4. the swap, crash-safe as Kafka's: output written to `<base>.log.cleaned` (+ indexes) and
     fsynced, renamed to `.swap`; then, under the log's lock (the only time appends wait), the old
     segments are replaced in the segment list, renamed `.deleted`, the `.swap` files renamed into
     place and the old files unlinked. A crash leaves either `.cleaned` files (dropped on restart)
     or `.swap` files (completed on restart, see recovery.py).
Transactions: the cleanable range ends at the first open transaction; batches of aborted
transactions (the `.txnindex` ranges) are dropped and never enter the offset map. A COMMIT/ABORT
marker goes once no batch of its transaction is left (as Kafka's CleanedTransactionMetadata,
though Kafka waits for a pass that reads none; here the pass that drops the last one counts), in
two steps as a tombstone does: that pass gives it a delete horizon (now + delete.retention.ms,
so a reader that saw its data also sees it end), a pass after that time removes it and its
`.txnindex` entry. While any batch of
the transaction remains (an empty one kept as its producer's last included), the marker stays,
so a log rebuilt from scratch never finds a transaction without its end.

Readers are never blocked: they hold the old segment list and descriptors, which stay valid.
"""

from __future__ import annotations

import itertools
import logging
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kcompat.log.batch_scan import iter_whole_batches
from kcompat.log.errors import LogError
from kcompat.log.log_files import CLEANED_SUFFIX, SWAP_SUFFIX, fsync_dir
from kcompat.log.partition_log import PartitionLog
from kcompat.log.record_view import RecordView, iter_records
from kcompat.log.segment import BatchPlacement, LogSegment
from kcompat.log.txn_index import marker_kind
from kcompat.wire.checksum import crc32c
from kcompat.wire.compression import compress
from kcompat.wire.control_batch import ABORT
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import (
    CRC_START,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    read_header,
)

log = logging.getLogger("kcompat.log")

_HEADER = struct.Struct(">qiibIhiqqqhii")
WRITE_CHUNK = 1024 * 1024
MAX_OFFSET_SPAN = 0x7FFFFFFF


@dataclass(slots=True)
class CleanStats:
    segments_cleaned: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0


def delete_horizon(h: BatchHeader) -> int | None:
    return h.base_timestamp if h.attributes & DELETE_HORIZON_MASK else None


def build_batch(h: BatchHeader, records: list[RecordView], *, base_timestamp: int, horizon: bool) -> bytes:
    """A v2 batch with `h`'s offsets and producer fields holding `records`, CRC computed."""
    payload = b"".join(r.encode(base_timestamp) for r in records)
    if h.compression:
        payload = compress(h.compression, payload)
    attributes = h.attributes | DELETE_HORIZON_MASK if horizon else h.attributes & ~DELETE_HORIZON_MASK
    max_ts = h.max_timestamp if h.log_append_time or not records else max(r.timestamp for r in records)
    size = HEADER_SIZE + len(payload)
    buf = bytearray(size)
    _HEADER.pack_into(
        buf,
        0,
        h.base_offset,
        size - LOG_OVERHEAD,
        h.partition_leader_epoch,
        2,
        0,
        attributes,
        h.last_offset_delta,
        base_timestamp,
        max_ts,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        len(records),
    )
    buf[HEADER_SIZE:] = payload
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)


class MarkerTracker:
    """Within one pass, in offset order: which producers' transactions keep batches, so their
    markers must stay (Kafka's ongoingCommittedTxns / ongoingAbortedTxns)."""

    def __init__(self) -> None:
        self.with_batches: set[int] = set()  # producers with a batch kept since their last marker
        self.removed_aborts: set[tuple[int, int]] = set()  # (producer id, marker offset) dropped

    def on_batch(self, h: BatchHeader, kept: bool) -> None:
        if kept and h.is_transactional:
            self.with_batches.add(h.producer_id)

    def marker_is_empty(self, h: BatchHeader) -> bool:
        """A marker read: True when this pass keeps no batch of its transaction."""
        if h.producer_id not in self.with_batches:
            return True
        self.with_batches.discard(h.producer_id)
        return False


class LogCleaner:
    """Stateless between passes: progress lives on the PartitionLog (first_dirty_offset)."""

    def first_uncleanable_offset(self, plog: PartitionLog, now_ms: int) -> int:
        segs = plog.segments
        limit = segs[-1].base_offset
        lag = plog.config.min_compaction_lag_ms
        if lag > 0:
            for s in segs[:-1]:
                if s.base_offset >= plog.first_dirty_offset and s.largest_timestamp > now_ms - lag:
                    limit = min(limit, s.base_offset)
                    break
        unstable = plog.producer_state.first_unstable_offset()
        if unstable is not None:
            limit = min(limit, unstable)
        return limit

    def needs_cleaning(self, plog: PartitionLog, now_ms: int) -> bool:
        """Kafka's selection: dirty ratio over min.cleanable.dirty.ratio, max.compaction.lag.ms passed,
        or a delete horizon passed."""
        cfg = plog.config
        if not cfg.compact:
            return False
        if plog.tombstone_horizon_ms is not None and now_ms >= plog.tombstone_horizon_ms:
            return True
        limit = self.first_uncleanable_offset(plog, now_ms)
        first_dirty = max(plog.first_dirty_offset, plog.log_start_offset)
        clean = dirty = 0
        oldest_dirty_ts: int | None = None
        segs = plog.segments
        for s, nxt in itertools.pairwise(segs):
            if nxt.base_offset > limit:
                break
            if nxt.base_offset <= first_dirty:
                clean += s.size
            else:
                dirty += s.size
                if oldest_dirty_ts is None and s.rolling_based_timestamp is not None:
                    oldest_dirty_ts = s.rolling_based_timestamp
        if dirty == 0:
            return False
        if oldest_dirty_ts is not None and now_ms - oldest_dirty_ts > cfg.max_compaction_lag_ms:
            return True
        return dirty / (clean + dirty) >= cfg.min_cleanable_dirty_ratio

    def clean_due(self, logs: Iterable[PartitionLog], now_ms: int) -> int:
        """Every compacted log past its dirty ratio, max.compaction.lag.ms or delete horizon: the
        segments cleaned, 0 telling the caller to back off log.cleaner.backoff.ms (CleanerThread)."""
        cleaned = 0
        for plog in logs:
            try:
                stats = self.maybe_clean(plog, now_ms) if plog.config.compact else None
            except (LogError, OSError):  # a disk error, or the topic was deleted meanwhile
                log.exception("compaction of %s-%d failed", plog.topic, plog.partition)
                continue
            cleaned += stats.segments_cleaned if stats is not None else 0
        return cleaned

    def maybe_clean(self, plog: PartitionLog, now_ms: int) -> CleanStats | None:
        return self.clean(plog, now_ms) if self.needs_cleaning(plog, now_ms) else None

    def clean(self, plog: PartitionLog, now_ms: int) -> CleanStats:
        """One compaction pass over the sealed part of `plog` (safe to run beside appends and reads)."""
        stats = CleanStats()
        with plog.lock:
            segs = list(plog.segments)
            generation = plog.truncations
            limit = self.first_uncleanable_offset(plog, now_ms)
            first_dirty = max(plog.first_dirty_offset, plog.log_start_offset)
            last_offsets = {pid: e.last_offset for pid, e in plog.producer_state.producers.items()}
            aborted = _aborted_ranges(segs)
        cleanable = [s for s, nxt in itertools.pairwise(segs) if nxt.base_offset <= limit]
        if not cleanable:
            return stats
        offset_map = self._build_offset_map(cleanable, first_dirty, aborted)
        horizon_after = now_ms + plog.config.delete_retention_ms
        earliest_horizon: int | None = None
        markers = MarkerTracker()
        for group in self._group(cleanable, plog):
            cleaned, horizon = self._clean_group(
                plog, group, offset_map, last_offsets, now_ms, horizon_after, stats, aborted, markers
            )
            if horizon is not None:
                earliest_horizon = horizon if earliest_horizon is None else min(earliest_horizon, horizon)
            if not self._swap(plog, group, cleaned, generation):
                log.info("compaction of %s-%d gave up: the log changed under it", plog.topic, plog.partition)
                return stats
            stats.segments_cleaned += len(group)
        with plog.lock:
            if plog.truncations == generation:
                plog.first_dirty_offset = max(plog.first_dirty_offset, segs[len(cleanable)].base_offset)
            plog.tombstone_horizon_ms = earliest_horizon
        return stats

    def _build_offset_map(
        self, cleanable: list[LogSegment], first_dirty: int, aborted: AbortedRanges | None = None
    ) -> dict[bytes, int]:
        aborted = aborted or {}
        offset_map: dict[bytes, int] = {}
        for seg in cleanable:
            for _, h, data in iter_whole_batches(seg.log, 0, seg.size):
                if h is None:
                    break
                if h.is_control or h.last_offset < first_dirty or _is_aborted(h, aborted):
                    continue  # an aborted record never supersedes a committed one
                try:
                    records = iter_records(data, h)
                except DecodeError:
                    continue
                for r in records:
                    if r.key is not None and r.offset >= first_dirty:
                        offset_map[r.key] = r.offset
        return offset_map

    def _group(self, cleanable: list[LogSegment], plog: PartitionLog) -> list[list[LogSegment]]:
        groups: list[list[LogSegment]] = []
        for seg in cleanable:
            if groups:
                g = groups[-1]
                size = sum(s.size for s in g) + seg.size
                span = seg.read_next_offset() - g[0].base_offset
                if size <= plog.config.segment_bytes and span <= MAX_OFFSET_SPAN:
                    g.append(seg)
                    continue
            groups.append([seg])
        return groups

    def _clean_group(
        self,
        plog: PartitionLog,
        group: list[LogSegment],
        offset_map: dict[bytes, int],
        last_offsets: dict[int, int],
        now_ms: int,
        horizon_after: int,
        stats: CleanStats,
        aborted: AbortedRanges | None = None,
        markers: MarkerTracker | None = None,
    ) -> tuple[LogSegment, int | None]:
        aborted = aborted or {}
        markers = markers or MarkerTracker()
        base = group[0].base_offset
        cleaned = LogSegment(
            plog.directory, base, plog.config, created_ms=now_ms, suffix=CLEANED_SUFFIX, active=True
        )
        if cleaned.size:  # a leftover from a crashed pass
            cleaned.log.truncate(0)
            cleaned.reset_indexes()
        out = bytearray()
        placements: list[BatchPlacement] = []
        earliest_horizon: int | None = None

        def emit(batch: bytes | memoryview, h: BatchHeader) -> None:
            # An empty batch keeps its header's timestamp but has no record carrying it: it must not
            # become the time index's answer (Kafka's tools check entries against record timestamps).
            max_ts = h.max_timestamp if h.records_count else -1
            placements.append((len(out), len(batch), h.last_offset, max_ts))
            out.extend(batch)
            if len(out) >= WRITE_CHUNK:
                flush_out()

        def flush_out() -> None:
            if out:
                cleaned.append(out, placements)
                stats.bytes_written += len(out)
                out.clear()
                placements.clear()

        for seg in group:
            stats.bytes_read += seg.size
            for _, h, data in iter_whole_batches(seg.log, 0, seg.size):
                if h is None:
                    break
                if h.is_control:
                    kept_marker, h_ms = _clean_marker(data, h, markers, now_ms, horizon_after, stats)
                    earliest_horizon = _earlier(earliest_horizon, h_ms)
                    if kept_marker is not None:
                        emit(kept_marker, read_header(kept_marker) if kept_marker is not data else h)
                    continue
                if _is_aborted(h, aborted):
                    # Aborted data goes (as in Kafka); an empty batch stays if it is its producer's last.
                    stats.records_removed += h.records_count
                    last = last_offsets.get(h.producer_id) == h.last_offset
                    markers.on_batch(h, kept=last)
                    if last:
                        empty = build_batch(h, [], base_timestamp=h.max_timestamp, horizon=False)
                        emit(empty, read_header(empty))
                    continue
                kept, kept_h, h_ms = _clean_batch(
                    data, h, offset_map, last_offsets, now_ms, horizon_after, stats
                )
                earliest_horizon = _earlier(earliest_horizon, h_ms)
                markers.on_batch(h, kept=kept is not None)
                if kept is not None:
                    emit(kept, kept_h or h)
        flush_out()
        _copy_aborts(group, cleaned, markers.removed_aborts)
        cleaned.on_become_inactive()
        cleaned.flush()
        return cleaned, earliest_horizon

    def _swap(
        self, plog: PartitionLog, group: list[LogSegment], cleaned: LogSegment, generation: int
    ) -> bool:
        cleaned.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(plog.directory)
        with plog.lock:
            current = list(plog.segments)
            ids = [id(s) for s in current]
            if plog.truncations != generation or any(id(s) not in ids for s in group):
                cleaned.delete()
                return False
            for old in group:
                old.rename_suffix("", ".deleted")
            cleaned.rename_suffix(SWAP_SUFFIX, "")
            plog.local_log.replace_segments(group, cleaned)
        fsync_dir(plog.directory)
        for old in group:
            old.delete()
        return True


AbortedRanges = dict[int, list[tuple[int, int]]]  # producer id -> (first offset, marker offset)


def _aborted_ranges(segments: list[LogSegment]) -> AbortedRanges:
    out: AbortedRanges = {}
    for seg in segments:
        for t in seg.txn_index.entries:
            out.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
    return out


def _copy_aborts(group: list[LogSegment], cleaned: LogSegment, removed: set[tuple[int, int]]) -> None:
    """The aborts whose markers are kept (an entry names its marker's offset as last_offset)."""
    cleaned.txn_index.reset()
    for seg in group:
        for t in seg.txn_index.entries:
            if (t.producer_id, t.last_offset) not in removed:
                cleaned.txn_index.append(t)


def _clean_marker(
    data: memoryview,
    h: BatchHeader,
    markers: MarkerTracker,
    now_ms: int,
    horizon_after: int,
    stats: CleanStats,
) -> tuple[bytes | memoryview | None, int | None]:
    """What the cleaned log keeps of a COMMIT/ABORT marker (None: nothing), and its delete horizon
    while it waits for one (None: it stays for good, or goes now)."""
    if not markers.marker_is_empty(h):
        return data, None
    horizon = delete_horizon(h)
    if horizon is None:  # its transaction is empty: it goes after delete.retention.ms
        try:
            records = iter_records(data, h)
        except DecodeError:
            return data, None
        return build_batch(h, list(records), base_timestamp=horizon_after, horizon=True), horizon_after
    if now_ms < horizon:
        return data, horizon
    try:
        if marker_kind(data, h) == ABORT:
            markers.removed_aborts.add((h.producer_id, h.base_offset))
    except LogError:
        return data, None
    stats.records_removed += h.records_count
    return None, None


def _earlier(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _is_aborted(h: BatchHeader, aborted: AbortedRanges) -> bool:
    if not h.is_transactional:
        return False
    return any(first <= h.base_offset < last for first, last in aborted.get(h.producer_id, ()))


def _clean_batch(
    data: memoryview,
    h: BatchHeader,
    offset_map: dict[bytes, int],
    last_offsets: dict[int, int],
    now_ms: int,
    horizon_after: int,
    stats: CleanStats,
) -> tuple[bytes | memoryview | None, BatchHeader | None, int | None]:
    """What the cleaned log keeps of one data batch: the batch as is (header None), a rebuilt one
    with its header, or None; and the delete horizon its kept tombstones carry (None: no tombstone)."""
    try:
        records = iter_records(data, h)
    except DecodeError:
        return data, None, None  # never lose what we cannot read
    horizon = delete_horizon(h)
    retain_deletes = horizon is None or now_ms < horizon
    kept = []
    for r in records:
        if r.key is None:
            continue
        if r.offset < offset_map.get(r.key, -1):
            continue
        if not r.has_value and not retain_deletes:
            stats.tombstones_removed += 1
            continue
        kept.append(r)
    stats.records_removed += len(records) - len(kept)
    has_tombstones = any(not r.has_value for r in kept)
    set_horizon = has_tombstones and horizon is None
    h_ms = None
    if has_tombstones:
        h_ms = horizon_after if set_horizon else horizon
        assert h_ms is not None
    if len(kept) == len(records) and not set_horizon:
        return data, None, h_ms
    if kept:
        new_base_ts = horizon_after if set_horizon else (horizon if horizon is not None else h.base_timestamp)
        batch = build_batch(h, kept, base_timestamp=new_base_ts, horizon=set_horizon or horizon is not None)
        return batch, read_header(batch), h_ms
    if h.producer_id >= 0 and last_offsets.get(h.producer_id) == h.last_offset:
        empty = build_batch(h, [], base_timestamp=h.max_timestamp, horizon=False)
        return empty, read_header(empty), h_ms
    return None, None, h_ms
