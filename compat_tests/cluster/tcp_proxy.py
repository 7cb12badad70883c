"""A TCP proxy for network partitions without root: a broker advertises the proxy's port (and a
controller its own), so every connection to it passes here, and the test cuts chosen connections.

A connection is told apart by the client id of its first Kafka request (a follower's fetcher says
`kcompat-replica-fetcher-<follower>-<leader>`, a broker's controller channels `kcompat-broker-<id>`
or `broker-<id>-...`), so a producer's traffic passes while a follower's is cut. A cut is one way
(`up`: client to server, `down`: server to client) or both. Bytes a cut direction carries are
dropped, as a partition drops packets; such a connection's stream is then broken, so healing closes
it (as TCP would give up on it) and the peers reconnect.

    proxy = TcpProxy(("127.0.0.1", real_port)); proxy.start()   # proxy.port to advertise
    proxy.cut(lambda client_id: client_id.startswith("kcompat-replica-fetcher-"), "both")
    proxy.heal()
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable

HOST = "127.0.0.1"
Rule = tuple[Callable[[str], bool], str]  # (client id matches, "up" | "down" | "both")


def _client_id(frame: bytes) -> str:
    """The client id of one request frame (size, api key, version, correlation id, client id)."""
    if len(frame) < 14:
        return ""
    (n,) = struct.unpack_from(">h", frame, 12)
    return frame[14 : 14 + n].decode(errors="replace") if n > 0 else ""


class _Link:
    """One proxied connection: the client's socket, the server's, and what the cut did to it."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client, self.server = client, server
        self.client_id: str | None = None  # None until the first request is in
        self.broken = False  # bytes were dropped: the stream cannot be resumed

    def close(self) -> None:
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


class TcpProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server((HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self._rules: list[Rule] = []
        self._links: set[_Link] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.dropped = 0  # bytes dropped by cuts, for the report

    @property
    def endpoint(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self) -> TcpProxy:
        threading.Thread(target=self._accept, daemon=True, name=f"proxy-{self.port}").start()
        return self

    def cut(self, matches: Callable[[str], bool], direction: str = "both") -> None:
        assert direction in ("up", "down", "both")
        with self._lock:
            self._rules.append((matches, direction))

    def heal(self) -> None:
        """No more cuts; connections whose bytes were dropped are closed."""
        with self._lock:
            self._rules = []
            broken = [link for link in self._links if link.broken]
        for link in broken:
            link.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close()

    def _is_cut(self, link: _Link, direction: str) -> bool:
        if link.client_id is None:
            return False
        with self._lock:
            return any(d in (direction, "both") and matches(link.client_id) for matches, d in self._rules)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()  # the server is down: the client sees the connection refused, nearly
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(client, server)
            with self._lock:
                self._links.add(link)
            threading.Thread(target=self._pump, args=(link, "up"), daemon=True).start()
            threading.Thread(target=self._pump, args=(link, "down"), daemon=True).start()

    def _pump(self, link: _Link, direction: str) -> None:
        src, dst = (link.client, link.server) if direction == "up" else (link.server, link.client)
        first = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if direction == "up" and link.client_id is None:
                    first += data  # the client id decides the cut: hold bytes until it is known
                    if len(first) < 14 or len(first) < 14 + struct.unpack_from(">h", first, 12)[0]:
                        continue
                    link.client_id = _client_id(first)
                    data, first = first, b""
                if self._is_cut(link, direction):
                    link.broken = True
                    self.dropped += len(data)
                    continue
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._links.discard(link)
            link.close()
