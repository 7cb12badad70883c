"""Exceptions of the storage engine, each carrying the Kafka error name the server should answer with.

The server maps `error_name` to a code through kcompat.wire's ErrorCode table (ErrorCode[e.error_name]),
so this package needs no import of the wire error table.
"""

from __future__ import annotations


class LogError(Exception):
    """A failure the client should hear about as the Kafka error `error_name`."""

    error_name = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class KafkaStorageError(LogError):
    """The disk refused a read or write (ENOSPC, EROFS, EIO ...): the log stays as it was before the call."""

    error_name = "KAFKA_STORAGE_ERROR"


class OffsetOutOfRange(LogError):
    error_name = "OFFSET_OUT_OF_RANGE"


class CorruptRecord(LogError):
    error_name = "CORRUPT_MESSAGE"


class InvalidRecord(LogError):
    error_name = "INVALID_RECORD"


class MessageTooLarge(LogError):
    error_name = "MESSAGE_TOO_LARGE"


class RecordBatchTooLarge(LogError):
    error_name = "RECORD_BATCH_TOO_LARGE"


class InvalidProducerEpoch(LogError):
    error_name = "INVALID_PRODUCER_EPOCH"


class OutOfOrderSequence(LogError):
    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InconsistentClusterId(LogError):
    """meta.properties in a log dir names another cluster or node: refuse to mix data (as Kafka does)."""

    error_name = "INCONSISTENT_CLUSTER_ID"


class LoadAborted(LogError):
    """Start-up was asked to stop (SIGTERM) while the logs were being opened or recovered."""


class LogMoved(LogError):
    """The log was replaced by its copy in another log dir (AlterReplicaLogDirs) while the caller
    held it: retriable, the caller takes the partition's log again."""

    error_name = "NOT_LEADER_OR_FOLLOWER"


class LogDirNotFound(LogError):
    """AlterReplicaLogDirs named a directory that is not one of log.dirs."""

    error_name = "LOG_DIR_NOT_FOUND"
