"""Storage-engine benchmark (not a test): .venv/bin/python benchmarks/bench_log.py [--dir DIR] [--quick]

Prints, measured in one run on the disk holding DIR (default: the system's temporary directory):
  1. append throughput (MB/s) of PartitionLog.append for 16 KiB and 1 MiB batches, against the raw
     page-cache write bandwidth of `dd bs=1M` (no fsync) and of a plain os.write loop, to the same disk;
  2. lookup latency by offset (read -> FetchSlice) and by timestamp (offset_for_timestamp) in a
     10-million-record log built from batches of 1000 small records;
  3. recovery time after an unclean stop, measured on a smaller log and scaled to one GiB (said so);
  4. memory per open partition (Python heap via tracemalloc, RSS delta, open descriptors).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import statistics
import struct
import subprocess
import tempfile
import time
import tracemalloc
from pathlib import Path

from kcompat.log import LogConfig, LogManager, PartitionLog
from kcompat.wire.checksum import crc32c
from kcompat.wire.records import Record, build_batch

MiB = 1024 * 1024
_HEADER = struct.Struct(">qiibIhiqqqhii")


def make_batch(n_records: int, value_size: int, base_ts: int = 1_700_000_000_000) -> bytearray:
    """An uncompressed v2 batch of n records (key 'k<i>', value of value_size bytes, ts base+i)."""
    value = b"x" * value_size
    return bytearray(build_batch([Record(i, base_ts + i, b"k%d" % i, value) for i in range(n_records)]))


def set_times(buf: bytearray, n_records: int, base_ts: int) -> None:
    _HEADER.pack_into(buf, 0, 0, len(buf) - 12, -1, 2, 0, 0, n_records - 1, base_ts, base_ts + n_records - 1,
                      -1, -1, -1, n_records)  # fmt: skip
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))


def batch_of_size(size: int) -> bytes:
    """One batch of about `size` bytes: 100-byte values."""
    n = max(1, (size - 61) // 110)
    b = make_batch(n, 100)
    return bytes(b)


def drop(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def dd_bandwidth(directory: Path, total: int) -> float:
    """Best of 3 runs of dd, by the rate dd itself reports (its start-up is not counted)."""
    target = directory / "dd.out"
    best = 0.0
    for _ in range(3):
        r = subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={total // MiB}"],
                           check=True, capture_output=True, text=True)  # fmt: skip
        # "134217728 bytes (134 MB, 128 MiB) copied, 0.0554 s, 2.4 GB/s"
        seconds = float(r.stderr.strip().splitlines()[-1].split(" copied, ")[1].split(" s")[0])
        best = max(best, total / seconds / 1e6)
        target.unlink()
    return best


def os_write_bandwidth(directory: Path, total: int, chunk: int) -> float:
    target = directory / "raw.out"
    data = os.urandom(chunk)
    best = 0.0
    for _ in range(3):
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        t0 = time.perf_counter()
        for _ in range(total // chunk):
            os.write(fd, data)
        dt = time.perf_counter() - t0
        os.close(fd)
        target.unlink()
        best = max(best, total / dt / 1e6)
    return best


def append_bandwidth(directory: Path, total: int, batch: bytes) -> tuple[float, float]:
    """(MB/s, microseconds per append) of PartitionLog.append, segments of 256 MiB; best of 2 runs."""
    return max(_append_once(directory, total, batch) for _ in range(2))


def _append_once(directory: Path, total: int, batch: bytes) -> tuple[float, float]:
    d = directory / "append"
    drop(d)
    cfg = LogConfig(segment_bytes=256 * MiB, max_message_bytes=2 * MiB)
    plog = PartitionLog(d / "bench-0", "bench", 0, cfg, now_ms=0)
    n = total // len(batch)
    t0 = time.perf_counter()
    for _ in range(n):
        plog.append(batch, leader_epoch=0, now_ms=0)
    dt = time.perf_counter() - t0
    drop(d)
    return n * len(batch) / dt / 1e6, dt / n * 1e6


def build_big_log(directory: Path, records: int, per_batch: int = 1000) -> PartitionLog:
    plog = PartitionLog(directory / "big-0", "big", 0, LogConfig(), now_ms=0)
    template = make_batch(per_batch, 8)
    for i in range(records // per_batch):
        set_times(template, per_batch, 1_700_000_000_000 + i * per_batch)
        plog.append(template, leader_epoch=0, now_ms=0)
    return plog


def percentiles(samples: list[float]) -> str:
    s = sorted(samples)
    return f"median {statistics.median(s):7.1f} us   p99 {s[int(len(s) * 0.99)]:7.1f} us"


def lookups(plog: PartitionLog, n: int) -> None:
    leo = plog.log_end_offset
    rnd = random.Random(1)
    by_offset = []
    for _ in range(n):
        off = rnd.randrange(leo)
        t0 = time.perf_counter()
        s = plog.read(off, 1 * MiB)
        by_offset.append((time.perf_counter() - t0) * 1e6)
        assert len(s) > 0
    by_ts = []
    for _ in range(n):
        ts = 1_700_000_000_000 + rnd.randrange(leo)
        t0 = time.perf_counter()
        found = plog.offset_for_timestamp(ts)
        by_ts.append((time.perf_counter() - t0) * 1e6)
        assert found is not None and found[1] == ts
    print(f"  read(offset, 1 MiB) -> FetchSlice     {percentiles(by_offset)}")
    print(
        f"  offset_for_timestamp(ts)              {percentiles(by_ts)}  (includes decoding one 1000-record batch)"
    )


def recovery_time(directory: Path, size: int, batch: bytes) -> tuple[float, int]:
    d = directory / "recover"
    drop(d)
    m = LogManager([d], LogConfig(segment_bytes=128 * MiB), cluster_id="bench", node_id=0, clock=lambda: 0)
    plog = m.get_or_create("r", 0)
    for _ in range(size // len(batch)):
        plog.append(batch, leader_epoch=0, now_ms=0)
    written = plog.size
    del plog, m
    gc.collect()
    (d / "recovery-point-offset-checkpoint").unlink()  # an unclean stop with no flush ever: scan it all
    t0 = time.perf_counter()
    m2 = LogManager([d], LogConfig(segment_bytes=128 * MiB), cluster_id="bench", node_id=0, clock=lambda: 0)
    dt = time.perf_counter() - t0
    plog2 = m2.get("r", 0)
    assert plog2 is not None and plog2.size == written
    del m2, plog2
    drop(d)
    return dt, written


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_per_partition(directory: Path, count: int) -> None:
    d = directory / "mem"
    drop(d)
    m = LogManager([d], LogConfig(), cluster_id="bench", node_id=0, clock=lambda: 0)
    small = batch_of_size(16 * 1024)
    gc.collect()
    fds0 = len(os.listdir("/proc/self/fd"))
    rss0 = rss_bytes()
    tracemalloc.start()
    for p in range(count):
        m.get_or_create("mem", p).append(small, leader_epoch=0, now_ms=0)
    heap, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss1 = rss_bytes()
    fds1 = len(os.listdir("/proc/self/fd"))
    print(f"  {count} partitions with one 16 KiB batch each:")
    print(f"  Python heap {heap / count / 1024:6.1f} KiB/partition   RSS {(rss1 - rss0) / count / 1024:6.1f} KiB/partition"
          f"   {(fds1 - fds0) / count:.0f} fds/partition (.log, and a map per index with entries)")  # fmt: skip
    print("  (an index gets its file and map, 10 MiB preallocated and sparse, with its first entry)")
    m.close()
    drop(d)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None, help="directory on the disk to measure (default: the temp dir)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (1 M records, 128 MiB appends)")
    args = ap.parse_args()
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-log-", dir=args.dir))
    total = (128 if args.quick else 512) * MiB
    try:
        print(f"== append throughput, {total // MiB} MiB each, into {work} (page cache, no fsync)")
        dd = dd_bandwidth(work, total)
        raw = os_write_bandwidth(work, total, MiB)
        print(f"  dd if=/dev/zero bs=1M (raw page-cache write)   {dd:8.0f} MB/s")
        print(f"  os.write 1 MiB chunks from Python, same disk   {raw:8.0f} MB/s")
        for label, size in (("16 KiB", 16 * 1024), ("1 MiB", MiB)):
            mbps, us = append_bandwidth(work, total, batch_of_size(size))
            print(f"  PartitionLog.append {label:>6} batches          {mbps:8.0f} MB/s   "
                  f"({us:.1f} us/append, {mbps / dd:.0%} of dd, {mbps / raw:.0%} of os.write)")  # fmt: skip

        records = 1_000_000 if args.quick else 10_000_000
        print(f"== lookups in a {records:,}-record log (batches of 1000 records)")
        t0 = time.perf_counter()
        plog = build_big_log(work, records)
        print(f"  built in {time.perf_counter() - t0:.1f} s: {plog.size / MiB:.0f} MiB, {len(plog.segments)} segment(s), "
              f"{sum(s.offset_index.entries for s in plog.segments)} offset index entries")  # fmt: skip
        lookups(plog, 2000)
        del plog
        drop(work / "big-0")

        size = (128 if args.quick else 256) * MiB
        print(f"== recovery after an unclean stop (measured on {size // MiB} MiB, scaled to 1 GiB)")
        for label, bsize in (("16 KiB", 16 * 1024), ("1 KiB", 1024)):
            dt, written = recovery_time(work, size, batch_of_size(bsize))
            print(f"  {label:>6} batches: {dt:6.2f} s for {written / MiB:.0f} MiB  ->  {dt * (1 << 30) / written:6.2f} s/GiB"
                  f"  ({written / dt / 1e6:.0f} MB/s, CRC-32C of every batch)")  # fmt: skip

        print("== memory per open partition")
        memory_per_partition(work, 200)
    finally:
        drop(work)


if __name__ == "__main__":
    main()
