"""The floor under the per-request rows (issue 31): what a Python server on uvloop costs when it does
only what no broker can skip. It cuts Produce frames out of its read buffer, pwrites each request's
records at the end of one file and answers with a fixed-shape Produce v8 answer: no validation, no
CRC, no offsets index, no producer state, no metrics, no turns. Measured with the same Go load and
the same jobs as the small-requests and produce-ceiling rows (small_requests.py), the gap between
these figures and a broker's is the broker's own work; the floor itself is the kernel's recv, pwrite
and send plus the least Python a loop turn takes.

    python -m benchmarks.request_floor [--requests 60000] [--ceiling-records 2000000] [--rounds 3]

`make bench` measures it in every round beside the page-cache write limit (machine limits).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

from benchmarks import wire_load
from benchmarks.brokers import free_port
from benchmarks.request_cost import user_system

TOPIC = "floor"
FIGURES = (
    "floor_requests_per_s",
    "floor_cpu_us_per_request",
    "floor_ceiling_mbs",
    "floor_ceiling_cpu_s_per_gb",
)
_READ_BUFFER = 1 << 20  # larger than a ceiling request (256 KiB): frames are always cut from it
_TAIL = (-1).to_bytes(8, "big", signed=True) + bytes(8 + 4) + (-1).to_bytes(2, "big", signed=True)
# log_append_time -1, log_start_offset 0, no record errors, error_message null


class _FloorProtocol(asyncio.BufferedProtocol):
    def __init__(self, fd: int, log_end: list[int]) -> None:
        self._fd, self._log_end = fd, log_end
        self._buf = bytearray(_READ_BUFFER)
        self._view = memoryview(self._buf)
        self._end = 0
        self._offsets: dict[bytes, int] = {}
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not asyncio's class

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._end == len(self._buf):  # a frame larger than the buffer: grow it (not on these jobs)
            self._buf = self._buf + bytes(len(self._buf))
            self._view = memoryview(self._buf)
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        buf, view = self._buf, self._view
        start, end = 0, self._end + nbytes
        answers = []
        while end - start >= 4:
            size = int.from_bytes(buf[start : start + 4], "big")
            if start + 4 + size > end:
                break
            answers.append(self._produce(start + 4))
            start += 4 + size
        if answers:
            assert self._transport is not None
            self._transport.write(b"".join(answers))
        if start:
            view[: end - start] = view[start:end]
        self._end = end - start

    def _produce(self, at: int) -> bytes:
        """A Produce v8 of one topic and one partition: its records to the file, its answer out."""
        buf = self._buf
        correlation = buf[at + 4 : at + 8]
        i = at + 10 + int.from_bytes(buf[at + 8 : at + 10], "big")  # past the client id
        txn = int.from_bytes(buf[i : i + 2], "big", signed=True)
        i += 2 + max(txn, 0) + 2 + 4 + 4  # transactional id, acks, timeout, one topic
        n = int.from_bytes(buf[i : i + 2], "big")
        name = bytes(buf[i : i + 2 + n])
        i += 2 + n + 4  # one partition
        partition = bytes(buf[i : i + 4])
        size = int.from_bytes(buf[i + 4 : i + 8], "big")
        position = self._log_end[0]
        self._log_end[0] += size
        os.pwrite(self._fd, self._view[i + 8 : i + 8 + size], position)
        key = name + partition
        base = self._offsets.get(key, 0)
        self._offsets[key] = base + 1
        body = b"".join((correlation, b"\0\0\0\1", name, b"\0\0\0\1", partition, b"\0\0",
                         base.to_bytes(8, "big"), _TAIL, bytes(4)))  # fmt: skip
        return len(body).to_bytes(4, "big") + body


async def _serve(port: int, path: Path) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    log_end = [0]
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _FloorProtocol(fd, log_end), "127.0.0.1", port)
    print("listening", flush=True)
    await server.serve_forever()


class FloorServer:
    """The floor server as a process of its own (its CPU is read from /proc), on a free port."""

    def __init__(self, workdir: Path) -> None:
        self.path = workdir / "floor.log"
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> FloorServer:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "benchmarks.request_floor",
            "--serve",
            str(self.port),
            str(self.path),
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, cwd=Path(__file__).parent.parent)
        assert self.process.stdout is not None
        if self.process.stdout.readline() != b"listening\n":
            raise RuntimeError("the floor server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        self.path.unlink(missing_ok=True)

    def produce(self, conns: int, partitions: int, requests: int, batch_records: int, in_flight: int,
                timeout: float) -> dict[str, float]:  # fmt: skip
        """One loadgen run: requests, seconds and the server's CPU seconds, as small_requests does."""
        from benchmarks import small_requests

        assert self.process is not None
        conns_job = small_requests.produce_job(
            self.addr, TOPIC, partitions, conns, requests, batch_records, "1"
        )
        job = {"mode": "produce", "in_flight": in_flight, "conns": conns_job}
        user0, system0 = user_system(self.process.pid)
        r = wire_load._run(job, timeout)
        user1, system1 = user_system(self.process.pid)
        user, system = user1 - user0, system1 - system0
        return {"requests": r["requests"], "seconds": r["seconds"], "cpu_s": user + system, "user_s": user,
                "records": r["records"]}  # fmt: skip


def measure(workdir: Path, small: int, ceiling_records: int, timeout: float = 300.0) -> dict[str, Any]:
    """The floor's figures for the small-requests row (acks=1) and the produce ceiling."""
    from benchmarks import small_requests as sr

    with FloorServer(workdir) as server:
        s = server.produce(sr.CONNS, sr.PARTITIONS, small, sr.SMALL_BATCH_RECORDS, sr.IN_FLIGHT, timeout)
        requests = max(sr.CEILING_CONNS, ceiling_records // sr.CEILING_BATCH_RECORDS)
        c = server.produce(sr.CEILING_CONNS, sr.CEILING_CONNS, requests, sr.CEILING_BATCH_RECORDS,
                           sr.CEILING_IN_FLIGHT, timeout)  # fmt: skip
    return {
        "floor_requests_per_s": s["requests"] / s["seconds"],
        "floor_cpu_us_per_request": s["cpu_s"] / s["requests"] * 1e6,
        "floor_ceiling_mbs": c["records"] * sr.RECORD_SIZE / c["seconds"] / 1e6,
        "floor_ceiling_cpu_s_per_gb": c["cpu_s"] / (c["records"] * sr.RECORD_SIZE / 1e9),
        "floor_user_us_per_request": s["user_s"] / s["requests"] * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=60_000, help="small requests per round")
    parser.add_argument("--ceiling-records", type=int, default=2_000_000, help="1 KiB records at the ceiling")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.serve:
        import uvloop

        uvloop.run(_serve(int(args.serve[0]), Path(args.serve[1])))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            f = measure(Path(tmp), args.requests, args.ceiling_records)
            print(
                f"round {r + 1}: small requests {f['floor_requests_per_s']:,.0f} req/s at "
                f"{f['floor_cpu_us_per_request']:.1f} us/request (user {f['floor_user_us_per_request']:.1f}); ceiling {f['floor_ceiling_mbs']:,.0f} MB/s "
                f"at {f['floor_ceiling_cpu_s_per_gb']:.2f} CPU s/GB",
                flush=True,
            )


if __name__ == "__main__":
    main()
