"""Metadata for all partitions at scale: kcompat and Kafka 4.3.1 in one run.

    python -m benchmarks.metadata_scale [--brokers kafka,kcompat] [--sizes 100x50,380x50] [--requests 50]

Per broker and size, started fresh: TOPICS x PARTITIONS created (as the scale suite does), every
partition visible in Metadata and the broker idle again, then REQUESTS Metadata v12 requests for
all topics, one after the other on one connection, written as a raw frame so that no client's own
decoding is timed. Figures: median and p99 of the time from
sending a request to holding its whole answer, and the broker's CPU milliseconds per request
(/proc: steadier than wall time on a busy machine), and the answer's size.
"""

from __future__ import annotations

import argparse
import logging
import socket
import statistics
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from benchmarks.brokers import BrokerProcess, KafkaBroker, KcompatBroker
from benchmarks.metadata_probe import _recv_exact
from benchmarks.proc_stats import cpu_seconds, rss_bytes
from benchmarks.scale import create, parse_sizes
from benchmarks.suite import percentile

log = logging.getLogger("benchmarks")


def metadata_v12_all(correlation_id: int) -> bytes:
    """Metadata v12, header v2: topics null (all), no auto-creation, no authorized operations."""
    client = b"kcompat-bench"
    header = struct.pack(">hhih", 3, 12, correlation_id, len(client)) + client + b"\x00"
    body = b"\x00" + b"\x00" + b"\x00" + b"\x00"  # topics=null, allow_auto=0, include_ops=0, no tags
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def wait_visible(bootstrap: str, expected: int, timeout: float = 300.0) -> None:
    """Until Metadata names every partition: Kafka answers CreateTopics once its controller has
    committed the topics, and its broker side learns of them a little later."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=60)
        n = sum(len(t.partitions) for name, t in md.topics.items() if name.startswith("scale-"))
        if n == expected:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"Metadata names {n} of {expected} partitions after {timeout:.0f} s")
        time.sleep(0.5)


def settle(pid: int, timeout: float = 120.0) -> None:
    """Until the broker is idle (under 5% of a core over a second): kcompat makes partition logs
    after CreateTopics has answered, Kafka loads its new partitions; neither is what is timed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cpu0 = cpu_seconds(pid)
        time.sleep(1.0)
        if cpu_seconds(pid) - cpu0 < 0.05:
            return
    log.warning("broker %d still busy after %.0f s", pid, timeout)


def measure(broker: BrokerProcess, requests: int) -> dict[str, float]:
    times = []
    size = 0
    with socket.create_connection((broker.host, broker.port), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(3):  # warm: caches filled, JIT compiled
            sock.sendall(metadata_v12_all(i))
            (n,) = struct.unpack(">i", _recv_exact(sock, 4))
            _recv_exact(sock, n)
        cpu0 = cpu_seconds(broker.pid)
        for i in range(requests):
            t0 = time.perf_counter()
            sock.sendall(metadata_v12_all(100 + i))
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            frame = _recv_exact(sock, size)
            times.append((time.perf_counter() - t0) * 1000)
            if struct.unpack_from(">i", frame)[0] != 100 + i:
                raise RuntimeError("answer to another request")
        cpu = cpu_seconds(broker.pid) - cpu0
    return {
        "median_ms": statistics.median(times),
        "p99_ms": percentile(times, 99),
        "cpu_ms_per_request": cpu * 1000 / requests,
        "answer_kb": size / 1000,
        "rss_mb": rss_bytes(broker.pid) / 1e6,
    }


def run(
    names: list[str], topics: int, partitions: int, requests: int, workdir: Path | None
) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="kcompat-mdscale-", dir=workdir))
    results: dict[str, Any] = {}
    for name in names:
        broker: BrokerProcess = KafkaBroker(base / name) if name == "kafka" else KcompatBroker(base / name)
        if name == "kafka" and (why := KafkaBroker.available()) is not None:
            results[name] = {"error": why}
            continue
        try:
            broker.start()
            create(broker.bootstrap, topics, partitions)
            wait_visible(broker.bootstrap, topics * partitions)
            settle(broker.pid)
            results[name] = measure(broker, requests)
        except Exception as e:
            log.warning("%s: %s", name, e)
            results[name] = {"error": f"{type(e).__name__}: {e}"}
        finally:
            broker.stop()
            broker.cleanup()
        log.info("%s %dx%d: %s", name, topics, partitions, results[name])
    return results


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.metadata_scale", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--brokers", default="kafka,kcompat")
    ap.add_argument("--sizes", type=parse_sizes, default=[(100, 50), (380, 50)])
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for topics, partitions in args.sizes:
        res = run(args.brokers.split(","), topics, partitions, args.requests, args.workdir)
        print(f"\n{topics} topics x {partitions} partitions, Metadata v12 for all, {args.requests} requests")
        print("| broker | median ms | p99 ms | broker CPU ms/request | answer kB | RSS MB |")
        print("|---|---:|---:|---:|---:|---:|")
        for n, r in res.items():
            if "error" in r:
                print(f"| {n} | {r['error']} |")
                continue
            print(f"| {n} | {r['median_ms']:.1f} | {r['p99_ms']:.1f} | {r['cpu_ms_per_request']:.1f} "
                  f"| {r['answer_kb']:.0f} | {r['rss_mb']:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
