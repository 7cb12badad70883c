"""At most one log line per key per interval, with a count of what was held back.

A failing disk turns every produce and every maintenance pass into an error, a client on an API
version Kafka 4 removed retries it hundreds of times a minute; one line a few seconds says the same
and keeps the log readable (and the disk it may share free). Keys quiet for an interval are
forgotten once `max_keys` are held, so peers cycling through keys cannot grow it without bound.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class LogThrottle:
    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 10_000,
        pass_below: int = logging.NOTSET,
    ) -> None:
        self._log = logger
        self._interval = interval_s
        self._clock = clock
        self._max_keys = max_keys
        self._pass_below = pass_below  # lines of a lower level (DEBUG detail) are never held back
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def log(self, level: int, key: str, msg: str, *args: object, exc_info: bool = False) -> bool:
        """Log unless `key` logged within the interval; True when the line was written."""
        if level < self._pass_below:
            self._log.log(level, msg, *args, exc_info=exc_info or None)
            return True
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        if last is None and len(self._last) >= self._max_keys:
            self._forget(now)
        held = self._held.pop(key, 0)
        if held:
            msg += f" ({held} more like it in the last {now - last:.0f} s)"  # type: ignore[operator]
        self._last[key] = now
        self._log.log(level, msg, *args, exc_info=exc_info or None)
        return True

    def _forget(self, now: float) -> None:
        for key in [k for k, t in self._last.items() if now - t >= self._interval]:
            del self._last[key]
            self._held.pop(key, None)
        if len(self._last) >= self._max_keys:  # all of them recent: start again rather than grow
            self._last.clear()
            self._held.clear()
