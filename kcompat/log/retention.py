"""Which segments retention deletes (Kafka's UnifiedLog.deletableSegments and its three
predicates: retention.ms breached, retention.bytes breached, below the log start offset).

A pure choice over the segment list, made under the PartitionLog's lock; PartitionLog deletes what
it names. Only whole sealed segments go, oldest first, each only while every segment before it
goes too (a log never gets a hole), and never a segment holding offsets at or above the log end.
The active segment may be named when it is not empty: the caller then rolls first, so that the log
keeps an active segment.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from kcompat.log.config import LogConfig
from kcompat.log.segment import LogSegment

Predicate = Callable[[LogSegment, LogSegment | None], bool]  # (segment, the next one or None)


def deletable_segments(
    segments: Sequence[LogSegment], log_end_offset: int, log_start_offset: int, config: LogConfig, now_ms: int
) -> list[LogSegment]:
    """The segments to delete, by base offset: by retention.ms and retention.bytes under
    cleanup.policy delete, and below the log start offset under any policy."""
    segs = list(segments)
    doomed: list[LogSegment] = []

    def take_while(pred: Predicate) -> None:
        for i, s in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt else log_end_offset
            if nxt is None and s.size == 0:
                break
            if not (pred(s, nxt) and upper <= log_end_offset):
                break
            if s not in doomed:
                doomed.append(s)

    if config.delete:
        if config.retention_ms >= 0:
            take_while(lambda s, _n: now_ms - s.largest_timestamp > config.retention_ms)
        if config.retention_bytes >= 0:
            diff = [sum(s.size for s in segs) - config.retention_bytes]

            def over(s: LogSegment, _n: LogSegment | None) -> bool:
                if diff[0] - s.size >= 0:
                    diff[0] -= s.size
                    return True
                return False

            take_while(over)
    take_while(lambda _s, n: n is not None and n.base_offset <= log_start_offset)
    doomed.sort(key=lambda s: s.base_offset)
    return doomed


def below_log_start(segments: Sequence[LogSegment], log_start_offset: int) -> list[LogSegment]:
    """The segments wholly below the log start offset (the next one starts at or below it): what
    DeleteRecords deletes at once."""
    return [s for s, nxt in itertools.pairwise(segments) if nxt.base_offset <= log_start_offset]
