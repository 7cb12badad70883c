"""The Reactor: listening sockets, the acceptor, the set of live connections, their limits.

One event loop serves everything. Each listening socket is watched with add_reader; accepted
sockets become `Connection`s (raw non-blocking sockets, see connection.py). Beyond
`max.connections` (or `max.connections.per.ip` from one address) a new connection is accepted and
closed at once; over an ip's `connection_creation_rate` quota it is held unserved for the throttle
time and closed then, as Kafka's acceptor does (`admit_rate` says for how long); over
`max.connection.creation.rate` the acceptor waits before it serves it and accepts nothing
meanwhile (`accept_delay`). One timer sweeps connections idle longer than `connections.max.idle.ms`.
Shutdown stops accepting, lets every connection finish the requests it has received (up to a
grace period), then closes what is left.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kcompat.config.listeners import Listener
from kcompat.server.network.connection import Client, Connection, Handler, Limits
from kcompat.server.network.listeners import ListenerTransport, bind
from kcompat.server.network.tls_socket import TlsSocket

log = logging.getLogger("kcompat.server")

# Accept at most this many connections per readiness event, so one busy listener cannot starve
# the loop.
_ACCEPTS_PER_EVENT = 64
# After EMFILE/ENFILE, stop accepting for this long (the backlog holds the clients meanwhile).
_ACCEPT_RETRY_S = 0.5
# A refused connection is logged at most this often.
_REFUSAL_LOG_INTERVAL_S = 10.0
# A connection quiet for this long gives its read buffer back (the idle sweep does it).
_QUIET_S = 1.0


def _address(sockaddr: tuple[object, ...]) -> tuple[str, int]:
    return str(sockaddr[0]), int(sockaddr[1])  # type: ignore[call-overload]


class Reactor:
    def __init__(
        self,
        handle: Handler,
        *,
        limits: Limits | None = None,
        close_errors: tuple[type[BaseException], ...] = (),
        idle_ms: int = 600000,
        max_connections: Callable[[], int] = lambda: 2**31 - 1,
        max_connections_per_ip: Callable[[str], int] = lambda host: 2**31 - 1,
        send_buffer: int = -1,
        receive_buffer: int = -1,
        on_disconnect: Callable[[Client], None] | None = None,
        transports: Mapping[str, ListenerTransport] | None = None,
        admit_rate: Callable[[str], int] | None = None,
        accept_delay: Callable[[str], int] | None = None,
    ) -> None:
        self._handle = handle
        self._admit_rate = admit_rate  # host -> 0, or ms to hold its new connection before closing it
        self._accept_delay = accept_delay  # listener name -> 0, or ms to wait before serving
        self._held: set[socket.socket] = set()
        self._transports = dict(transports or {})  # by listener name; none: PLAINTEXT
        self.limits = limits or Limits()
        self._close_errors = close_errors
        self.idle_s = idle_ms / 1000 if idle_ms > 0 else None
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self._send_buffer = send_buffer
        self._receive_buffer = receive_buffer
        self._on_disconnect = on_disconnect
        self.connections: set[Connection] = set()
        self._per_ip: Counter[str] = Counter()
        self._listening: dict[int, tuple[socket.socket, Listener]] = {}
        self._accepting = False
        self._ids = itertools.count()
        self._sweeper: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_refusal_log = -_REFUSAL_LOG_INTERVAL_S
        self.refused = 0
        self.throttled = 0  # connections held and closed for connection_creation_rate
        self.accepted = 0  # connections admitted since start-up (/metrics)

    # -- listening --------------------------------------------------------------------------------

    def bind(self, listeners: Iterable[Listener], backlog: int = 50) -> list[tuple[Listener, int]]:
        """Open every listener (not yet accepting); returns each with the port actually bound."""
        bound: list[tuple[Listener, int]] = []
        try:
            for listener in listeners:
                sock = bind(listener, backlog)
                self._listening[sock.fileno()] = (sock, listener)
                bound.append((listener, _address(sock.getsockname())[1]))
        except BaseException:
            self._close_listeners()
            raise
        return bound

    def start(self) -> None:
        """Start accepting on the bound listeners, and the idle sweep."""
        self._loop = asyncio.get_running_loop()
        self._resume_accepting()
        if self.idle_s is not None:
            self._sweeper = self._loop.call_later(self._sweep_interval(), self._sweep)

    def _resume_accepting(self) -> None:
        assert self._loop is not None
        if self._accepting or not self._listening:
            return
        for fd, (sock, listener) in self._listening.items():
            self._loop.add_reader(fd, self._accept, sock, listener)
        self._accepting = True

    def _pause_accepting(self) -> None:
        if not self._accepting:
            return
        assert self._loop is not None
        for fd in self._listening:
            self._loop.remove_reader(fd)
        self._accepting = False

    def _close_listeners(self) -> None:
        self._pause_accepting()
        for sock, _ in self._listening.values():
            sock.close()
        self._listening.clear()
        for held in self._held:
            held.close()
        self._held.clear()

    def _accept(self, server: socket.socket, listener: Listener) -> None:
        for _ in range(_ACCEPTS_PER_EVENT):
            try:
                sock, peer = server.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as e:
                # Out of descriptors (EMFILE/ENFILE) or memory: wait, the clients stay in the backlog.
                log.error(
                    "accepting on %s failed: %s; retrying in %.1f s", listener.url(), e, _ACCEPT_RETRY_S
                )
                self._pause_accepting()
                assert self._loop is not None
                self._loop.call_later(_ACCEPT_RETRY_S, self._resume_accepting)
                return
            delay_ms = self._accept_delay(listener.name) if self._accept_delay is not None else 0
            if delay_ms > 0:
                # over max.connection.creation.rate: this one waits, the others in the backlog
                self._pause_accepting()
                self._held.add(sock)
                assert self._loop is not None
                self._loop.call_later(delay_ms / 1000, self._admit_late, sock, peer, listener)
                return
            self._admit(sock, peer, listener)

    def _admit_late(self, sock: socket.socket, peer: tuple[object, ...], listener: Listener) -> None:
        if sock not in self._held:
            return  # shut down meanwhile: closed with the listeners
        self._held.discard(sock)
        self._admit(sock, peer, listener)
        self._resume_accepting()

    def _admit(self, sock: socket.socket, peer: tuple[object, ...], listener: Listener) -> None:
        host, port = _address(peer)
        if len(self.connections) >= self.max_connections():
            self._refuse(sock, f"max.connections ({self.max_connections()}) reached", host, port)
            return
        if self._admit_rate is not None:
            hold_ms = self._admit_rate(host)
            if hold_ms > 0:
                self._hold(sock, hold_ms, host, port)
                return
        most = self.max_connections_per_ip(host)
        if self._per_ip[host] >= most:
            self._refuse(sock, f"max.connections.per.ip ({most} for this address) reached", host, port)
            return
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if self._send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer)
            if self._receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
            local_host, local_port = _address(sock.getsockname())
        except OSError:
            sock.close()  # the peer is already gone
            return
        client = Client(
            f"{local_host}:{local_port}-{host}:{port}-{next(self._ids)}",
            host,
            port,
            listener.name,
            listener.security_protocol,
        )
        transport = self._transports.get(listener.name)
        tls_principal = authenticator = None
        conn_sock: socket.socket | TlsSocket = sock
        if transport is not None:
            if transport.ssl_context is not None:
                # the handshake runs later, step by step on readiness (Connection._handshake)
                conn_sock = TlsSocket(sock, transport.ssl_context)
            tls_principal = transport.tls_principal
            authenticator = transport.authenticator() if transport.authenticator is not None else None
        conn = Connection(
            conn_sock,
            client,
            self._handle,
            limits=self.limits,
            close_errors=self._close_errors,
            on_closed=self._closed,
            loop=self._loop,
            tls_principal=tls_principal,
            authenticator=authenticator,
        )
        self.connections.add(conn)
        self._per_ip[host] += 1
        self.accepted += 1
        log.debug(
            "connection %s accepted on %s (%d open)",
            client.connection_id,
            listener.name,
            len(self.connections),
        )
        conn.start()

    def _refuse(self, sock: socket.socket, why: str, host: str, port: int) -> None:
        sock.close()
        self.refused += 1
        if self._may_log():
            log.warning(
                "refused connection from %s:%d: %s (%d refused so far)", host, port, why, self.refused
            )

    def _hold(self, sock: socket.socket, hold_ms: int, host: str, port: int) -> None:
        """Over the ip's connection_creation_rate: read nothing from the socket, close it later."""
        assert self._loop is not None
        self._held.add(sock)
        self._loop.call_later(hold_ms / 1000, self._release, sock)
        self.throttled += 1
        if self._may_log():
            log.warning(
                "throttled connection from %s:%d: over the connection_creation_rate quota of its ip; "
                "closing it in %d ms (%d throttled so far)",
                host,
                port,
                hold_ms,
                self.throttled,
            )

    def _release(self, sock: socket.socket) -> None:
        if sock in self._held:
            self._held.discard(sock)
            sock.close()

    def _may_log(self) -> bool:
        assert self._loop is not None
        now = self._loop.time()
        if now - self._last_refusal_log < _REFUSAL_LOG_INTERVAL_S:
            return False
        self._last_refusal_log = now
        return True

    def _closed(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            host = conn.client.host
            self._per_ip[host] -= 1
            if self._per_ip[host] <= 0:
                del self._per_ip[host]
            log.debug("connection %s closed (%d open)", conn.client.connection_id, len(self.connections))
        if self._on_disconnect is not None:
            try:
                self._on_disconnect(conn.client)
            except Exception:
                log.exception("disconnect hook failed for %s", conn.client.address)

    # -- idle connections -------------------------------------------------------------------------

    def _sweep_interval(self) -> float:
        assert self.idle_s is not None
        return min(max(self.idle_s / 4, 0.01), 1.0)

    def _sweep(self) -> None:
        assert self._loop is not None and self.idle_s is not None
        now = self._loop.time()
        for conn in [c for c in self.connections if c.idle_for(now) > self.idle_s]:
            conn.close(
                f"idle for more than connections.max.idle.ms ({self.idle_s * 1000:.0f} ms)",
                level=logging.INFO,
            )
        for conn in self.connections:
            if conn.idle_for(now) > _QUIET_S:
                conn.release_read_buffer()
        self._sweeper = self._loop.call_later(self._sweep_interval(), self._sweep)

    # -- shutdown ---------------------------------------------------------------------------------

    async def shutdown(self, grace_s: float, force: asyncio.Event | None = None) -> None:
        """Stop accepting; let connections finish what they received for up to `grace_s`; close all.

        Setting `force` ends the grace period early (a second SIGINT).
        """
        self._close_listeners()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        conns = list(self.connections)
        if conns:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + grace_s
            waits = [asyncio.ensure_future(c.shutdown()) for c in conns]
            forced = asyncio.ensure_future(force.wait()) if force is not None else None
            pending: set[asyncio.Future[Any]] = set(waits)
            while pending and loop.time() < deadline:
                watch = pending | {forced} if forced is not None else pending
                done, _ = await asyncio.wait(
                    watch, timeout=deadline - loop.time(), return_when=asyncio.FIRST_COMPLETED
                )
                if forced is not None and forced in done:
                    break
                pending -= done
            if forced is not None:
                forced.cancel()
            late = [c for c in conns if not c.closed]
            if late:
                log.warning("closing %d connection(s) with requests still in progress", len(late))
            for c in late:
                c.abort()
            await asyncio.gather(*waits, return_exceptions=True)
        for c in list(self.connections):
            c.close()
