"""Each group's total lag over time, for the console's chart: sampled every SAMPLE_S on the loop.

A sample is one pass over the groups' committed offsets and the logs' high watermarks (what
/metrics computes at a scrape); KEEP samples a group (30 minutes) are held in memory, nothing is
written. A group that is gone stops being sampled and its history goes with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kcompat.server.broker import Broker

log = logging.getLogger("kcompat.server.admin.listener")

SAMPLE_S = 2.0
KEEP = 900


class LagHistory:
    def __init__(self, broker: Broker, sample_s: float = SAMPLE_S) -> None:
        self.broker = broker
        self.sample_s = sample_s
        self.samples: dict[str, deque[tuple[float, int]]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])

    def sample(self) -> None:
        read = self.broker.group_service.snapshot()
        if not (read.groups or read.committed or self.samples):
            return  # no group yet: nothing to chart, and the console's views stay unloaded
        from kcompat.server.admin.console import views

        now = time.time()
        seen = set()
        for g in views.groups(self.broker):
            seen.add(g.group_id)
            self.samples.setdefault(g.group_id, deque(maxlen=KEEP)).append((now, g.total_lag))
        for gone in set(self.samples) - seen:
            del self.samples[gone]

    def series(self, group_id: str) -> list[list[float]]:
        """[[unix seconds...], [total lag...]], the columns uPlot draws."""
        points = self.samples.get(group_id, ())
        return [[round(t, 3) for t, _ in points], [float(lag) for _, lag in points]]

    async def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:
                log.exception("sampling the groups' lag failed")
            await asyncio.sleep(self.sample_s)
