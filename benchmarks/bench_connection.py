#!/usr/bin/env python3
"""Python cost of framing on a real socket: a Connection over a socketpair, fed pipelined frames
by a writer thread, with a handler that answers nothing (so only reading and framing are timed).

    python benchmarks/bench_connection.py [--rounds 5]

Cases: 100-byte frames (a pipelining client's small requests: per-frame cost), 16 KiB frames
(a Java producer's batch) and 1 MiB frames (larger than the read buffer: received into a buffer
of their own). Best of --rounds. Figures, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import threading
import time
from collections.abc import Sequence

from kcompat.server.network.connection import Client, Connection, Limits
from kcompat.server.network.sendfile import Chunk

CLIENT = Client("bench", "127.0.0.1", 5555, "PLAINTEXT", "PLAINTEXT")


async def one_round(size: int, count: int) -> float:
    """Seconds to receive and hand over `count` frames of `size` bytes."""
    a, b = socket.socketpair()
    frame = size.to_bytes(4, "big") + b"\x00" * size
    per_write = max(1, (256 << 10) // len(frame))
    payload = frame * per_write
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    seen = 0

    async def handle(_frame: memoryview, _client: Client) -> Sequence[Chunk] | None:
        nonlocal seen
        seen += 1
        if seen == count and not done.done():
            done.set_result(None)
        return None

    def write() -> None:
        left = count
        while left > 0:
            n = min(left, per_write)
            b.sendall(payload if n == per_write else frame * n)
            left -= n

    conn = Connection(a, CLIENT, handle, limits=Limits())
    conn.start()
    t0 = time.perf_counter()
    writer = threading.Thread(target=write)
    writer.start()
    await done
    elapsed = time.perf_counter() - t0
    writer.join()
    conn.close()
    b.close()
    return elapsed


async def main_async(rounds: int) -> None:
    for label, size, count in (
        ("100 B frames", 100, 200_000),
        ("16 KiB frames", 16 << 10, 20_000),
        ("1 MiB frames", 1 << 20, 400),
    ):
        best = min([await one_round(size, count) for _ in range(rounds)])
        print(f"{label:16} {best / count * 1e6:8.2f} us/frame {count * size / best / 1e6:9.1f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per case (best is shown)")
    asyncio.run(main_async(parser.parse_args().rounds))


if __name__ == "__main__":
    main()
