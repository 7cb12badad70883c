"""Resident memory and CPU time of a process, read from /proc (Linux), and a sampler thread that
keeps the peak resident memory while a workload runs.

    /proc/<pid>/stat    fields 14 and 15 (utime, stime) in clock ticks, all threads included
    /proc/<pid>/status  VmRSS in kB
"""

from __future__ import annotations

import os
import threading

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used so far (every thread)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime: fields 14, 15 of proc(5)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no VmRSS for pid {pid}")


class PeakRss:
    """Samples a process's RSS every `interval` seconds in a thread; `peak` is the largest seen."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except (OSError, ValueError):
                return
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
