"""One client connection through the proxy, and its one upstream connection.

Frames from the client are cut by a FrameReader (a size over socket.request.max.bytes closes the
connection) and written upstream as received; each awaits its answer in a queue, since a Kafka
broker answers a connection's requests in order (Produce with acks=0 gets no answer and no
entry). Answers come back through frames.rewrite_answer: those that name nodes are decoded and
rewritten, everything else relayed as bytes. ApiVersions answers are intersected with the proxy's
codec, and a request newer than the proxy's ApiVersions is answered here, in its turn.

Backpressure both ways: when one side's transport holds proxy.buffer.bytes unsent, the proxy
stops reading the other side until it drains (asyncio's pause_writing/resume_writing).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from kcompat.proxy.api_versions import rewrite_api_versions, too_new, unsupported_answer
from kcompat.proxy.frames import PRODUCE_KEY, Pending, produce_acks, rewrite_answer
from kcompat.proxy.hooks import AnswerNow, CloseConnection, Exchange, RequestHook, ResponseHook
from kcompat.proxy.log_limit import LogLimit
from kcompat.proxy.node_map import NodeMap
from kcompat.wire.errors import DecodeError
from kcompat.wire.framing import FrameReader, FrameSizeError
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import API_VERSIONS_KEY, peek_header

log = logging.getLogger("kcompat.proxy")
_SIZE = struct.Struct(">i")
_UPSTREAM_MAX_FRAME = 2**31 - 1  # answers are the upstream's to size; clients asked for them


@dataclass
class Shared:
    """What every connection of one proxy shares."""

    nodes: NodeMap
    upstreams: list[tuple[str, int]]
    max_request: int
    buffer_bytes: int
    connect_timeout: float
    request_hook: RequestHook | None = None
    response_hook: ResponseHook | None = None
    upstream_tls: ssl.SSLContext | None = None
    logs: LogLimit = field(default_factory=LogLimit)
    connections: set[ClientConnection] = field(default_factory=set)
    upstream_sides: set[UpstreamSide] = field(default_factory=set)  # open upstream connections
    next_id: int = 0


@dataclass(slots=True)
class _Waiting:
    pending: Pending
    exchange: Exchange
    local: Sequence[Any] | None = None  # an answer the proxy gives itself, sent in its turn


class ClientConnection(asyncio.BufferedProtocol):
    def __init__(self, shared: Shared, node_id: int | None) -> None:
        self.shared = shared
        self.node_id = node_id
        shared.next_id += 1
        self.id = shared.next_id
        self.peer: tuple[str, int] = ("?", 0)
        self.transport: asyncio.Transport | None = None
        self.upstream: UpstreamSide | None = None
        self._reader = FrameReader(shared.max_request)
        self._waiting: deque[_Waiting] = deque()
        self._closed = False
        self._upstream_full = False
        self._connecting: asyncio.Task[None] | None = None

    # -- client side ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = (str(peer[0]), int(peer[1]))
        transport.set_write_buffer_limits(high=self.shared.buffer_bytes)
        transport.pause_reading()  # until the upstream connection is up
        self.shared.connections.add(self)
        self._connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        targets = self._targets()
        loop = asyncio.get_running_loop()
        why = "no upstream address is known for it"
        for host, port in targets:
            try:
                tls = self.shared.upstream_tls
                _, side = await asyncio.wait_for(
                    loop.create_connection(
                        lambda: UpstreamSide(self), host, port, ssl=tls, server_hostname=host if tls else None
                    ),
                    self.shared.connect_timeout,
                )
            except ssl.SSLError as e:
                why = f"TLS with {host}:{port} failed: {e.reason or e}; check proxy.upstream.ssl.*"
                continue
            except (OSError, TimeoutError) as e:
                why = (
                    f"{host}:{port} {'did not answer in time' if isinstance(e, TimeoutError) else 'refused'}"
                )
                continue
            if self._closed:
                side.close()
                return
            self.upstream = side
            self._take_frames()
            self._resume_client()
            return
        where = "the bootstrap listener" if self.node_id is None else f"node {self.node_id}"
        self.fail(
            f"upstream:{self.node_id}",
            f"cannot reach the upstream for {where} ({why}): closing the connection from "
            f"{self.peer[0]}:{self.peer[1]}; check that the upstream cluster runs and "
            "proxy.upstream.bootstrap.servers names it",
        )

    def _targets(self) -> list[tuple[str, int]]:
        if self.node_id is not None:
            address = self.shared.nodes.address(self.node_id)
            return [address] if address is not None else []
        ups = self.shared.upstreams
        start = self.id % len(ups)
        return ups[start:] + ups[:start]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._reader.buffer_updated(nbytes)
        self._take_frames()

    def _take_frames(self) -> None:
        if self.upstream is None:  # bytes that came before the upstream connection: kept till then
            if self.transport is not None:
                self.transport.pause_reading()
            return
        try:
            while not self._closed and (frame := self._reader.next_frame()) is not None:
                self._request(frame)
        except FrameSizeError as e:
            self.fail(
                "frame-size", f"closing the connection from {self.peer[0]}: {e} (socket.request.max.bytes)"
            )

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.shared.connections.discard(self)
        if self.upstream is not None:
            self.upstream.close()

    def pause_writing(self) -> None:  # the client reads slower than the upstream answers
        if self.upstream is not None:
            self.upstream.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.resume_reading()

    def close(self) -> None:
        self._closed = True
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
        if self.transport is not None:
            self.transport.close()
        if self.upstream is not None:
            self.upstream.close()

    def fail(self, kind: str, message: str) -> None:
        self.shared.logs.warning(log, kind, message)
        self.close()

    def _resume_client(self) -> None:
        if self.transport is not None and not self._closed and not self._upstream_full:
            self.transport.resume_reading()

    # -- requests ---------------------------------------------------------------------------------

    def _request(self, frame: bytes | bytearray) -> None:
        try:
            key, version, correlation = peek_header(frame)
        except DecodeError:
            self.fail(
                "short-frame", f"closing the connection from {self.peer[0]}: a request of {len(frame)} bytes"
            )
            return
        exchange = Exchange(self.id, self.peer, self.node_id, key, version, correlation)
        if self.shared.request_hook is not None:
            try:
                replaced = self.shared.request_hook(exchange, frame)
            except CloseConnection:
                self.close()
                return
            except AnswerNow as answer:
                self._waiting.append(_Waiting(Pending(key, version, correlation), exchange, answer.chunks))
                self._flush_local()
                return
            except Exception:  # a bug in the hook: this client only
                log.exception("the proxy's request hook failed: closing the connection from %s", self.peer[0])
                self.close()
                return
            if replaced is not None:
                frame = replaced
        pending = Pending(key, version, correlation)
        if key == API_VERSIONS_KEY and too_new(version):
            self._waiting.append(_Waiting(pending, exchange, unsupported_answer(correlation)))
            self._flush_local()
            return
        if key == PRODUCE_KEY and pending.known:
            try:
                acks = produce_acks(frame, version)
            except DecodeError:
                self.fail("bad-produce", f"closing the connection from {self.peer[0]}: an unreadable Produce")
                return
            if acks == 0:  # Kafka sends no answer: none is awaited
                self._send_upstream(frame)
                return
        if key not in APIS:
            self.shared.logs.info(log, f"unknown-key:{key}", f"relaying unknown API key {key} opaquely")
        self._waiting.append(_Waiting(pending, exchange))
        self._send_upstream(frame)

    def _send_upstream(self, frame: bytes | bytearray) -> None:
        assert self.upstream is not None  # the client is not read before the upstream is up
        self.upstream.write([_SIZE.pack(len(frame)), frame])

    # -- answers ----------------------------------------------------------------------------------

    def answer(self, frame: bytes | bytearray) -> None:
        """An answer frame (no size prefix) from the upstream."""
        if not self._waiting or len(frame) < 4:
            self.fail(
                "unasked", f"the upstream for {self.peer[0]} sent an answer nobody asked for: closing it"
            )
            return
        waiting = self._waiting.popleft()
        pending = waiting.pending
        correlation = _SIZE.unpack_from(frame)[0]
        if correlation != pending.correlation_id:
            self.fail(
                "correlation",
                f"the upstream answered correlation id {correlation}, expected {pending.correlation_id}: "
                "closing the client's connection",
            )
            return
        try:
            if pending.api_key == API_VERSIONS_KEY:
                chunks = rewrite_api_versions(pending.api_version, frame) or [_SIZE.pack(len(frame)), frame]
            else:
                chunks, _ = rewrite_answer(
                    pending, frame, self.shared.nodes.endpoint, self.shared.nodes.learn
                )
        except DecodeError as e:
            spec = APIS.get(pending.api_key)
            name = f"{spec.name if spec else pending.api_key} v{pending.api_version}"
            self.fail(
                "bad-answer", f"the upstream's answer to {name} does not decode ({e}): closing the connection"
            )
            return
        except Exception:  # a bug in the rewrite: this client only
            log.exception(
                "the proxy could not rewrite an answer: closing the connection from %s", self.peer[0]
            )
            self.close()
            return
        self._write(waiting.exchange, chunks)
        self._flush_local()

    def _flush_local(self) -> None:
        while self._waiting and self._waiting[0].local is not None:
            waiting = self._waiting.popleft()
            assert waiting.local is not None
            self._write(waiting.exchange, waiting.local)

    def _write(self, exchange: Exchange, chunks: Sequence[Any]) -> None:
        if self.shared.response_hook is not None:
            try:
                replaced = self.shared.response_hook(exchange, chunks)
            except CloseConnection:
                self.close()
                return
            except Exception:  # a bug in the hook: this client only
                log.exception(
                    "the proxy's response hook failed: closing the connection from %s", self.peer[0]
                )
                self.close()
                return
            if replaced is not None:
                chunks = replaced
        if self.transport is not None and not self._closed:
            self.transport.writelines(chunks)

    # -- upstream backpressure ----------------------------------------------------------------------

    def upstream_full(self, full: bool) -> None:
        self._upstream_full = full
        if self.transport is None or self._closed:
            return
        if full:
            self.transport.pause_reading()
        else:
            self._resume_client()


class UpstreamSide(asyncio.BufferedProtocol):
    """The proxy's connection to one upstream broker, on behalf of one client connection."""

    def __init__(self, client: ClientConnection) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self._reader = FrameReader(_UPSTREAM_MAX_FRAME)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)
        transport.set_write_buffer_limits(high=self.client.shared.buffer_bytes)
        self.client.shared.upstream_sides.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._reader.buffer_updated(nbytes)
        try:
            while (frame := self._reader.next_frame()) is not None:
                self.client.answer(frame)
        except FrameSizeError as e:
            self.client.fail(
                "upstream-frame", f"the upstream sent an invalid frame ({e}): closing the connection"
            )

    def write(self, chunks: Sequence[Any]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(chunks)

    def pause_writing(self) -> None:  # the upstream reads slower than the client sends
        self.client.upstream_full(True)

    def resume_writing(self) -> None:
        self.client.upstream_full(False)

    def pause_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        log.debug("upstream connection of client connection %d closed (%s)", self.client.id, exc)
        self.client.shared.upstream_sides.discard(self)
        self.client.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


ConnectionFactory = Callable[[], ClientConnection]
