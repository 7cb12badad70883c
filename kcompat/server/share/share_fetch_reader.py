"""Reading a share-partition's records from the log, as Kafka's share fetch does: whole stored
batches, sent as file slices (sendfile, as a plain Fetch), with AcquiredRecords ranges that tell the
client which of their offsets it may deliver.

    plog.read ──► FetchSlice (no bytes read) ──► batches(): headers only, walked lazily while
    SharePartition.acquire still takes records ──► acquired_slice(): the pieces of only those
    batches holding an acquired offset, adjacent ones joined

Each batch is classified from its header: deliverable, or to be archived (control batches and, for
read_committed, batches of aborted transactions). A batch partly acquired (max records, another
member holding the rest, part of it acknowledged) is still sent whole: the client skips the records
outside the ranges, as with Kafka."""

from __future__ import annotations

from collections.abc import Iterator

from kcompat.coordinator.share.in_flight import Acquired, FetchedBatch
from kcompat.log.batch_scan import iter_headers
from kcompat.log.log_file import EMPTY_SLICE, FetchSlice, FilePiece, LogFile
from kcompat.log.partition_log import PartitionLog
from kcompat.log.txn_index import AbortedTxn


class ShareRead:
    """One read of a share fetch: the batches, walked lazily, and what they hold on disk."""

    __slots__ = ("_aborted", "_end", "_slice", "spans")

    def __init__(self, read: FetchSlice, end: int, aborted: list[AbortedTxn] | None) -> None:
        self._slice = read
        self._end = end
        self._aborted = aborted  # None: read_uncommitted
        self.spans: list[tuple[LogFile, int, int, int, int]] = []  # file, position, size, first, last

    def batches(self) -> Iterator[FetchedBatch]:
        """The batches in offset order, each header read only when asked for (the acquisition stops
        asking once MaxRecords or the lock window is used up)."""
        aborted, end = self._aborted, self._end
        for piece in self._slice.pieces:
            for pos, h in iter_headers(piece.file, piece.position, piece.position + piece.length):
                first = h.base_offset
                if first >= end:
                    return
                last = first + h.last_offset_delta
                deliverable = not h.is_control
                if deliverable and aborted and h.is_transactional:
                    pid = h.producer_id
                    deliverable = not any(
                        a.producer_id == pid and a.first_offset <= first <= a.last_offset for a in aborted
                    )
                self.spans.append((piece.file, pos, h.size, first, last))
                yield FetchedBatch(first, last, deliverable)

    def acquired_slice(self, acquired: list[Acquired]) -> FetchSlice:
        """The stored batches that hold an acquired offset, in order, as file pieces."""
        if not acquired:
            return EMPTY_SLICE
        pieces: list[FilePiece] = []
        first_offset = -1
        i, n = 0, len(acquired)
        for file, pos, size, first, last in self.spans:
            while i < n and acquired[i].last < first:
                i += 1
            if i == n:
                break
            if acquired[i].first > last:
                continue
            p = pieces[-1] if pieces else None
            if p is not None and p.file is file and p.position + p.length == pos:
                p.length += size
            else:
                pieces.append(FilePiece(file, pos, size))
                if first_offset < 0:
                    first_offset = first
        return FetchSlice(tuple(pieces), first_offset) if pieces else EMPTY_SLICE


def read_batches(plog: PartitionLog, offset: int, max_bytes: int, committed: bool) -> ShareRead:
    """Whole batches from the one holding `offset`, below the high watermark (the LSO for
    read_committed), at least one, about `max_bytes`; nothing is read until they are walked."""
    end = plog.last_stable_offset if committed else plog.high_watermark
    if offset >= end:
        return ShareRead(EMPTY_SLICE, end, None)
    read = plog.read(offset, max_bytes, min_one_batch=True, max_offset=end)
    return ShareRead(read, end, plog.aborted_transactions(offset, end) if committed else None)
