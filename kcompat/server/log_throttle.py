"""At most one log line per key per interval, with a count of what was held back.

A failing disk turns every produce and every maintenance pass into an error; one line a few
seconds says the same and keeps the log readable (and the disk it may share free).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class LogThrottle:
    def __init__(
        self, logger: logging.Logger, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._log = logger
        self._interval = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def log(self, level: int, key: str, msg: str, *args: object, exc_info: bool = False) -> bool:
        """Log unless `key` logged within the interval; True when the line was written."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        held = self._held.pop(key, 0)
        if held:
            msg += f" ({held} more like it in the last {now - last:.0f} s)"  # type: ignore[operator]
        self._last[key] = now
        self._log.log(level, msg, *args, exc_info=exc_info)
        return True
