"""What a replica that is not the leader needs of a PartitionLog (Kafka's UnifiedLog
appendAsFollower and its high watermark), kept apart from PartitionLog for size.

* `append_as_follower`: batches exactly as the leader wrote them. Offsets and partition leader
  epochs are checked, never reassigned: the first batch must start at the log end offset and each
  next one right after the previous. The leader epoch cache learns every new epoch at its first
  batch, and producer state is updated from each batch so that this replica, once leader, answers
  an idempotent retry as the old leader would have. No duplicate check: the leader made it.
* the high watermark: a single node's is its log end offset (`replicated_hw` None). A replicated
  partition's comes from its leader (or, on the leader, from the ISR) through
  `set_high_watermark`, and never exceeds the log end offset. It starts (`start_replicated`)
  where the last run checkpointed it, else at the log start (Kafka's createLogIfNotExists).
"""

from __future__ import annotations

import threading

from kcompat.log.config import LogConfig
from kcompat.log.errors import CorruptRecord, RecordBatchTooLarge
from kcompat.log.leader_epoch import LeaderEpochCache
from kcompat.log.producer_state import ProducerStateManager
from kcompat.log.segment import BatchPlacement, LogSegment
from kcompat.wire.record_batch import NO_PRODUCER_ID, BatchHeader


class ReplicaAppend:
    # PartitionLog's state (set in its __init__)
    config: LogConfig
    lock: threading.RLock
    leader_epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    replicated_hw: int | None
    checkpointed_hw: int | None
    truncations: int
    _view: tuple[tuple[LogSegment, ...], tuple[int, ...]]
    _leo: int
    _log_start_offset: int
    _unflushed_messages: int
    _last_flush_ms: int

    @property
    def active_segment(self) -> LogSegment:  # PartitionLog's
        raise NotImplementedError

    def _roll(self, now_ms: int) -> LogSegment:  # PartitionLog's
        raise NotImplementedError

    def _frame(self, buf: memoryview, verify_crc: bool) -> list[tuple[int, BatchHeader]]:  # PartitionLog's
        raise NotImplementedError

    def flush(self, *, now_ms: int | None = None) -> None:  # PartitionLog's
        raise NotImplementedError

    def _truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:  # LogRemoval's
        raise NotImplementedError

    def restart_at(self, offset: int, *, now_ms: int) -> None:
        """Drop everything and continue at `offset` (a follower whose log ends below the leader's
        log start: Kafka's truncateFullyAndStartAt)."""
        with self.lock:
            self.truncations += 1
            self._truncate_fully_and_start_at(offset, now_ms)
            if self.replicated_hw is not None:
                self.replicated_hw = offset

    def set_high_watermark(self, offset: int) -> int:
        """Make this a replicated log with high watermark `offset` (at most the log end); the new value."""
        hw = max(min(offset, self._leo), self._log_start_offset)
        self.replicated_hw = hw
        return hw

    def start_replicated(self) -> None:
        """Become a replicated log, if not yet: its high watermark where it was checkpointed."""
        if self.replicated_hw is None:
            hw = self.checkpointed_hw
            self.set_high_watermark(self._log_start_offset if hw is None else hw)

    def append_as_follower(self, records: bytes | bytearray | memoryview, *, now_ms: int) -> int:
        """Append whole batches fetched from the leader as they are; the new log end offset.

        Raises CorruptRecord (framing, a CRC, offsets that do not continue the log),
        RecordBatchTooLarge, or KafkaStorageError (after which the log is as it was before).
        """
        buf = memoryview(records)
        headers = self._frame(buf, True)
        total = len(buf)
        if total > self.config.segment_bytes:
            raise RecordBatchTooLarge(f"{total} bytes do not fit in a segment of {self.config.segment_bytes}")
        cfg = self.config
        with self.lock:
            offset = self._leo
            base = offset
            placements: list[BatchPlacement] = []
            max_ts = -1
            for pos, h in headers:
                if h.base_offset != offset:
                    raise CorruptRecord(f"replicated batch at offset {h.base_offset}, expected {offset}")
                placements.append((pos, h.size, h.last_offset, h.max_timestamp))
                max_ts = max(max_ts, h.max_timestamp)
                offset = h.last_offset + 1
            seg = self.active_segment
            if seg.should_roll(total, max_ts, offset - 1, now_ms):
                seg = self._roll(now_ms)
            cache = self.leader_epoch_cache
            for _, h in headers:  # before the data, as PartitionLog.append does
                if h.partition_leader_epoch > cache.latest_epoch:
                    cache.assign(h.partition_leader_epoch, h.base_offset)
            seg.append(buf, placements)
            self._leo = offset
            ps = self.producer_state
            for _, h in headers:
                if h.producer_id != NO_PRODUCER_ID:
                    ps.update(h)
            ps.map_end_offset = offset
            self._unflushed_messages += offset - base
            if self._unflushed_messages >= cfg.flush_messages or now_ms - self._last_flush_ms >= cfg.flush_ms:
                self.flush(now_ms=now_ms)
            return offset
