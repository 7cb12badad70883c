"""Operator log lines about bad input, at most one per kind every interval (a client that sends
garbage in a loop must not flood the log)."""

from __future__ import annotations

import logging
import time

INTERVAL_S = 10.0


class LogLimit:
    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._last: dict[str, float] = {}

    def _due(self, kind: str) -> bool:
        now = time.monotonic()
        if now - self._last.get(kind, -self.interval_s) < self.interval_s:
            return False
        self._last[kind] = now
        return True

    def warning(self, log: logging.Logger, kind: str, message: str) -> None:
        if self._due(kind):
            log.warning(message)

    def info(self, log: logging.Logger, kind: str, message: str) -> None:
        if self._due(kind):
            log.info(message)
