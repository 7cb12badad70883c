#!/usr/bin/env python3
"""What the metrics' counting costs a Produce and a Fetch: CPU microseconds per Broker.handle with
the counters of kcompat/server/broker_stats.py working, against the same with them replaced by
no-ops, alternating in one process (CPU time, not wall time, so that other load on the machine
does not decide the answer).

    python -m benchmarks.bench_metrics_cost [--rounds 8] [--calls 1000]

Cases as in bench_handlers.py: Produce v9 of one 16 KiB batch of 100-byte records, acks=1; Fetch v12
of 1 MiB at an offset with data. Figures, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks import bench_handlers as bh
from kcompat.config import BrokerConfig
from kcompat.server import broker_stats
from kcompat.server.broker import Broker
from kcompat.server.network.sendfile import ChunkWriter

_REAL = {name: getattr(broker_stats.BrokerStats, name) for name in ("observe", "records_in", "bytes_out")}


def _counting(on: bool) -> None:
    for name, fn in _REAL.items():
        setattr(broker_stats.BrokerStats, name, fn if on else (lambda self, *a, **k: None))


async def _cpu_us(fn: Callable[[], Awaitable[None]], calls: int) -> float:
    t0 = time.process_time()
    for _ in range(calls):
        await fn()
    return (time.process_time() - t0) / calls * 1e6


async def main_async(rounds: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = BrokerConfig(
            {"log.dirs": str(Path(tmp) / "data"), "listeners": "PLAINTEXT://127.0.0.1:19092"}
        )
        broker = Broker(config)
        await broker.start()
        a, b = socket.socketpair()
        writer = ChunkWriter(a)
        produce_frame = bh.produce_frame("p", bh.batch_of(16 << 10, 100))
        await broker.handle(bh.produce_frame("f", bh.batch_of(1 << 20, 1024)), bh.CLIENT)
        fetch_frame = bh.fetch_frame("f", 0, 1 << 20)

        async def produce() -> None:
            writer.add(await broker.handle(produce_frame, bh.CLIENT) or ())
            writer.clear()

        async def fetch() -> None:
            writer.add(await broker.handle(fetch_frame, bh.CLIENT) or ())
            writer.clear()

        results: dict[tuple[str, bool], list[float]] = {}
        cases: list[tuple[str, Any]] = [("Produce v9, 16 KiB of 100 B", produce), ("Fetch v12, 1 MiB", fetch)]
        try:
            for r in range(rounds):
                for on in (True, False) if r % 2 else (False, True):
                    _counting(on)
                    for name, fn in cases:
                        results.setdefault((name, on), []).append(await _cpu_us(fn, calls))
        finally:
            _counting(True)
            a.close()
            b.close()
            await broker.close()
        for name, _ in cases:
            on, off = results[(name, True)], results[(name, False)]
            print(f"{name:30} counting on {statistics.median(on):6.1f} us CPU, off {statistics.median(off):6.1f} us "
                  f"(medians of {rounds}; best {min(on):.1f} / {min(off):.1f})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    asyncio.run(main_async(args.rounds, args.calls))


if __name__ == "__main__":
    main()
