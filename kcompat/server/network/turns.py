"""Turns on the event loop for requests that touch thousands of partitions.

Kafka spreads a big Produce, Fetch or ListOffsets over its request handler threads while other
clients' requests go on; here one event loop serves everyone, so a handler walking many partitions
gives the loop a turn once it has held it for TURN_SECONDS, and other connections' requests
interleave. Each partition's own step (one append, one read, one lookup) stays whole between turns,
and the answer keeps the request's order. A connection handles its own requests one after another,
so nothing of the same client overtakes. Topic facts a handler holds across a turn are looked up
again after it (the topic may be deleted meanwhile).
"""

from __future__ import annotations

import asyncio
from time import perf_counter

# Two milliseconds: a turn every ~100 appends or reads, ~1,000 offset lookups; the turn itself
# costs a loop iteration (microseconds when nothing else is ready).
TURN_SECONDS = 0.002


class Turns:
    """One request's share of the loop: `due()` once it has run for TURN_SECONDS since the last turn."""

    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until = perf_counter() + TURN_SECONDS

    def due(self) -> bool:
        return perf_counter() >= self._until

    async def give(self) -> None:
        """Let the loop run whatever else is ready (other connections' requests), then go on."""
        await asyncio.sleep(0)
        self._until = perf_counter() + TURN_SECONDS
