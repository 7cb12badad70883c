"""A process's memory as Linux reports it, sampled while hostile clients are at work."""

from __future__ import annotations

import threading
from types import TracebackType


def rss_bytes(pid: int) -> int:
    """Resident set size of `pid` (VmRSS of /proc/<pid>/status), in bytes."""
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def open_fds(pid: int) -> int:
    import os

    return len(os.listdir(f"/proc/{pid}/fd"))


class RssSampler:
    """Samples a process's RSS every `interval` seconds on a thread; `peak` is the largest seen.

    with RssSampler(pid) as rss:
        ...attack...
    assert rss.peak < limit
    """

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.samples = 0
        self.first = rss_bytes(pid)
        self.peak = self.first
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-{pid}", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> int:
        try:
            now = rss_bytes(self.pid)
        except (OSError, RuntimeError):
            return 0  # the process is gone: the caller's liveness check says so
        self.samples += 1
        self.peak = max(self.peak, now)
        return now

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
