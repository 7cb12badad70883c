"""Reading a share-partition's records from the log: the batches as stored, each classified
(deliverable, or to be archived: control batches and, for read_committed, aborted transactions),
and the bytes of only those batches a fetch acquired something in."""

from __future__ import annotations

from dataclasses import dataclass

from kcompat.coordinator.share.share_partition import Acquired, FetchedBatch
from kcompat.log.partition_log import PartitionLog
from kcompat.wire.record_batch import read_header, split_batches


@dataclass(frozen=True, slots=True)
class ReadBatches:
    data: bytes
    spans: list[tuple[int, int, int, int]]  # position, size, first offset, last offset
    batches: list[FetchedBatch]


def read_batches(plog: PartitionLog, offset: int, max_bytes: int, committed: bool) -> ReadBatches:
    """Whole batches from the one holding `offset`, below the high watermark (the LSO for
    read_committed), at least one, about `max_bytes`."""
    end = plog.last_stable_offset if committed else plog.high_watermark
    if offset >= end:
        return ReadBatches(b"", [], [])
    data = plog.read(offset, max_bytes, min_one_batch=True, max_offset=end).read_bytes()
    aborted = plog.aborted_transactions(offset, end) if committed else []
    spans, batches = [], []
    for pos, size in split_batches(data):
        h = read_header(data, pos)
        first, last = h.base_offset, h.base_offset + h.last_offset_delta
        if first >= end:
            break
        deliverable = not h.is_control
        if deliverable and committed and h.is_transactional:
            deliverable = not any(
                a.producer_id == h.producer_id and a.first_offset <= first <= a.last_offset for a in aborted
            )
        spans.append((pos, size, first, last))
        batches.append(FetchedBatch(first, last, deliverable))
    return ReadBatches(data, spans, batches)


def acquired_bytes(read: ReadBatches, acquired: list[Acquired]) -> bytes:
    """The stored batches that hold an acquired offset, in order (a client delivers only the
    acquired offsets of each)."""
    if not acquired:
        return b""
    parts = []
    for pos, size, first, last in read.spans:
        if any(a.first <= last and first <= a.last for a in acquired):
            parts.append(read.data[pos : pos + size])
    return b"".join(parts)
