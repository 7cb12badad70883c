"""What an append's batches must be before they reach the segments, and the offsets they get:
Kafka's UnifiedLog.analyzeAndValidateRecords (framing, sizes, CRCs), LogValidator's offset
assignment and analyzeAndValidateProducerState (idempotent sequences), for PartitionLog's appends,
and what an append did (AppendInfo).

The per-record checks of a produced batch (timestamps, keys of a compacted topic) are the server's
(kcompat/server/record_checks.py): here only the batch framing is read, never a record.

Offsets are patched into the batches in place when the buffer is writable (one write() then); an
immutable buffer is never copied: it is written with pwritev from a patched 16-byte prefix per
batch (baseOffset, batchLength, partitionLeaderEpoch) and views of the rest. CRCs are untouched:
a v2 batch's CRC starts after the patched fields.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Required, TypedDict

from kcompat.log.config import LogConfig
from kcompat.log.errors import CorruptRecord, MessageTooLarge, OutOfOrderSequence, RecordBatchTooLarge
from kcompat.log.producer_state import ProducerStateManager, _in_sequence
from kcompat.log.segment import BatchPlacement
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

_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch: the patched bytes
_MAX_IOV = 1000  # below IOV_MAX (1024) entries for one pwritev

Framed = list[tuple[int, BatchHeader]]  # (position in the buffer, header) of each batch
# (the data to write, where each batch lies, producer batches with a marker's control type or -1,
# the largest timestamp, the offset after the last batch)
Assigned = tuple[
    memoryview | list[bytes | memoryview], list[BatchPlacement], list[tuple[BatchHeader, int]], int, int
]


class LeaderAppend(TypedDict, total=False):
    """PartitionLog.append's arguments as ReplicaManager hands them on."""

    leader_epoch: Required[int]
    now_ms: Required[int]
    header: BatchHeader | None  # the one batch's, as validate_batch read it: not parsed again


class AppendInfo(NamedTuple):
    """What an append did (Kafka's LogAppendInfo). Immutable as a NamedTuple rather than a frozen dataclass, whose
    __init__ costs 4x as much (0.84 against 0.25 us), paid once per partition of every Produce."""

    base_offset: int  # offset given to the first record (of the original batch for a duplicate)
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    max_timestamp: int
    size: int  # bytes written (0 for a duplicate)
    duplicate: bool = False


def frame_batches(
    buf: memoryview, config: LogConfig, verify_crc: bool, known: BatchHeader | None = None
) -> Framed:
    """The batches of `buf`: whole v2 batches and nothing after them, each within
    max.message.bytes, all of them within one segment; with `verify_crc`, each CRC checked too (a
    follower's batches, which no produce validator saw). Raises CorruptRecord, MessageTooLarge or
    RecordBatchTooLarge. `known`: the header of the one batch that fills `buf`, as validate_batch
    read it (the Produce path), so that it is not parsed twice."""
    if known is not None and known.size == len(buf):  # the produce checks read it: not again
        headers = [(0, known)]
    else:
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
    for pos, h in headers:
        if h.size > config.max_message_bytes:
            raise MessageTooLarge(
                f"batch of {h.size} bytes exceeds max.message.bytes {config.max_message_bytes}"
            )
        if h.last_offset_delta < 0:
            raise CorruptRecord(f"batch has lastOffsetDelta {h.last_offset_delta}")
        if verify_crc and crc32c(buf[pos + CRC_START : pos + h.size]) != h.crc:
            raise CorruptRecord("record batch CRC does not match")
    if len(buf) > config.segment_bytes:
        raise RecordBatchTooLarge(f"{len(buf)} bytes do not fit in a segment of {config.segment_bytes}")
    return headers


def check_sequences(ps: ProducerStateManager, headers: Framed, log_start_offset: int) -> AppendInfo | None:
    """What the original append of a retried idempotent batch did (a duplicate: nothing is
    written), else None. Raises InvalidProducerEpoch or OutOfOrderSequence, also for later batches of one producer
    in the same append that do not follow each other, and for a retry that came with others."""
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
                    dup.first_offset, dup.last_offset, -1, log_start_offset, dup.timestamp, 0, True
                )
        pending[pid] = (h.producer_epoch, h.last_sequence)
    return None


def assign_offsets(
    buf: memoryview, mutable: bool, headers: Framed, offset: int, leader_epoch: int
) -> Assigned:
    """Give the batches consecutive offsets from `offset` and the leader's epoch (in place when
    `mutable`), and say what the segment and the producer state need to know of each."""
    placements: list[BatchPlacement] = []
    pieces: list[bytes | memoryview] = []
    patched: list[tuple[BatchHeader, int]] = []
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
            patched.append((h._replace(base_offset=offset, partition_leader_epoch=leader_epoch), kind))
        last = offset + h.last_offset_delta
        placements.append((pos, h.size, last, h.max_timestamp))
        max_ts = max(max_ts, h.max_timestamp)
        offset = last + 1
    data: memoryview | list[bytes | memoryview] = buf if mutable or len(pieces) > _MAX_IOV else pieces
    if data is buf and not mutable:
        data = memoryview(b"".join(pieces))
    return data, placements, patched, max_ts, offset


def check_follower_offsets(
    headers: Framed, offset: int, gaps: bool = False
) -> tuple[list[BatchPlacement], int, int]:
    """A follower's batches as the leader numbered them: the first must start at `offset` (the log
    end) and each next one right after the previous (with `gaps`, at or past it: a copy of a
    compacted log). (placements, largest timestamp, next offset); CorruptRecord otherwise."""
    placements: list[BatchPlacement] = []
    max_ts = -1
    for pos, h in headers:
        if h.base_offset != offset and not (gaps and h.base_offset > offset):
            raise CorruptRecord(f"replicated batch at offset {h.base_offset}, expected {offset}")
        placements.append((pos, h.size, h.last_offset, h.max_timestamp))
        max_ts = max(max_ts, h.max_timestamp)
        offset = h.last_offset + 1
    return placements, max_ts, offset
