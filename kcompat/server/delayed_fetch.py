"""Long-polling Fetch: waiters parked on partitions, woken by appends (Kafka's DelayedFetch purgatory).

A Fetch that finds fewer than `min_bytes` waits until `max_wait_ms` runs out or one of its
partitions receives data, whichever comes first, then reads again. A waiter is one future,
registered under every partition it reads; an append to any of them resolves it. Waking is cheap
(a dict lookup per appended partition) and spurious wake-ups are harmless: the handler re-reads and
parks again for the time left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class FetchWaiters:
    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._closed = False

    def notify(self, tp: TopicPartition) -> None:
        """Data arrived in (or the log start of) `tp` changed: wake every fetch parked on it."""
        waiters = self._waiting.pop(tp, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def notify_all(self) -> None:
        """Wake everyone (shutdown, topic deletion): the fetches answer with what they have."""
        for tp in list(self._waiting):
            self.notify(tp)

    def close(self) -> None:
        self._closed = True
        self.notify_all()

    @property
    def closed(self) -> bool:
        """After close() nothing parks: a fetch must answer with what it has instead of looping."""
        return self._closed

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> bool:
        """Park until one of `partitions` is notified or `timeout_s` passes; True when woken."""
        if self._closed or timeout_s <= 0:
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(dict.fromkeys(partitions))
        for tp in keys:
            self._waiting.setdefault(tp, set()).add(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for tp in keys:
                s = self._waiting.get(tp)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiting[tp]
            if not fut.done():
                fut.cancel()

    def parked(self) -> int:
        """How many distinct fetches are waiting (for tests and metrics)."""
        return len({id(f) for s in self._waiting.values() for f in s})
