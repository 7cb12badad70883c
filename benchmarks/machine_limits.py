"""The machine's own limits, measured in the same run as the brokers:

- loopback sendfile: a page-cached file sent with os.sendfile to a reader process over 127.0.0.1
  (bench_sendfile.raw_sendfile): the ceiling of any broker's fetch path on this machine;
- sequential page-cache write: 1 MiB write() calls to a new file on the brokers' disk, no fsync
  (what an append-only log costs before the OS flushes it): the ceiling of any produce path.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from benchmarks.bench_sendfile import raw_sendfile

CHUNK = 1 << 20


def _page_cached_file(path: Path, mib: int) -> None:
    block = os.urandom(CHUNK)
    with open(path, "wb") as f:
        f.writelines(block for _ in range(mib))
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


def loopback_sendfile_mbs(workdir: Path, mib: int) -> float:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "sendfile.bin"
    try:
        _page_cached_file(path, mib)
        return raw_sendfile(path, mib * CHUNK)
    finally:
        path.unlink(missing_ok=True)


def page_cache_write_mbs(workdir: Path, mib: int) -> float:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "write.bin"
    block = os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(mib):
            os.write(fd, block)
        seconds = time.perf_counter() - t0
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return mib * CHUNK / seconds / 1e6
