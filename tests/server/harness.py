"""A Reactor on 127.0.0.1 in a thread of its own, serving a scriptable fake broker.

Fake request frame (after the size prefix):

    api_key int16 | api_version int16 | correlation_id int32 | command ASCII

Commands: "echo:<text>", "sleep:<seconds>:<text>", "later:<seconds>:<text>" (taken at once, answered
after the sleep: a Deferred acks=all Produce; the times it was taken and answered are kept),
"slowlater:<seconds>:<later args>" (as "later", taken only after a first sleep), "big:<n>" (n bytes of a pattern), "none" (no
response, like Produce acks=0), "close" (CloseConnection), "decode" (DecodeError), "boom"
(RuntimeError), "file" (the slice set in FakeBroker.slice between two byte chunks).
Response frame: size int32 | correlation_id int32 | payload.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import uvloop

from kcompat.config.listeners import Listener
from kcompat.server.network.connection import Client, Limits
from kcompat.server.network.reactor import Reactor
from kcompat.testing import recv_exact, wait_until
from kcompat.wire.errors import DecodeError


class CloseConnection(Exception):
    pass


def request(correlation_id: int, command: str, api_key: int = 3, api_version: int = 12) -> bytes:
    body = struct.pack(">hhi", api_key, api_version, correlation_id) + command.encode()
    return struct.pack(">i", len(body)) + body


def pattern(n: int) -> bytes:
    return (bytes(range(256)) * (n // 256 + 1))[:n]


def recv_response(sock: socket.socket) -> tuple[int, bytes]:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    data = recv_exact(sock, size)
    return struct.unpack(">i", data[:4])[0], data[4:]


class FakeBroker:
    def __init__(self) -> None:
        self.handled: list[int] = []
        self.active: dict[str, int] = {}
        self.max_active_per_connection = 0
        self.slice: Any = None
        self.principals: list[str] = []  # client.principal of each request
        self.taken: dict[int, float] = {}  # correlation id -> monotonic time it was handled
        self.answered: dict[int, float] = {}  # "later" answers: correlation id -> time ready
        self.later: dict[int, asyncio.Future[Any]] = {}  # "later" answers as returned

    async def handle(self, frame: memoryview, client: Client) -> Sequence[Any] | asyncio.Future[Any] | None:
        _, _, correlation = struct.unpack_from(">hhi", frame)
        command = bytes(frame[8:]).decode()
        self.taken[correlation] = time.monotonic()
        if command.startswith("slowlater:"):
            seconds, _, rest = command[10:].partition(":")
            await asyncio.sleep(float(seconds))
            command = "later:" + rest
        if command.startswith("later:"):
            self.handled.append(correlation)
            later = self.later[correlation] = asyncio.ensure_future(self._later(correlation, command[6:]))
            return later
        self.principals.append(client.principal)
        n = self.active.get(client.connection_id, 0) + 1
        self.active[client.connection_id] = n
        self.max_active_per_connection = max(self.max_active_per_connection, n)
        try:
            return await self._answer(correlation, command)
        finally:
            self.active[client.connection_id] -= 1
            self.handled.append(correlation)

    async def _later(self, correlation: int, arg: str) -> Sequence[Any]:
        seconds, _, text = arg.partition(":")
        await asyncio.sleep(float(seconds))
        self.answered[correlation] = time.monotonic()
        return [struct.pack(">ii", 4 + len(text), correlation), text.encode()]

    async def _answer(self, correlation: int, command: str) -> Sequence[Any] | None:
        verb, _, arg = command.partition(":")
        if verb == "sleep":
            seconds, _, text = arg.partition(":")
            await asyncio.sleep(float(seconds))
            payload = text.encode()
        elif verb == "echo":
            payload = arg.encode()
        elif verb == "big":
            payload = pattern(int(arg))
        elif verb == "none":
            return None
        elif verb == "close":
            raise CloseConnection("told to close")
        elif verb == "decode":
            raise DecodeError("bad bytes", "body.field")
        elif verb == "boom":
            raise RuntimeError("handler bug")
        elif verb == "file":
            head, tail = b"<", b">"
            size = 4 + len(head) + len(self.slice) + len(tail)
            return [struct.pack(">ii", size, correlation) + head, self.slice, tail]
        else:
            raise AssertionError(command)
        return [struct.pack(">ii", 4 + len(payload), correlation), payload]


class ServerThread:
    """A Reactor bound to 127.0.0.1:<free port>, running an event loop in a background thread."""

    def __init__(
        self,
        loop_kind: str,
        broker: FakeBroker | None = None,
        listener: Listener | None = None,
        **reactor_kw: Any,
    ) -> None:
        self.broker = broker or FakeBroker()
        self.loop = uvloop.new_event_loop() if loop_kind == "uvloop" else asyncio.new_event_loop()
        reactor_kw.setdefault("limits", Limits())
        self.reactor = Reactor(self.broker.handle, close_errors=(CloseConnection,), **reactor_kw)
        bound = self.reactor.bind([listener or Listener("PLAINTEXT", "127.0.0.1", 0)])
        self.port = bound[0][1]
        self._thread = threading.Thread(target=self._run, daemon=True)
        started: Future[None] = Future()
        self._started = started
        self._thread.start()
        started.result(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self.reactor.start)
        self.loop.call_soon(self._started.set_result, None)
        self.loop.run_forever()

    def connect(self, rcvbuf: int | None = None, source: str | None = None) -> socket.socket:
        """A client connection; from `source` (another 127.x address) to look like a second host."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source is not None:
            sock.bind((source, 0))
        sock.settimeout(5)
        sock.connect(("127.0.0.1", self.port))
        return sock

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the server's loop and return its result (to read state race-free)."""
        done: Future[Any] = Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as e:
                done.set_exception(e)

        self.loop.call_soon_threadsafe(run)
        return done.result(5)

    def wait_for(self, fn: Callable[[], Any], timeout: float = 5.0) -> Any:
        """`fn()`, run on the server's loop, once it is true; AssertionError after `timeout` seconds."""
        return wait_until(lambda: self.call(fn), fn.__qualname__, timeout=timeout, interval=0.001)

    def connection(self) -> Any:
        """The one live connection, once it is accepted."""
        (conn,) = self.wait_for(lambda: list(self.reactor.connections))
        return conn

    def connection_count(self, expect: int, timeout: float = 3.0) -> int:
        """The number of live connections, once it equals `expect` (or when `timeout` is up)."""
        deadline = time.monotonic() + timeout
        while True:
            n: int = self.call(lambda: len(self.reactor.connections))
            if n == expect or time.monotonic() > deadline:
                return n
            time.sleep(0.01)

    def shutdown(self, grace: float) -> None:
        asyncio.run_coroutine_threadsafe(self.reactor.shutdown(grace), self.loop).result(30)

    def stop(self) -> None:
        if self.loop.is_running():
            self.shutdown(0.5)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()
