"""What a read_committed reader sees of a PartitionLog (a base class of it, kept apart for size).

The last stable offset (LSO) is the first offset of the oldest open transaction, else the high
watermark: below it every transaction is decided. A read_committed Fetch gets batches only below
it (still whole file slices for sendfile, never unpacked) with the aborted transactions of the
range from the segments' `.txnindex` entries, so the client drops aborted batches itself.
"""

from __future__ import annotations

import bisect

from kcompat.log.log_file import EMPTY_SLICE, FetchSlice, FilePiece
from kcompat.log.producer_state import ProducerStateManager
from kcompat.log.segment import LogSegment
from kcompat.log.txn_index import AbortedTxn, collect_aborted


class CommittedReads:
    # PartitionLog's state (set in its __init__)
    producer_state: ProducerStateManager
    _view: tuple[tuple[LogSegment, ...], tuple[int, ...]]
    _leo: int
    replicated_hw: int | None  # cluster mode: the high watermark the ISR gives (replica_append.py)

    def read(
        self, offset: int, max_bytes: int, *, min_one_batch: bool = True, max_offset: int | None = None
    ) -> FetchSlice:  # PartitionLog's
        raise NotImplementedError

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset()
        hw = self._leo if self.replicated_hw is None else min(self.replicated_hw, self._leo)
        return hw if first_unstable is None else min(first_unstable, hw)

    def _read_below(self, offset: int, max_bytes: int, min_one_batch: bool, max_offset: int) -> FetchSlice:
        if offset >= max_offset:
            return EMPTY_SLICE
        got = self.read(offset, max_bytes, min_one_batch=min_one_batch)
        pieces: list[FilePiece] = []
        segments, bases = self._view
        # The cap: the position of the batch at max_offset in the segment holding it.
        seg = segments[max(bisect.bisect_right(bases, max_offset) - 1, 0)]
        found = seg.translate_offset(max_offset)
        cap = found[0] if found is not None else seg.size
        for piece in got.pieces:
            if piece.file is seg.log:
                if piece.position >= cap:
                    break
                pieces.append(
                    FilePiece(
                        piece.file, piece.position, min(piece.length, cap - piece.position), piece.handle
                    )
                )
                break
            pieces.append(piece)
        return FetchSlice(tuple(pieces), got.first_offset) if pieces else EMPTY_SLICE

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch from `fetch_offset` below `upper_bound` needs."""
        segments, bases = self._view
        i = max(bisect.bisect_right(bases, fetch_offset) - 1, 0)
        return collect_aborted((s.txn_index for s in segments[i:]), fetch_offset, upper_bound)
