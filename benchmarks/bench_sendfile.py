#!/usr/bin/env python3
"""Loopback throughput of a page-cached file: raw os.sendfile vs kcompat's connection layer.

    python benchmarks/bench_sendfile.py [--mib 256] [--rounds 3]

The reader is a separate process (recv_into a 4 MiB buffer), so it does not share the GIL with
the server. Cases run interleaved, --rounds times each; printed: best and median MB/s (10^6
bytes per second) from the request to the last byte received:

  raw os.sendfile                a blocking socket and os.sendfile in a loop: the ceiling
  seam, <loop>, one piece        one request through a Reactor connection whose (fake) broker
                                 answers with a size prefix and a FetchSlice of the whole file
  seam, <loop>, 1 MiB pieces     the same slice cut in 1 MiB pieces (many segments)
  seam, uvloop, SO_SNDBUF 100 KiB  with Kafka's default socket.send.buffer.bytes (102400) applied
  seam, uvloop, copying fallback   with os.sendfile disabled (pread + send), for comparison
  raw TLS sendall                  a blocking SSLSocket sending 256 KiB blocks: the TLS ceiling
  seam, uvloop, TLS                an SSL listener (TLS 1.3, the reader decrypts): the file bytes are
                                 read and encrypted in user space; kernel TLS, which would let
                                 sendfile work, is reported as available or not (Python 3.11's ssl
                                 has no OP_ENABLE_KTLS; the kernel needs its `tls` module)

The machine's other load moves these figures a lot; compare cases of one run, not runs.
Figures, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvloop

from kcompat.config.listeners import Listener
from kcompat.log.log_file import FetchSlice, FilePiece, LogFile
from kcompat.server.network import sendfile
from kcompat.server.network.connection import Client, Limits
from kcompat.server.network.listeners import ListenerTransport
from kcompat.server.network.reactor import Reactor

REQUEST = struct.pack(">ihhi", 8, 1, 11, 1)  # a size prefix and a header: Fetch v11, correlation 1


def reader(port: int, nbytes: int, request: bytes, out: Any, ca: str | None = None) -> None:
    buf = memoryview(bytearray(4 << 20))
    with socket.create_connection(("127.0.0.1", port)) as raw:
        t0 = time.perf_counter()
        s = raw
        if ca is not None:  # the handshake is part of the time, as a client's first fetch pays it
            ctx = ssl.create_default_context(cafile=ca)
            s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        if request:
            s.sendall(request)
        got = 0
        while got < nbytes:
            n = s.recv_into(buf)
            if not n:
                break
            got += n
        out.send((got, time.perf_counter() - t0))


def measure(port: int, nbytes: int, request: bytes, ca: str | None = None) -> float:
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=reader, args=(port, nbytes, request, child, ca))
    p.start()
    got, seconds = parent.recv()
    p.join()
    assert got == nbytes, (got, nbytes)
    return nbytes / seconds / 1e6


def raw_sendfile(path: Path, size: int) -> float:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            with conn, open(path, "rb") as f:
                offset = 0
                while offset < size:
                    offset += os.sendfile(conn.fileno(), f.fileno(), offset, size - offset)

        t = threading.Thread(target=serve)
        t.start()
        mbs = measure(port, size, b"")
        t.join()
        return mbs


def raw_tls(path: Path, size: int, tls: tuple[ssl.SSLContext, str]) -> float:
    """The TLS ceiling: a blocking SSLSocket sending the file in 256 KiB reads, in a thread."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            with tls[0].wrap_socket(conn, server_side=True) as s, open(path, "rb") as f:
                while block := f.read(256 << 10):
                    s.sendall(block)

        t = threading.Thread(target=serve)
        t.start()
        mbs = measure(port, size, b"", tls[1])
        t.join()
        return mbs


def seam(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
    fetch: FetchSlice,
    send_buffer: int = -1,
    tls: tuple[ssl.SSLContext, str] | None = None,
) -> float:
    size = len(fetch)

    async def handle(frame: memoryview, client: Client) -> list[Any]:
        return [struct.pack(">ii", 4 + size, 1), fetch]

    loop = loop_factory()
    name = "SSL" if tls else "PLAINTEXT"
    transports = {name: ListenerTransport(tls[0])} if tls else None
    reactor = Reactor(handle, limits=Limits(), send_buffer=send_buffer, transports=transports)
    ((_, port),) = reactor.bind([Listener(name, "127.0.0.1", 0, name)])
    thread = threading.Thread(target=loop.run_forever)
    loop.call_soon_threadsafe(reactor.start)
    thread.start()
    try:
        return measure(port, 8 + size, REQUEST, tls[1] if tls else None)
    finally:
        asyncio.run_coroutine_threadsafe(reactor.shutdown(1.0), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def copying(fn: Callable[[], float]) -> Callable[[], float]:
    def run() -> float:
        saved = sendfile._sendfile
        sendfile._sendfile = None
        try:
            return fn()
        finally:
            sendfile._sendfile = saved

    return run


def tls_context(tmp: str) -> tuple[ssl.SSLContext, str]:
    """A server context with a certificate made now (trustme), and the CA file the reader trusts."""
    import trustme

    ca = trustme.CA()
    ca_path = str(Path(tmp) / "ca.pem")
    ca.cert_pem.write_to_path(ca_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    return server, ca_path


def ktls_state() -> str:
    missing = [
        why
        for ok, why in (
            (
                hasattr(ssl, "OP_ENABLE_KTLS"),
                f"Python {'.'.join(map(str, sys.version_info[:2]))}'s ssl has no OP_ENABLE_KTLS",
            ),
            (os.path.exists("/sys/module/tls"), "the kernel's tls module is not loaded"),
        )
        if not ok
    ]
    return (
        "kernel TLS: unavailable (" + "; ".join(missing) + ")"
        if missing
        else "kernel TLS: available, not used"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    size = args.mib << 20
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "00000000000000000000.log"
        block = os.urandom(1 << 20)
        with open(path, "wb") as f:
            f.writelines(block for _ in range(args.mib))
        with open(path, "rb") as f:  # into the page cache
            while f.read(16 << 20):
                pass
        segment = LogFile(path)
        whole = FetchSlice((FilePiece(segment, 0, size),), 0)
        pieces = FetchSlice(tuple(FilePiece(segment, i << 20, 1 << 20) for i in range(args.mib)), 0)
        aio, uv = asyncio.new_event_loop, uvloop.new_event_loop
        cases: dict[str, Callable[[], float]] = {
            "raw os.sendfile": lambda: raw_sendfile(path, size),
            "seam, asyncio, one piece": lambda: seam(aio, whole),
            "seam, uvloop, one piece": lambda: seam(uv, whole),
            "seam, asyncio, 1 MiB pieces": lambda: seam(aio, pieces),
            "seam, uvloop, 1 MiB pieces": lambda: seam(uv, pieces),
            "seam, uvloop, SO_SNDBUF 100 KiB": lambda: seam(uv, whole, send_buffer=102400),
            "seam, uvloop, copying fallback": copying(lambda: seam(uv, whole)),
            "raw TLS sendall": lambda: raw_tls(path, size, tls),
            "seam, uvloop, TLS": lambda: seam(uv, whole, tls=tls),
        }
        tls = tls_context(tmp)
        results: dict[str, list[float]] = {name: [] for name in cases}
        sendfile.STATS.reset()
        for _ in range(args.rounds):  # interleaved, so that a busy moment of the machine hits all cases
            for name, run in cases.items():
                results[name].append(run())
        assert sendfile.STATS.sendfile_bytes == 5 * args.rounds * size
        assert sendfile.STATS.fallback_bytes == 2 * args.rounds * size
        print(
            f"{args.mib} MiB page-cached file to 127.0.0.1, {args.rounds} rounds, MB/s (best / median); {ktls_state()}"
        )
        for name, figures in results.items():
            figures.sort()
            print(f"  {name:34} {figures[-1]:6.0f} / {figures[len(figures) // 2]:6.0f}")
        segment.close()


if __name__ == "__main__":
    main()
