"""Descriptors of segment `.log` files, and the one bounded cache that keeps them open.

No segment file holds a descriptor for good, the active one included: a descriptor is opened when
the file is appended to, read or synced, and kept in one LRU shared by every log of the process,
bounded by `log.segment.descriptors.max`; the least recently used is let go beyond it. An idle
partition then holds none, and a broker of any number of partitions needs no more than the bound
(Kafka keeps every segment open: two or three descriptors each). A partition in use stays at the
recent end of the LRU, so its appends and reads find their descriptor open, and only a partition
idle for longer than the bound's worth of others reopens. The hot path pays no lock: a file used
again within the last half-bound of touches is near enough the recent end not to be moved (it
cannot be let go before half a bound more files are used), so a busy file takes the lock once per
half-bound of touches.

A let-go writer loses nothing: its writes are in the page cache of the file, not of the descriptor,
and fsync syncs the file whichever descriptor it is called on (POSIX; Linux also reports a write-back
error to the next fsync of a descriptor opened after it, when nobody saw it yet), so a flush (by
flush.messages / flush.ms, on roll, on clean close) through a reopened descriptor makes durable
everything written through the closed one. No fsync is needed on eviction.

A descriptor is an object closed when its last holder lets go: a read's file piece holds it, as does
an append under way, so a piece being sent stays readable after the cache let the descriptor go
(or the segment was deleted), as an unlinked file stays readable through an open descriptor.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

DEFAULT_BOUND = 1000  # until the broker sets it from its config and the open file limit
RESERVED = 64  # descriptors never given to the cache: connections, index maps, checkpoints


def bound_for(configured: int, open_file_limit: int) -> int:
    """The cache bound: `configured` when set (> 0), else half the open file limit (at least 16).

    Half, because the other descriptors of a busy broker are as many again at worst: a connection
    each, and (Python before 3.13) the duplicate descriptor an index map keeps for an active segment
    that got index entries, and for a sealed one whose index is larger than a page. Either way at
    least RESERVED are left out of the cache.
    """
    bound = configured if configured > 0 else max(16, open_file_limit // 2)
    return max(1, min(bound, open_file_limit - RESERVED))


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


class SegmentFileCache:
    """An LRU of the segment files whose descriptors are open (thread-safe: appends and reads run on
    the event loop, recovery, flushes and maintenance in worker threads)."""

    def __init__(self, bound: int = DEFAULT_BOUND) -> None:
        self.bound = bound
        self.fresh = max(1, bound // 2)  # touches after which a file is moved to the recent end again
        self.ticks = 0  # touches so far: a file remembers the tick of its last move
        # Weak: a file dropped without close() (a test's, a replaced segment's) is freed, and its
        # descriptor closed, at once; its entry goes with the next evictions.
        self._open: OrderedDict[weakref.ref[Evictable], None] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._open)

    def touch(self, f: Evictable) -> int:
        """`f` was just used with its descriptor open: the most recent now, and the least recent
        beyond the bound are let go. Returns the tick of this touch."""
        with self._lock:
            self.ticks = tick = self.ticks + 1
            opened = self._open
            key = weakref.ref(f)
            opened[key] = None
            opened.move_to_end(key)
            if len(opened) <= self.bound:
                return tick
            victims = [opened.popitem(last=False)[0] for _ in range(len(opened) - self.bound)]
        _let_go(victims)
        return tick

    def forget(self, f: Evictable) -> None:
        with self._lock:
            self._open.pop(weakref.ref(f), None)

    def set_bound(self, bound: int) -> None:
        self.bound = max(1, bound)
        self.fresh = max(1, self.bound // 2)
        with self._lock:
            victims = [self._open.popitem(last=False)[0] for _ in range(len(self._open) - self.bound)]
        _let_go(victims)


def _let_go(victims: list[weakref.ref[Evictable]]) -> None:
    for ref in victims:
        f = ref()
        if f is not None:
            f.let_go()


SEGMENT_FILES = SegmentFileCache()  # one per process: the descriptor limit is the process's
