"""PartitionLog: one topic-partition's log (Kafka's UnifiedLog), over a LocalLog of segments.

What it decides, as UnifiedLog does, while its LocalLog (local_log.py) keeps the segments, writes,
reads and fsyncs them:

* appends: framing and size checks, idempotent-producer checks (a retry of one of a producer's
  last 5 batches gets its original offsets), offsets and the leader epoch patched in, producer
  state and the leader epoch cache updated, the roll and flush policy (segment.*, flush.*);
  a follower appends the leader's batches as they are (`append_as_follower`);
* offsets:  (first segment's base) <= log_start_offset <= high_watermark <= log_end_offset.
  A single node is its own ISR: everything appended is committed, the high watermark is the log
  end. A replicated partition's high watermark comes from its leader, or on the leader from the
  ISR (`set_high_watermark`). read_committed Fetches read below the last stable offset;
* what removes data: retention (retention.ms / retention.bytes), DeleteRecords (the log start
  offset moves up), truncation of a follower to its leader (producer state rebuilt from the log,
  leader epochs cut), a restart at another offset, topic deletion.

Threads. Appends, reads and truncation come from the server's event loop thread; retention,
flushing and compaction may run on a worker thread. Writers take `self.lock` only for short steps
(an append is a write() into the page cache; compaction holds it only to swap segments). Readers
take no lock: LocalLog's segment list is copy-on-write (see local_log.py).

Durability follows flush.messages / flush.ms (by default: the OS decides). `flush()` fsyncs and
advances the recovery point; restarts after an unclean stop re-validate everything after it.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from kcompat.log.batch_validation import AppendInfo as AppendInfo  # re-exported: what append returns
from kcompat.log.batch_validation import (
    assign_offsets,
    check_follower_offsets,
    check_sequences,
    frame_batches,
)
from kcompat.log.config import LogConfig
from kcompat.log.errors import LogMoved, OffsetOutOfRange
from kcompat.log.leader_epoch import LeaderEpochCache
from kcompat.log.log_file import FetchSlice
from kcompat.log.log_files import fsync_file, make_dir
from kcompat.log.producer_state import ProducerStateManager
from kcompat.log.recovery import load_local_log, rebuild_producer_state
from kcompat.log.retention import below_log_start, deletable_segments
from kcompat.log.segment import LogSegment
from kcompat.log.timestamp_lookup import max_timestamp_offset, offset_for_timestamp
from kcompat.log.txn_index import AbortedTxn, marker_kind
from kcompat.wire.record_batch import NO_PRODUCER_ID, BatchHeader

log = logging.getLogger("kcompat.log")


class PartitionLog:
    # Slots: one of these per partition, thousands of them in a broker.
    __slots__ = (
        "_log_start_offset",
        "_snapshot_unsynced",
        "checkpointed_hw",
        "first_dirty_offset",
        "leader_epoch_cache",
        "local_log",
        "lock",
        "partition",
        "producer_state",
        "replicated_hw",
        "retired",
        "tombstone_horizon_ms",
        "topic",
        "truncations",
    )

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        now_ms: int,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
    ) -> None:
        """Open (recovering after an unclean stop) or create the log in `directory`, as Kafka's
        UnifiedLog.apply does with its LogLoader: segments first, then leader epochs and producer
        state made to agree with them."""
        self.topic = topic
        self.partition = partition
        self.lock = threading.RLock()
        self.replicated_hw: int | None = None  # set in cluster mode (set_high_watermark)
        self.checkpointed_hw: int | None = None  # from replication-offset-checkpoint (manager.py)
        created = make_dir(directory)  # a new partition has nothing to load: its dir and one file
        self.leader_epoch_cache = LeaderEpochCache(directory)
        self.producer_state = ProducerStateManager(
            directory, producer_id_expiration_ms=config.producer_id_expiration_ms
        )
        cache = self.leader_epoch_cache
        names = [] if created else os.listdir(directory)
        self.local_log = load_local_log(
            directory,
            topic,
            partition,
            config,
            cache,
            names,
            now_ms=now_ms,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
        )
        self._log_start_offset = max(log_start_offset, self.local_log.segments[0].base_offset)
        if self._log_start_offset > self.local_log.log_end_offset:
            # The checkpoint is ahead of the data (everything after it was lost): start empty there.
            self._truncate_fully_and_start_at(self._log_start_offset, now_ms)
        cache.truncate_from_end(self.local_log.log_end_offset)
        cache.truncate_from_start(self._log_start_offset)
        rebuild_producer_state(
            self.producer_state,
            self.local_log,
            self._log_start_offset,
            names,
            clean_shutdown=clean_shutdown and not created,
        )
        self._snapshot_unsynced: Path | None = None  # taken at a roll, fsynced by the next flush
        self.first_dirty_offset = self._log_start_offset  # compaction progress (cleaner-offset-checkpoint)
        self.truncations = 0  # bumped when data is cut in place, so a concurrent clean knows to give up
        self.tombstone_horizon_ms: int | None = None  # earliest delete horizon the cleaner has set
        self.retired = False  # replaced by its copy in another log dir: appends go there (LogMoved)

    # --- offsets ---

    @property
    def directory(self) -> Path:
        return self.local_log.directory

    @property
    def config(self) -> LogConfig:
        return self.local_log.config

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self.local_log.segments

    @property
    def active_segment(self) -> LogSegment:
        return self.local_log.active_segment

    @property
    def size(self) -> int:
        return self.local_log.size

    @property
    def recovery_point(self) -> int:
        return self.local_log.recovery_point

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self.local_log.log_end_offset

    @property
    def high_watermark(self) -> int:
        hw = self.replicated_hw
        leo = self.local_log.log_end_offset
        return leo if hw is None else min(hw, leo)

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the high watermark: below it every
        transaction is decided, so a read_committed Fetch reads below it (`read(max_offset=)`) and
        gets the aborted transactions of the range (`aborted_transactions`) to drop them itself."""
        first_unstable = self.producer_state.first_unstable_offset()
        hw, leo = self.replicated_hw, self.local_log.log_end_offset
        hw = leo if hw is None else min(hw, leo)
        return hw if first_unstable is None else min(first_unstable, hw)

    def update_config(self, config: LogConfig) -> None:
        """Apply a changed topic config (AlterConfigs) from the next append, roll or retention on."""
        with self.lock:
            self.local_log.update_config(config)

    # --- append ---

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        verify_crc: bool = False,
        header: BatchHeader | None = None,
    ) -> AppendInfo:
        """Append one or more validated v2 batches; offsets and the leader epoch are patched in.

        A bytearray (or writable memoryview) is patched in place; other buffers are copied once.
        The batches must already have passed the produce validator: only their framing (and with
        `verify_crc`, their CRCs) is checked here; `header` is the one batch's, as validate_batch read it.
        Idempotent batches are checked against the producer state first; a retry of one of the last 5
        batches returns the original offsets with duplicate=True and writes nothing.

        Raises CorruptRecord, MessageTooLarge, RecordBatchTooLarge, InvalidProducerEpoch,
        OutOfOrderSequence, or KafkaStorageError (after which the log is as it was before).
        """
        mutable = isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly)
        buf = memoryview(records)
        cfg = (local := self.local_log).config
        headers = frame_batches(buf, cfg, verify_crc, header)
        total = len(buf)
        with self.lock:
            if self.retired:
                raise LogMoved(f"{self.topic}-{self.partition} moved to another log dir")
            dup = check_sequences(self.producer_state, headers, self._log_start_offset)
            if dup is not None:
                return dup
            base = local.log_end_offset
            data, placements, patched, max_ts, offset = assign_offsets(
                buf, mutable, headers, base, leader_epoch
            )
            seg = local.active_segment
            if seg.should_roll(total, max_ts, offset - 1, now_ms):
                seg = self.roll(now_ms)
            if leader_epoch > self.leader_epoch_cache.latest_epoch:
                # Before the data (as Kafka assigns it on becoming leader): a checkpoint the disk
                # refuses then fails the append with nothing written, not after the records landed.
                self.leader_epoch_cache.assign(leader_epoch, base)
            local.append(data, placements, offset)
            ps = self.producer_state
            for ph, kind in patched:
                if kind < 0:
                    ps.update(ph)
                elif (aborted := ps.update_control(ph, kind)) is not None:
                    seg.txn_index.append(aborted)
            ps.map_end_offset = offset
            if local.unflushed_messages >= cfg.flush_messages or now_ms - local.last_flush_ms >= cfg.flush_ms:
                self.flush(now_ms=now_ms)
            append_time = now_ms if cfg.message_timestamp_type == "LogAppendTime" else -1
            return AppendInfo(base, offset - 1, append_time, self._log_start_offset, max_ts, total)

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, *, now_ms: int, gaps: bool = False
    ) -> int:
        """Append whole batches fetched from the leader as they are; the new log end offset.

        Offsets and partition leader epochs are checked, never reassigned: the first batch must
        start at the log end offset and each next one right after the previous. The leader epoch
        cache learns every new epoch at its first batch, and producer state is updated from each
        batch so that this replica, once leader, answers an idempotent retry as the old leader
        would have. No duplicate check: the leader made it. `gaps`: a copy of another log dir's log.

        Raises CorruptRecord (framing, a CRC, offsets that do not continue the log),
        RecordBatchTooLarge, or KafkaStorageError (after which the log is as it was before).
        """
        buf = memoryview(records)
        local = self.local_log
        cfg = local.config
        headers = frame_batches(buf, cfg, True)
        total = len(buf)
        with self.lock:
            if self.retired:
                raise LogMoved(f"{self.topic}-{self.partition} moved to another log dir")
            placements, max_ts, offset = check_follower_offsets(headers, local.log_end_offset, gaps)
            if local.active_segment.should_roll(total, max_ts, offset - 1, now_ms):
                self.roll(now_ms)
            cache = self.leader_epoch_cache
            for _, h in headers:  # before the data, as append does
                if h.partition_leader_epoch > cache.latest_epoch:
                    cache.assign(h.partition_leader_epoch, h.base_offset)
            local.append(buf, placements, offset)
            ps = self.producer_state
            for pos, h in headers:
                if h.producer_id == NO_PRODUCER_ID:
                    continue
                if not h.is_control:
                    ps.update(h)
                # A marker closes its transaction here too: an abort goes into the .txnindex, so
                # that read_committed fetches from this copy skip what the leader's skip.
                elif (aborted := ps.update_control(h, marker_kind(buf[pos : pos + h.size], h))) is not None:
                    local.active_segment.txn_index.append(aborted)
            ps.map_end_offset = offset
            if local.unflushed_messages >= cfg.flush_messages or now_ms - local.last_flush_ms >= cfg.flush_ms:
                self.flush(now_ms=now_ms)
            return offset

    # --- roll and flush ---

    def roll(self, now_ms: int) -> LogSegment:
        """Start a new segment at the log end offset (no-op if the active segment is empty), with a
        producer state snapshot at the boundary (Kafka takes one on roll: recovery replays less)."""
        with self.lock:  # re-entered when an append rolls
            old = self.local_log.active_segment
            new = self.local_log.roll(now_ms)
            if new is old:
                return new
            snapshot = self.producer_state.take_snapshot_at_roll()  # fsynced by the next flush
            if snapshot is not None:
                self._snapshot_unsynced = snapshot
            return new

    def flush(self, *, now_ms: int | None = None) -> None:
        """fsync everything written so far and move the recovery point to the log end."""
        local = self.local_log
        with self.lock:
            upto = local.log_end_offset
            segments = local.unflushed_segments()
            snap, self._snapshot_unsynced = self._snapshot_unsynced, None
            local.unflushed_messages = 0
            if now_ms is not None:
                local.last_flush_ms = now_ms
        self._sync(segments, snap, upto)

    def maybe_flush(self, now_ms: int) -> None:
        """Background hook: flush when flush.ms has passed, or when rolled segments are unflushed."""
        local = self.local_log
        if now_ms - local.last_flush_ms >= local.config.flush_ms:
            self.flush(now_ms=now_ms)
        elif local.recovery_point < local.active_segment.base_offset:
            with self.lock:
                upto = local.active_segment.base_offset
                segments = local.unflushed_segments(active=False)
                snap, self._snapshot_unsynced = self._snapshot_unsynced, None
            self._sync(segments, snap, upto)

    def _sync(self, segments: list[LogSegment], snapshot: Path | None, upto: int) -> None:
        """fsync (outside the lock) the segments, the producer snapshot of the last roll and the
        leader epochs; only then may the recovery point say that everything below `upto` is safe."""
        for s in segments:
            s.flush()
        if snapshot is not None:
            fsync_file(snapshot)
        self.leader_epoch_cache.sync()
        self.local_log.mark_flushed(upto)

    # --- reads ---

    def read(
        self, offset: int, max_bytes: int, *, min_one_batch: bool = True, max_offset: int | None = None
    ) -> FetchSlice:
        """Whole batches from the one holding `offset`, up to `max_bytes` (the first batch may exceed it)
        and, with `max_offset` (a batch boundary: the LSO for read_committed), only batches below it.

        `offset` must be in [log_start_offset, log_end_offset], else OffsetOutOfRange; at the log
        end offset the slice is empty. See LocalLog.read for what it costs.
        """
        local = self.local_log
        leo = local.log_end_offset
        if offset < self._log_start_offset or offset > leo:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self._log_start_offset}, {leo}] of {self.topic}-{self.partition}"
            )
        return local.read(offset, max_bytes, min_one_batch, max_offset)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch from `fetch_offset` below `upper_bound` needs."""
        return self.local_log.collect_aborted_transactions(fetch_offset, upper_bound)

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) from the leader epoch cache."""
        return self.leader_epoch_cache.end_offset_for_epoch(epoch, self.local_log.log_end_offset)

    end_offset_for_epoch = epoch_end_offset

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp` (ListOffsets), or None."""
        return offset_for_timestamp(self.local_log.segments, timestamp, self._log_start_offset)

    def max_timestamp_offset(self) -> tuple[int, int]:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3); (-1, -1) if none."""
        return max_timestamp_offset(self.local_log.segments)

    def verify(self) -> list[str]:
        """Problems found by re-reading every batch (CRC, offsets); empty when the log is sound."""
        return self.local_log.verify()

    # --- the high watermark of a replicated partition ---

    def set_high_watermark(self, offset: int) -> int:
        """Make this a replicated log with high watermark `offset` (at most the log end); the new value."""
        hw = max(min(offset, self.local_log.log_end_offset), self._log_start_offset)
        self.replicated_hw = hw
        return hw

    def start_replicated(self) -> None:
        """Become a replicated log, if not yet: its high watermark where the last run checkpointed
        it, else at the log start (Kafka's createLogIfNotExists)."""
        if self.replicated_hw is None:
            hw = self.checkpointed_hw
            self.set_high_watermark(self._log_start_offset if hw is None else hw)

    # --- what removes data ---

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (-1: the high watermark).

        Whole segments below it are deleted now. Returns the new log start offset.
        """
        with self.lock:
            leo = self.local_log.log_end_offset
            if offset == -1:
                offset = leo
            if offset < 0 or offset > leo:
                raise OffsetOutOfRange(f"cannot delete records before {offset}: the high watermark is {leo}")
            if offset > self._log_start_offset:
                self._advance_log_start(offset)
            self._delete_segments(below_log_start(self.local_log.segments, self._log_start_offset))
            return self._log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        self._log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.truncate_head(offset)
        self.first_dirty_offset = max(self.first_dirty_offset, offset)

    def _delete_segments(self, doomed: list[LogSegment]) -> None:
        """Delete whole segments (caller holds the lock); the log start moves up to the first one left."""
        if not doomed:
            return
        ids = {id(s) for s in doomed}
        first_left = next(s for s in self.local_log.segments if id(s) not in ids)
        if first_left.base_offset > self._log_start_offset:
            self._advance_log_start(first_left.base_offset)
        self.local_log.remove_segments(doomed)

    def run_retention(self, now_ms: int) -> int:
        """Delete old segments by retention.ms / retention.bytes (cleanup.policy delete) and below the
        log start offset (any policy). Returns the number of segments deleted."""
        with self.lock:
            local = self.local_log
            segs = local.segments
            doomed = deletable_segments(
                segs, local.log_end_offset, self._log_start_offset, local.config, now_ms
            )
            if doomed:
                if len(doomed) == len(segs):
                    self.roll(now_ms)  # the log keeps an active segment
                self._delete_segments(doomed)
            self.producer_state.remove_expired(now_ms)
            return len(doomed)

    def truncate_to(self, offset: int, *, now_ms: int = 0) -> None:
        """Remove everything at and after `offset` (whole batches; the log end may end up below it)."""
        with self.lock:
            if offset >= self.local_log.log_end_offset:
                return
            self.truncations += 1
            if offset < self._log_start_offset:
                self._truncate_fully_and_start_at(offset, now_ms)
                return
            self.local_log.truncate_to(offset)
            leo = self.local_log.log_end_offset
            self.leader_epoch_cache.truncate_from_end(leo)
            self.producer_state.delete_snapshots_after(leo)
            rebuild_producer_state(self.producer_state, self.local_log, self._log_start_offset)
            self.first_dirty_offset = min(self.first_dirty_offset, leo)

    def restart_at(self, offset: int, *, now_ms: int) -> None:
        """Drop everything and continue at `offset` (a follower whose log ends below the leader's
        log start: Kafka's truncateFullyAndStartAt)."""
        with self.lock:
            self.truncations += 1
            self._truncate_fully_and_start_at(offset, now_ms)
            if self.replicated_hw is not None:
                self.replicated_hw = offset

    def _truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        self.local_log.truncate_fully_and_start_at(offset, now_ms)
        self._log_start_offset = offset
        self.leader_epoch_cache.clear()
        self.producer_state.reset(offset)
        self.producer_state.delete_snapshots_after(-1)

    def delete_files(self) -> None:
        """Remove the partition directory (topic deletion)."""
        with self.lock:
            self.local_log.delete()

    # --- life cycle ---

    def close(self, *, sync: bool = True) -> None:
        """Clean close: producer state snapshot at the log end, everything trimmed and fsynced (by
        the caller with sync=False: LogManager syncs the filesystem once for thousands of logs)."""
        with self.lock:
            local = self.local_log
            self.producer_state.take_snapshot_if_moved(sync=sync)
            local.close(sync=sync)
            self.leader_epoch_cache.sync(fsync=sync, log_end_offset=local.log_end_offset)
            local.recovery_point = local.log_end_offset

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, "
            f"end={self.local_log.log_end_offset}, segments={len(self.local_log.segments)})"
        )
