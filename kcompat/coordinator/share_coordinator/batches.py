"""The state batches of a share-partition, and how a write's batches combine with those stored
(Kafka's PersisterStateBatchCombiner).

A batch is a run of offsets [first, last] with one delivery state (0 AVAILABLE, 2 ACKNOWLEDGED,
4 ARCHIVED) and delivery count. Combining old and new batches gives every offset the batch that
covers it with the highest (delivery count, delivery state): a record's count and state only grow
as it is delivered again and then acknowledged or archived, so this is the newest word on it even
when the words arrive out of order. Offsets below the share-partition start offset are dropped
(a batch straddling it is cut at it), and neighbours with the same state and count are joined, so
the result is the shortest sorted list of disjoint batches.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from typing import NamedTuple

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


class StateBatch(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


def combine(
    old: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    """`old` and `new` as one list of disjoint batches, from `start_offset` on (-1: keep all)."""
    batches = sorted(_pruned([*old, *new], start_offset))
    if len(batches) < 2:
        return tuple(batches)
    # A sweep over the offsets where some batch begins or ends; in each span between two such
    # points the covering batch of highest (count, state) wins. Heap entries end past their span
    # and are dropped lazily.
    points = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    out: list[StateBatch] = []
    heap: list[tuple[int, int, int]] = []  # (-count, -state, last offset)
    i = 0
    for lo, hi in itertools.pairwise(points):
        while i < len(batches) and batches[i].first_offset <= lo:
            b = batches[i]
            heapq.heappush(heap, (-b.delivery_count, -b.delivery_state, b.last_offset))
            i += 1
        while heap and heap[0][2] < lo:
            heapq.heappop(heap)
        if not heap:
            continue  # a gap between batches
        count, state = -heap[0][0], -heap[0][1]
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.last_offset + 1 == lo
            and (prev.delivery_state, prev.delivery_count) == (state, count)
        ):
            out[-1] = prev._replace(last_offset=hi - 1)
        else:
            out.append(StateBatch(lo, hi - 1, state, count))
    return tuple(out)


def _pruned(batches: list[StateBatch], start_offset: int) -> list[StateBatch]:
    if start_offset < 0:
        return batches
    return [
        b if b.first_offset >= start_offset else b._replace(first_offset=start_offset)
        for b in batches
        if b.last_offset >= start_offset
    ]
