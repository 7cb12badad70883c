"""acks=all in cluster mode (Kafka's DelayedProduce): appends this broker made as leader, each
answered once the partition's high watermark passes it. Woken through FetchWaiters by whatever
moves a high watermark; used by Produce and by the transaction coordinator's markers."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from kcompat.server.delayed_fetch import FetchWaiters, TopicPartition
from kcompat.server.isr_port import HostedReplica
from kcompat.wire.error_codes import ErrorCode


async def await_replicated(
    partitions: Mapping[TopicPartition, HostedReplica],
    waiters: FetchWaiters,
    appends: list[tuple[TopicPartition, int]],
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> list[ErrorCode]:
    """The code of each (partition, last offset appended), in order: NONE once the high watermark
    passes it, NOT_LEADER_OR_FOLLOWER when leadership moved meanwhile, REQUEST_TIMED_OUT when
    `timeout_s` runs out first."""
    codes = [ErrorCode.REQUEST_TIMED_OUT] * len(appends)
    left = list(range(len(appends)))
    deadline = clock() + timeout_s
    while True:
        waiting = []
        for i in left:
            tp, last = appends[i]
            p = partitions.get(tp)
            if p is None or not p.is_leader:
                codes[i] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif p.log.high_watermark > last:
                codes[i] = ErrorCode.NONE
            else:
                waiting.append(i)
        left = waiting
        remaining = deadline - clock()
        if not left or remaining <= 0 or waiters.closed:
            return codes
        await waiters.wait([appends[i][0] for i in left], remaining)
