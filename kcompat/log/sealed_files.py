"""Descriptors of segment files, and the bounded cache that keeps those of sealed segments.

The active segment of every partition keeps its `.log` descriptor open. A sealed (inactive) one
holds none when idle: its descriptor is opened when the file is read and kept in one LRU shared by
every log of the process, bounded by `log.segment.descriptors.max`; the least recently used is let
go beyond it. Kafka keeps every segment open (two or three descriptors each); a broker with many
partitions of many segments then needs no more than one per partition plus the bound.

A descriptor is an object closed when its last holder lets go: a read's file piece holds it, so a
piece being sent stays readable after the cache let the descriptor go (or the segment was deleted),
as an unlinked file stays readable through an open descriptor.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

DEFAULT_BOUND = 1000


class Descriptor:
    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self, _close: Callable[[int], None] = os.close) -> None:  # bound: usable at exit
        fd, self.fd = self.fd, -1
        if fd >= 0:
            _close(fd)

    def __del__(self) -> None:
        self.close()


class Evictable(Protocol):
    def let_go(self) -> None: ...


class SealedFileCache:
    """An LRU of the sealed files whose descriptors are open (thread-safe: reads run on the event loop,
    recovery and maintenance in worker threads)."""

    def __init__(self, bound: int = DEFAULT_BOUND) -> None:
        self.bound = bound
        self._open: OrderedDict[Evictable, None] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._open)

    def touch(self, f: Evictable) -> None:
        """`f` was just used with its descriptor open; let go of the least recent beyond the bound."""
        with self._lock:
            self._open[f] = None
            self._open.move_to_end(f)
            victims = [self._open.popitem(last=False)[0] for _ in range(len(self._open) - self.bound)]
        for v in victims:
            v.let_go()

    def forget(self, f: Evictable) -> None:
        with self._lock:
            self._open.pop(f, None)

    def set_bound(self, bound: int) -> None:
        self.bound = max(1, bound)
        with self._lock:
            victims = [self._open.popitem(last=False)[0] for _ in range(len(self._open) - self.bound)]
        for v in victims:
            v.let_go()


SEALED_FILES = SealedFileCache()  # one per process: the descriptor limit is the process's
