"""kcompat.log: partitions stored as segmented logs in Apache Kafka's own on-disk format.

Public API (what the server uses):

    manager = LogManager([data_dir], LogConfig(), cluster_id=..., node_id=1)
        loads every partition at start-up (recovering after an unclean stop), writes meta.properties
        and Kafka's checkpoint files; `get(topic, p)`, `get_or_create(topic, p, config)`,
        `delete(topic)`, `set_config(topic, config)`, `run_maintenance(now_ms)` (worker thread:
        retention, flushes, checkpoints), `run_cleaner(now_ms)` (compaction), `close()` (flush, fsync, clean-shutdown marker).

    plog = manager.get_or_create("t", 0)                       a PartitionLog
        plog.append(records, leader_epoch=e, now_ms=t) -> AppendInfo(base_offset, last_offset,
            log_append_time_ms, log_start_offset, max_timestamp, size, duplicate)
            `records` holds one or more validated v2 batches; offsets and the leader epoch are
            patched in place (CRCs untouched). Idempotent batches are checked against the producer
            state first (duplicate -> original offsets, duplicate=True).
        plog.read(offset, max_bytes, min_one_batch=True) -> FetchSlice   whole batches as
            (fd, position, length) pieces for os.sendfile; `len()`, `read_bytes()` to copy.
        plog.log_start_offset / log_end_offset / high_watermark / last_stable_offset
        plog.offset_for_timestamp(ts) -> (offset, timestamp) | None        ListOffsets by time
        plog.max_timestamp_offset() -> (offset, timestamp)                 ListOffsets -3
        plog.end_offset_for_epoch(epoch) -> (epoch, end_offset)            OffsetForLeaderEpoch
        plog.delete_records_before(offset) -> new log start offset        DeleteRecords
        plog.truncate_to(offset), plog.roll(now_ms), plog.run_retention(now_ms), plog.flush()
        plog.producer_state.check(pid, epoch, first_seq, last_seq)         idempotence check alone
        plog.local_log: its LocalLog, the segments as files (roll, read, flush, recovery point)

    LogCleaner().clean(plog, now_ms) / maybe_clean(...)                    compaction pass

Errors are LogError subclasses carrying Kafka's error name in `error_name` (KAFKA_STORAGE_ERROR,
OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_BATCH_TOO_LARGE,
INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER). The engine never reads a clock: time is
passed in as `now_ms` (the LogManager alone takes a `clock` for start-up and maintenance defaults).
"""

from kcompat.log.batch_validation import AppendInfo
from kcompat.log.cleaner import CleanStats, LogCleaner
from kcompat.log.config import LogConfig
from kcompat.log.errors import (
    CorruptRecord,
    InconsistentClusterId,
    InvalidProducerEpoch,
    KafkaStorageError,
    LogError,
    MessageTooLarge,
    OffsetOutOfRange,
    OutOfOrderSequence,
    RecordBatchTooLarge,
)
from kcompat.log.log_file import FetchSlice, FilePiece
from kcompat.log.manager import LogManager
from kcompat.log.partition_log import PartitionLog
from kcompat.log.producer_state import BatchMetadata, ProducerStateManager

__all__ = [
    "AppendInfo",
    "BatchMetadata",
    "CleanStats",
    "CorruptRecord",
    "FetchSlice",
    "FilePiece",
    "InconsistentClusterId",
    "InvalidProducerEpoch",
    "KafkaStorageError",
    "LogCleaner",
    "LogConfig",
    "LogError",
    "LogManager",
    "MessageTooLarge",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "PartitionLog",
    "ProducerStateManager",
    "RecordBatchTooLarge",
]
