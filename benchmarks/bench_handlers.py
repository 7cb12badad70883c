#!/usr/bin/env python3
"""Python cost per request on the hot paths, in process (no sockets): microseconds per
Broker.handle of a Produce or a Fetch, plus queuing the response on a ChunkWriter (the transport's
per-response work short of the syscalls).

    python benchmarks/bench_handlers.py [--seconds 1.0] [--cpu]

Cases: Produce v9 of one batch (16 KiB of 100-byte records, a Java producer's batch.size; 1 MiB,
librdkafka's), acks=1; Fetch v12 of one partition (1 MiB, the clients' max.partition.fetch.bytes)
at an offset with data, and at the log end with max_wait_ms=0 (an empty poll). Best of 5
rounds, each as many calls as fit in --seconds / 5. --cpu times with the process's CPU clock instead
of the wall clock: steadier on a machine other work loads (its waits for a core are not counted).
Figures, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from kcompat.config import BrokerConfig
from kcompat.server.broker import Broker
from kcompat.server.network.connection import Client
from kcompat.server.network.sendfile import ChunkWriter
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.protocol import encode_request
from kcompat.wire.records import Record, build_batch

CLIENT = Client("127.0.0.1:9092-127.0.0.1:5555-0", "127.0.0.1", 5555, "PLAINTEXT", "PLAINTEXT")


def batch_of(total: int, size: int) -> bytes:
    value = b"x" * size
    n = max(1, total // (size + 8))
    return build_batch([Record(i, 1_700_000_000_000, None, value) for i in range(n)])


def produce_frame(topic: str, records: bytes) -> memoryview:
    body = {
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    return memoryview(encode_request(PRODUCE.key, 9, 1, body, client_id="bench"))[4:]


def fetch_frame(topic: str, offset: int, partition_max: int) -> memoryview:
    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": partition_max}]}],
    }  # fmt: skip
    return memoryview(encode_request(FETCH.key, 12, 1, body, client_id="bench"))[4:]


async def per_call_us(fn: Any, seconds: float, clock: Any = time.perf_counter) -> float:
    best = float("inf")
    for _ in range(5):
        n = 0
        t0 = clock()
        while (elapsed := clock() - t0) < seconds / 5:
            for _ in range(20):
                await fn()
            n += 20
        best = min(best, elapsed / n * 1e6)
    return best


async def main_async(seconds: float, clock: Any = time.perf_counter) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = BrokerConfig(
            {"log.dirs": str(Path(tmp) / "data"), "listeners": "PLAINTEXT://127.0.0.1:19092"}
        )
        broker = Broker(config)
        await broker.start()
        a, b = socket.socketpair()
        writer = ChunkWriter(a)
        try:
            cases: dict[str, Any] = {}
            for label, total, size in (("16 KiB of 100 B", 16 << 10, 100), ("1 MiB of 1 KiB", 1 << 20, 1024)):
                frame = produce_frame(f"p{size}", batch_of(total, size))

                async def produce(frame: memoryview = frame) -> None:
                    writer.add(await broker.handle(frame, CLIENT) or ())
                    writer.clear()

                cases[f"Produce v9, {label}"] = produce
            for size in (100, 1024):
                await broker.handle(produce_frame("f", batch_of(1 << 20, size)), CLIENT)
            at_data = fetch_frame("f", 0, 1 << 20)
            at_end = fetch_frame("f", broker.replicas.partition_log("f", 0).log_end_offset, 1 << 20)

            async def fetch_data() -> None:
                writer.add(await broker.handle(at_data, CLIENT) or ())
                writer.clear()

            async def fetch_end() -> None:
                writer.add(await broker.handle(at_end, CLIENT) or ())
                writer.clear()

            cases["Fetch v12, 1 MiB at an offset with data"] = fetch_data
            cases["Fetch v12, at the log end (empty)"] = fetch_end
            for name, fn in cases.items():
                await fn()
                print(f"{name:42} {await per_call_us(fn, seconds, clock):8.1f} us")
        finally:
            a.close()
            b.close()
            await broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per case")
    parser.add_argument("--cpu", action="store_true", help="time with the process's CPU clock")
    args = parser.parse_args()
    asyncio.run(main_async(args.seconds, time.process_time if args.cpu else time.perf_counter))


if __name__ == "__main__":
    main()
