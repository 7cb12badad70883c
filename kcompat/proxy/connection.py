"""One client connection through the proxy, and its one upstream connection.

Frames from the client are cut by a RelayReader (a size over socket.request.max.bytes closes the
connection) and written upstream as received, a large one that nothing here must see whole as its
bytes arrive (request_stream.py); each awaits its answer in request order (answer_queue.py; Produce
with acks=0 gets no answer and no entry). ApiVersions answers are intersected with the proxy's codec, and a
request newer than the proxy's ApiVersions is answered here, in its turn. Backpressure both ways:
when one side's transport holds proxy.buffer.bytes unsent, the other side is not read until it
drains (pause_writing/resume_writing). Hooks may hold a request (HoldRequest: relayed later, or
never) or an answer (HoldAnswer: sent later, or never), which is how fault rules delay, black-hole
and throttle: held requests wait in an outbox, in order, and answers leave in request order, each
when its time has come, so one held answer holds the ones after it (as a broker's would). Timers
do the waiting, never the hook.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from kcompat.proxy.answer_queue import AnswerQueue, _Waiting
from kcompat.proxy.api_versions import too_new, unsupported_answer
from kcompat.proxy.frames import PRODUCE_KEY, Pending, produce_acks
from kcompat.proxy.hooks import (
    AnswerNow,
    CloseConnection,
    Exchange,
    HoldRequest,
)
from kcompat.proxy.relay_reader import RelayReader
from kcompat.proxy.request_stream import RequestStream
from kcompat.proxy.sasl import LoginFailed
from kcompat.proxy.shared import Shared
from kcompat.proxy.sni import server_name
from kcompat.proxy.tenant import Refused, refused_answer
from kcompat.proxy.upstream import UpstreamSide
from kcompat.security.sasl_exchange import SaslState
from kcompat.wire.errors import DecodeError
from kcompat.wire.framing import FrameSizeError
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import API_VERSIONS_KEY, UnsupportedRequest, peek_header

log = logging.getLogger("kcompat.proxy")


def _hooks_idle(hook: object, shared: Shared, exchange: Exchange | None) -> bool:
    """No hook, or one that says it passes this exchange untouched (Shared.hooks_idle)."""
    return hook is None or (shared.hooks_idle is not None and shared.hooks_idle(exchange))


_SIZE = struct.Struct(">i")


class ClientConnection(AnswerQueue, asyncio.BufferedProtocol):
    def __init__(self, shared: Shared, node_id: int | None) -> None:
        self.shared = shared
        self.node_id = node_id
        shared.next_id += 1
        self.id = shared.next_id
        self.peer: tuple[str, int] = ("?", 0)
        self.transport: asyncio.Transport | None = None
        self.upstream: UpstreamSide | None = None
        self._reader = RelayReader(
            self._open_request_stream, self._frame, max_size=shared.max_request, chunk=64 << 10, grow=True
        )
        self._early: deque[bytes | bytearray] = deque()  # frames that came before the upstream was up
        self._waiting: deque[_Waiting] = deque()  # every answer owed, in request order
        self._inflight: deque[_Waiting] = deque()  # those the upstream owes, in the order sent
        self._outbox: deque[tuple[float, bytes | bytearray, bool]] = deque()  # held (due, frame, answered)
        self._outbox_bytes = 0
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._closed = False
        self._upstream_full = False
        self._held_full = False  # the outbox holds proxy.buffer.bytes: the client is not read
        self._connecting: asyncio.Task[None] | None = None
        self.auth = shared.client_sasl() if shared.client_sasl is not None else None
        self.principal = "User:ANONYMOUS"  # SASL terminated here: the authenticated principal

    # -- client side ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = (str(peer[0]), int(peer[1]))
        transport.set_write_buffer_limits(high=self.shared.buffer_bytes)
        transport.pause_reading()  # until the upstream connection is up
        self.shared.connections.add(self)
        if self.shared.sni is not None and self.node_id is None:
            self.node_id = self.shared.sni.node_id(server_name(transport.get_extra_info("ssl_object")))
        hook = self.shared.connect_hook
        if hook is not None and not hook(self.node_id, self.peer):  # a fault rule cuts this node off
            self.close()
            return
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
                        lambda: UpstreamSide(self, self.shared),
                        host,
                        port,
                        ssl=tls,
                        server_hostname=host if tls else None,
                    ),
                    self.shared.connect_timeout,
                )
                await asyncio.wait_for(side.login(), self.shared.connect_timeout)
            except LoginFailed as e:
                self.fail(
                    f"upstream-login:{host}:{port}",
                    f"the upstream {host}:{port} refused the proxy's SASL login ({e}): closing the connection "
                    f"from {self.peer[0]}; check proxy.upstream.sasl.mechanism and proxy.upstream.sasl.jaas.config",
                )
                return
            except ssl.SSLError as e:
                why = f"TLS with {host}:{port} failed: {e.reason or e}; check proxy.upstream.ssl.*"
                continue
            except (OSError, TimeoutError, ConnectionError) as e:
                why = f"{host}:{port} {'timed out' if isinstance(e, TimeoutError) else 'refused'}"
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
        try:
            self._reader.buffer_updated(nbytes)
        except FrameSizeError as e:
            self.fail(
                "frame-size", f"closing the connection from {self.peer[0]}: {e} (socket.request.max.bytes)"
            )
        except DecodeError:
            self.fail("short-frame", f"closing the connection from {self.peer[0]}: an unreadable request")

    def _frame(self, frame: bytes | bytearray) -> None:
        if self.upstream is None or self._early:  # kept until the upstream connection is up
            self._early.append(frame)
            if self.transport is not None:
                self.transport.pause_reading()
        elif not self._closed:
            self._request(frame)

    def _take_frames(self) -> None:
        while self._early and not self._closed:
            self._request(self._early.popleft())

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.shared.connections.discard(self)
        if (report := self.shared.report) is not None:
            report.closed(self.id)
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
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
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
        if self.transport is not None and not self._closed and not (self._upstream_full or self._held_full):
            self.transport.resume_reading()

    # -- requests ---------------------------------------------------------------------------------

    def _request(self, frame: bytes | bytearray) -> None:
        if self.auth is not None and not self._authenticated(frame):
            return
        try:
            key, version, correlation = peek_header(frame)
        except DecodeError:
            self.fail("short-frame", f"closing the connection from {self.peer[0]}: an unreadable request")
            return
        if self.shared.report is not None:
            self.shared.report.request(self.id, self.peer[0], key, version, frame, self.shared.upstream_apis)
        exchange = Exchange(self.id, self.peer, self.node_id, key, version, correlation, self.principal)
        pending = Pending(key, version, correlation)
        hold: float | None = 0.0
        if self.shared.request_hook is not None:
            hooked = self._request_hook(frame, pending, exchange)
            if hooked is None:
                return
            frame, hold = hooked
        if self.shared.tenant is not None:
            renamed = self._tenant_request(frame, pending, exchange)
            if renamed is None:
                return
            frame, pending = renamed
        if key == API_VERSIONS_KEY and too_new(version):
            self._answer_here(_Waiting(pending, exchange), unsupported_answer(correlation))
            return
        answered = True
        if key == PRODUCE_KEY and pending.known:
            try:
                answered = produce_acks(frame, version) != 0  # acks=0: Kafka sends no answer
            except DecodeError:
                self.fail("bad-produce", f"closing the connection from {self.peer[0]}: an unreadable Produce")
                return
        if key not in APIS:
            self.shared.logs.info(log, f"unknown-key:{key}", f"relaying unknown API key {key} opaquely")
        if hold is None:  # swallowed: never relayed, never answered
            if answered:
                self._waiting.append(_Waiting(pending, exchange, never=True))
            return
        if answered:
            waiting = _Waiting(pending, exchange)
            self._waiting.append(waiting)
            self._inflight.append(waiting)
        self._send_upstream(frame, hold, answered)

    def _authenticated(self, frame: bytes | bytearray) -> bool:
        """The SASL exchange's say on a client frame: True to relay it, else answered or closed here."""
        assert self.auth is not None
        raw = self.auth.state is SaslState.RAW_TOKEN  # SaslHandshake v0: a bare token, answered bare
        step = self.auth.step(memoryview(frame), asyncio.get_running_loop().time())
        self.principal = self.auth.principal or self.principal
        if step.to_broker:
            return True
        waiting = None
        if step.chunks is not None and not raw:
            header = peek_header(frame)
            waiting = _Waiting(Pending(*header), Exchange(self.id, self.peer, self.node_id, *header))
        if step.close is None:
            self._sasl_answer(waiting, step.chunks)
        else:  # refused: answered after connection.failed.authentication.delay.ms, then closed
            if self.transport is not None:
                self.transport.pause_reading()
            asyncio.get_running_loop().call_later(
                step.delay_s, self._refused, waiting, step.chunks, step.close
            )
        return False

    def _sasl_answer(self, waiting: _Waiting | None, chunks: Sequence[Any] | None) -> None:
        if waiting is not None and chunks is not None:
            self._answer_here(waiting, chunks)  # in its turn, behind the answers owed
        elif chunks is not None and self.transport is not None:
            self.transport.writelines(chunks)

    def _refused(self, waiting: _Waiting | None, chunks: Sequence[Any] | None, why: str) -> None:
        if not self._closed:
            self._sasl_answer(waiting, chunks)
            self.fail("sasl", f"closing the connection from {self.peer[0]}: {why}")

    def _request_hook(
        self, frame: bytes | bytearray, pending: Pending, exchange: Exchange
    ) -> tuple[bytes | bytearray, float | None] | None:
        """The frame to relay and how long to hold it (None: never); None: answered or closed here."""
        assert self.shared.request_hook is not None
        try:
            replaced = self.shared.request_hook(exchange, frame)
        except CloseConnection:
            self.close()
            return None
        except AnswerNow as answer:
            self._answer_here(_Waiting(pending, exchange), answer.chunks)
            return None
        except HoldRequest as held:
            return frame, held.delay
        except Exception:  # a bug in the hook: this client only
            log.exception("the proxy's request hook failed: closing the connection from %s", self.peer[0])
            self.close()
            return None
        return (frame if replaced is None else replaced), 0.0

    def _tenant_request(
        self, frame: bytes | bytearray, pending: Pending, exchange: Exchange
    ) -> tuple[bytes | bytearray, Pending] | None:
        """The request in the upstream's names, and `pending` with the ACL entries answered here
        (merged into the answer); None: answered or closed here."""
        tenant = self.shared.tenant
        assert tenant is not None
        try:
            renamed, withheld = tenant.request(frame)
            return renamed, (replace(pending, withheld=withheld) if withheld else pending)
        except Refused as refused:
            answer = refused_answer(refused, frame)
            if answer is not None:
                if answer:  # []: a Produce with acks=0, dropped unanswered (as Kafka would)
                    self._answer_here(_Waiting(pending, exchange), answer)
                return None
            why = refused.why
        except (DecodeError, UnsupportedRequest):
            why = "a request that cannot be read, so its names cannot be rewritten"
        self.fail(
            f"tenant:{pending.api_key}",
            f"virtual cluster {tenant.name}: closing the connection from {self.peer[0]}, which sent "
            f"{why} (API key {pending.api_key} v{pending.api_version}); a virtual cluster does not relay it",
        )
        return None

    def _open_request_stream(self, size: int) -> RequestStream | None:
        """A large request relayed as it arrives, when nothing here needs to see it whole."""
        shared, up = self.shared, self.upstream
        if up is None or self._closed or self._early or self._outbox or self.auth is not None:
            return None
        if shared.tenant or shared.upstream_login or not _hooks_idle(shared.request_hook, shared, None):
            return None
        return RequestStream(size, self._stream_head, up.write)

    def _stream_head(self, head: bytes) -> bool | None:
        """A streamed request's head: None while more is needed, else whether it is answered."""
        try:
            key, version, correlation = peek_header(head)
            pending = Pending(key, version, correlation)
            answered = key != PRODUCE_KEY or not pending.known or produce_acks(head, version) != 0
        except DecodeError:
            return None
        if self.shared.report is not None:
            self.shared.report.request(self.id, self.peer[0], key, version, head, self.shared.upstream_apis)
        if answered:
            exchange = Exchange(self.id, self.peer, self.node_id, key, version, correlation, self.principal)
            waiting = _Waiting(pending, exchange)
            self._waiting.append(waiting)
            self._inflight.append(waiting)
        return answered

    def _send_upstream(self, frame: bytes | bytearray, hold: float = 0.0, answered: bool = True) -> None:
        assert self.upstream is not None  # the client is not read before the upstream is up
        if hold <= 0 and not self._outbox:
            self.upstream.write([_SIZE.pack(len(frame)), frame], answered)
            return
        # held, or behind a held one: requests reach the upstream in the order the client sent them
        self._outbox.append((asyncio.get_running_loop().time() + hold, frame, answered))
        self._outbox_bytes += len(frame)
        if self._outbox_bytes > self.shared.buffer_bytes and not self._held_full:
            self._held_full = True
            if self.transport is not None:
                self.transport.pause_reading()
        self._send_due()

    def _send_due(self) -> None:
        if self._closed or self.upstream is None:
            return
        now = asyncio.get_running_loop().time()
        while self._outbox and self._outbox[0][0] <= now:
            _, frame, answered = self._outbox.popleft()
            self._outbox_bytes -= len(frame)
            self.upstream.write([_SIZE.pack(len(frame)), frame], answered)
        if self._outbox:
            self._wake("outbox", self._outbox[0][0], self._send_due)
        if self._held_full and self._outbox_bytes <= self.shared.buffer_bytes:
            self._held_full = False
            self._resume_client()

    # -- upstream backpressure ----------------------------------------------------------------------

    def upstream_full(self, full: bool) -> None:
        self._upstream_full = full
        if self.transport is None or self._closed:
            return
        if full:
            self.transport.pause_reading()
        else:
            self._resume_client()
