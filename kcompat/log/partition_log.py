"""PartitionLog: one topic-partition as an ordered list of segments (Kafka's UnifiedLog + LocalLog).

Offsets:  log_start_offset <= (first segment's base) ... high_watermark == log_end_offset
(a single node is its own ISR, so everything appended is committed; a replicated partition's high
watermark is set from the ISR, see replica_append.py).

Threads. Appends, reads and truncation come from the server's event loop thread; retention,
flushing and compaction may run on a worker thread. Writers take `self.lock` only for short steps
(an append is a write() into the page cache; compaction holds it only to swap segments). Readers
take no lock: they read `self._view`, an immutable (segments, base offsets) pair that writers
replace whole (copy-on-write, as Kafka's docs describe), so a reader binary-searches a consistent
list even while segments are added or deleted. Deleted segments' files stay readable through the
descriptors held by any FetchSlice in flight.

Durability follows flush.messages / flush.ms (by default: the OS decides). `flush()` fsyncs and
advances the recovery point; restarts after an unclean stop re-validate everything after it.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import threading
from pathlib import Path
from typing import NamedTuple

from kcompat.log.batch_scan import iter_whole_batches
from kcompat.log.committed_reads import CommittedReads
from kcompat.log.config import LogConfig
from kcompat.log.errors import (
    CorruptRecord,
    MessageTooLarge,
    OffsetOutOfRange,
    OutOfOrderSequence,
    RecordBatchTooLarge,
)
from kcompat.log.leader_epoch import LeaderEpochCache
from kcompat.log.log_file import EMPTY_SLICE, FetchSlice, FilePiece
from kcompat.log.log_files import make_dir
from kcompat.log.producer_state import ProducerStateManager, _in_sequence
from kcompat.log.recovery import load_segments
from kcompat.log.removal import LogRemoval
from kcompat.log.replica_append import ReplicaAppend
from kcompat.log.segment import BatchPlacement, LogSegment
from kcompat.log.timestamp_lookup import TimestampLookup
from kcompat.log.txn_index import marker_kind
from kcompat.wire.checksum import crc32c
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import (
    CRC_START,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    split_batches,
)

log = logging.getLogger("kcompat.log")

_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch: the patched bytes
_MAX_IOV = 1000  # below IOV_MAX (1024) entries for one pwritev


class AppendInfo(NamedTuple):
    """What an append did. Immutable as a NamedTuple rather than a frozen dataclass, whose
    __init__ costs 4x as much (0.84 against 0.25 us), paid once per partition of every Produce."""

    base_offset: int  # offset given to the first record (of the original batch for a duplicate)
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    max_timestamp: int
    size: int  # bytes written (0 for a duplicate)
    duplicate: bool = False


class PartitionLog(LogRemoval, CommittedReads, ReplicaAppend, TimestampLookup):
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
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.lock = threading.RLock()
        self.replicated_hw: int | None = None  # set in cluster mode (replica_append.py)
        self.checkpointed_hw: int | None = None  # from replication-offset-checkpoint (manager.py)
        created = make_dir(directory)  # a new partition has nothing to load: its dir and one file
        self.leader_epoch_cache = LeaderEpochCache(directory)
        self.producer_state = ProducerStateManager(
            directory, producer_id_expiration_ms=config.producer_id_expiration_ms
        )
        cache = self.leader_epoch_cache

        def on_recovered(h: BatchHeader) -> None:
            if h.partition_leader_epoch > cache.latest_epoch:
                cache.assign(h.partition_leader_epoch, h.base_offset)

        names = [] if created else os.listdir(directory)
        segments = (
            []
            if created
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
        self._view: tuple[tuple[LogSegment, ...], tuple[int, ...]] = ((), ())
        self._set_segments(segments)
        self._leo = segments[-1].load_next_offset()
        self._log_start_offset = max(log_start_offset, segments[0].base_offset)
        if self._log_start_offset > self._leo:
            # The checkpoint is ahead of the data (everything after it was lost): start empty there.
            self._truncate_fully_and_start_at(self._log_start_offset, now_ms)
        cache.truncate_from_end(self._leo)
        cache.truncate_from_start(self._log_start_offset)
        self._rebuild_producer_state(names, clean_shutdown=clean_shutdown and not created)
        self.recovery_point = self._leo
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._snapshot_unsynced: Path | None = None
        self.first_dirty_offset = self._log_start_offset  # compaction progress (cleaner-offset-checkpoint)
        self.truncations = 0  # bumped when data is cut in place, so a concurrent clean knows to give up
        self.tombstone_horizon_ms: int | None = None  # earliest delete horizon the cleaner has set

    # --- offsets ---

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._leo

    @property
    def high_watermark(self) -> int:
        hw = self.replicated_hw
        return self._leo if hw is None else min(hw, self._leo)

    @property
    def active_segment(self) -> LogSegment:
        return self._view[0][-1]

    @property
    def size(self) -> int:
        return sum(s.size for s in self._view[0])

    # --- append ---

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        verify_crc: bool = False,
    ) -> AppendInfo:
        """Append one or more validated v2 batches; offsets and the leader epoch are patched in.

        A bytearray (or writable memoryview) is patched in place; other buffers are copied once.
        The batches must already have passed the produce validator: only their framing (and with
        `verify_crc`, their CRCs) is checked here. Idempotent batches are checked against the
        producer state first; a retry of one of the last 5 batches returns the original offsets with
        duplicate=True and writes nothing.

        Raises CorruptRecord, MessageTooLarge, RecordBatchTooLarge, InvalidProducerEpoch,
        OutOfOrderSequence, or KafkaStorageError (after which the log is as it was before).
        """
        # A mutable buffer is patched in place and written with one write; an immutable one is
        # written with pwritev from patched 16-byte prefixes and views of the rest, never copied.
        mutable = isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly)
        buf = memoryview(records)
        headers = self._frame(buf, verify_crc)
        total = len(buf)
        if total > self.config.segment_bytes:
            raise RecordBatchTooLarge(f"{total} bytes do not fit in a segment of {self.config.segment_bytes}")
        cfg = self.config
        with self.lock:
            dup = self._check_producers(headers)
            if dup is not None:
                return dup
            offset = self._leo
            base = offset
            placements: list[BatchPlacement] = []
            pieces: list[bytes | memoryview] = []
            patched: list[tuple[BatchHeader, int]] = []  # with the control type of a marker, else -1
            max_ts = -1
            for pos, h in headers:
                if mutable:
                    set_base_offset(buf, offset, pos)
                    set_partition_leader_epoch(buf, leader_epoch, pos)
                else:
                    pieces.append(_PREFIX.pack(offset, h.batch_length, leader_epoch))
                    pieces.append(buf[pos + _PREFIX.size : pos + h.size])
                if h.producer_id != NO_PRODUCER_ID:
                    kind = marker_kind(buf[pos : pos + h.size], h) if h.is_control else -1
                    patched.append(
                        (h._replace(base_offset=offset, partition_leader_epoch=leader_epoch), kind)
                    )
                last = offset + h.last_offset_delta
                placements.append((pos, h.size, last, h.max_timestamp))
                max_ts = max(max_ts, h.max_timestamp)
                offset = last + 1
            data: memoryview | list[bytes | memoryview] = buf if mutable or len(pieces) > _MAX_IOV else pieces
            if data is buf and not mutable:
                data = memoryview(b"".join(pieces))
            seg = self.active_segment
            if seg.should_roll(total, max_ts, offset - 1, now_ms):
                seg = self._roll(now_ms)
            if leader_epoch > self.leader_epoch_cache.latest_epoch:
                # Before the data (as Kafka assigns it on becoming leader): a checkpoint the disk
                # refuses then fails the append with nothing written, not after the records landed.
                self.leader_epoch_cache.assign(leader_epoch, base)
            seg.append(data, placements)
            self._leo = offset
            ps = self.producer_state
            for ph, kind in patched:
                if kind < 0:
                    ps.update(ph)
                elif (aborted := ps.update_control(ph, kind)) is not None:
                    seg.txn_index.append(aborted)
            ps.map_end_offset = offset
            self._unflushed_messages += offset - base
            if self._unflushed_messages >= cfg.flush_messages or now_ms - self._last_flush_ms >= cfg.flush_ms:
                self.flush(now_ms=now_ms)
            append_time = now_ms if cfg.message_timestamp_type == "LogAppendTime" else -1
            return AppendInfo(base, offset - 1, append_time, self._log_start_offset, max_ts, total)

    def _frame(self, buf: memoryview, verify_crc: bool) -> list[tuple[int, BatchHeader]]:
        try:
            spans = split_batches(buf)
            headers = [(pos, read_header(buf, pos)) for pos, _ in spans]
        except DecodeError as e:
            raise CorruptRecord(f"records are not whole v2 batches: {e}") from None
        if not spans:
            raise CorruptRecord("no complete record batch")
        end = spans[-1][0] + spans[-1][1]
        if end != len(buf):
            raise CorruptRecord(f"{len(buf) - end} bytes after the last whole batch")
        view = buf
        for pos, h in headers:
            if h.size > self.config.max_message_bytes:
                raise MessageTooLarge(
                    f"batch of {h.size} bytes exceeds max.message.bytes {self.config.max_message_bytes}"
                )
            if h.last_offset_delta < 0:
                raise CorruptRecord(f"batch has lastOffsetDelta {h.last_offset_delta}")
            if verify_crc and crc32c(view[pos + CRC_START : pos + h.size]) != h.crc:
                raise CorruptRecord("record batch CRC does not match")
        return headers

    def _check_producers(self, headers: list[tuple[int, BatchHeader]]) -> AppendInfo | None:
        ps = self.producer_state
        pending: dict[int, tuple[int, int]] = {}  # later batches of a producer in the same append
        for _, h in headers:
            pid = h.producer_id
            if pid == NO_PRODUCER_ID or h.is_control or h.base_sequence == NO_SEQUENCE:
                continue
            if pid in pending:
                epoch, last_seq = pending[pid]
                if h.producer_epoch != epoch or not _in_sequence(last_seq, h.base_sequence):
                    raise OutOfOrderSequence(f"producer {pid}: batches in one append are not in sequence")
            else:
                dup = ps.check(pid, h.producer_epoch, h.base_sequence, h.last_sequence)
                if dup is not None:
                    if len(headers) > 1:
                        raise OutOfOrderSequence(f"producer {pid}: a retried batch came with others")
                    return AppendInfo(
                        dup.first_offset, dup.last_offset, -1, self._log_start_offset, dup.timestamp, 0, True
                    )
            pending[pid] = (h.producer_epoch, h.last_sequence)
        return None

    # --- roll and flush ---

    def roll(self, now_ms: int) -> LogSegment:
        """Start a new segment at the log end offset (no-op if the active segment is empty)."""
        with self.lock:
            return self._roll(now_ms)

    def _roll(self, now_ms: int) -> LogSegment:
        old = self.active_segment
        if old.size == 0:
            return old
        old.on_become_inactive()
        new = LogSegment(self.directory, self._leo, self.config, created_ms=now_ms, active=True)
        if new.size:  # leftovers with that name (a crash after a truncation): start clean
            new.log.truncate(0)
            new.reset_indexes()
        self._set_segments([*self.segments, new])
        # Snapshot producer state at the segment boundary (Kafka does it on roll); fsynced by flush().
        # Only a shortcut for recovery (which otherwise replays from an older one): no disk space
        # for it must not fail the append.
        try:
            self._snapshot_unsynced = self.producer_state.take_snapshot(sync=False)
        except OSError as e:
            log.warning(
                "no producer state snapshot for %s-%d at %d: %s", self.topic, self.partition, self._leo, e
            )
        self.producer_state.delete_old_snapshots(keep=3)
        return new

    def flush(self, *, now_ms: int | None = None) -> None:
        """fsync everything written so far and move the recovery point to the log end."""
        with self.lock:
            leo = self._leo
            segments = [
                s for s in self.segments if s.base_offset >= self._segment_base_for(self.recovery_point)
            ]
            snap = self._snapshot_unsynced
            self._snapshot_unsynced = None
            self._unflushed_messages = 0
            if now_ms is not None:
                self._last_flush_ms = now_ms
        for s in segments:
            s.flush()
        if snap is not None:
            _fsync_path(snap)
        self.leader_epoch_cache.sync()
        self.recovery_point = max(self.recovery_point, leo)

    def maybe_flush(self, now_ms: int) -> None:
        """Background hook: flush when flush.ms has passed, or when rolled segments are unflushed."""
        if now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush(now_ms=now_ms)
        elif self.recovery_point < self.active_segment.base_offset:
            self._flush_rolled()

    def _flush_rolled(self) -> None:
        with self.lock:
            upto = self.active_segment.base_offset
            segments = [
                s for s in self.segments[:-1] if s.base_offset >= self._segment_base_for(self.recovery_point)
            ]
            snap = self._snapshot_unsynced
            self._snapshot_unsynced = None
        for s in segments:
            s.flush()
        if snap is not None:
            _fsync_path(snap)
        self.leader_epoch_cache.sync()
        self.recovery_point = max(self.recovery_point, upto)

    def _segment_base_for(self, offset: int) -> int:
        bases = self._view[1]
        i = bisect.bisect_right(bases, offset) - 1
        return bases[max(i, 0)]

    # --- reads ---

    def read(
        self, offset: int, max_bytes: int, *, min_one_batch: bool = True, max_offset: int | None = None
    ) -> FetchSlice:
        """Whole batches from the one holding `offset`, up to `max_bytes` (the first batch may exceed it)
        and, with `max_offset` (a batch boundary: the LSO for read_committed), only batches below it.

        `offset` must be in [log_start_offset, log_end_offset], else OffsetOutOfRange; at the log
        end offset the slice is empty. Cost: a binary search over segment base offsets, one over
        the mmap'd index, and a header scan of at most index.interval.bytes plus one batch.
        """
        segments, bases = self._view
        leo = self._leo
        if offset < self._log_start_offset or offset > leo:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self._log_start_offset}, {leo}] of {self.topic}-{self.partition}"
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

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) from the leader epoch cache."""
        return self.leader_epoch_cache.end_offset_for_epoch(epoch, self._leo)

    end_offset_for_epoch = epoch_end_offset

    # --- life cycle ---

    def close(self, *, sync: bool = True) -> None:
        """Clean close: producer state snapshot at the log end, everything trimmed and fsynced (by
        the caller with sync=False: LogManager syncs the filesystem once for thousands of logs)."""
        with self.lock:
            ps = self.producer_state
            # Kafka's rule: a snapshot only when the state moved past the newest one (a stop after
            # an idle restart then creates no file per partition; file creation is most of a close).
            # And none for a log that never had producer state: without a snapshot, a clean start
            # takes the state as empty (as Kafka's loader does) and replays nothing.
            snapshots = ps.snapshot_offsets()
            if ps.map_end_offset not in snapshots and (snapshots or not ps.is_empty):
                ps.take_snapshot(sync=sync)
                ps.delete_old_snapshots(keep=3)
            for s in self.segments:
                s.close(sync=sync)
            self.leader_epoch_cache.sync(fsync=sync, log_end_offset=self._leo)
            self.recovery_point = self._leo

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

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, "
            f"end={self._leo}, segments={len(self.segments)})"
        )


def _fsync_path(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
