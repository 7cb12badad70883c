"""The proxy's listeners and its node map, on one event loop.

    proxy = ProxyServer(config, request_hook=..., response_hook=..., connect_hook=...)
    await proxy.start()      # bootstrap listener up, upstream brokers learnt (when reachable)
    ...
    await proxy.close()

The bootstrap listener connects each client to one of the upstream bootstrap servers; the
listener of node n (port proxy.node.port.base + n) connects each client to node n's current
upstream address. Node listeners are opened as node ids are learnt: from every answer that names
a broker, and from a Metadata request sent upstream every proxy.metadata.refresh.ms. A listening
socket is bound and listening before the answer naming its node leaves the proxy, so a client
that connects at once waits in the backlog, never meets a refused port. With
proxy.sni.host.pattern there are no node listeners: the bootstrap listener serves every node,
picked by the TLS server name (sni.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import Callable
from typing import Any

from kcompat.config.proxy_config import ProxyConfig
from kcompat.proxy.client_report import ClientReport
from kcompat.proxy.connection import ClientConnection
from kcompat.proxy.hooks import ConnectHook, RequestHook, ResponseHook
from kcompat.proxy.node_map import NodeMap
from kcompat.proxy.sasl import LoginFailed, UpstreamLogin, client_authenticators, upstream_login
from kcompat.proxy.shared import Shared
from kcompat.proxy.sni import SniPattern, remember_server_name
from kcompat.proxy.tenant import Tenant
from kcompat.proxy.tls import client_side_context, upstream_context
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import API_VERSIONS_KEY, decode_response, encode_request

log = logging.getLogger("kcompat.proxy")
_SIZE = struct.Struct(">i")
METADATA_KEY = 3
_METADATA_MAX = 12  # v13 only adds a top-level error code; v1+ reads an empty topic list as none
_CLIENT_ID = "kcompat-proxy"


def listening_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class ProxyServer:
    def __init__(
        self,
        config: ProxyConfig,
        *,
        request_hook: RequestHook | None = None,
        response_hook: ResponseHook | None = None,
        connect_hook: ConnectHook | None = None,
        tenant: Tenant | None = None,
        report: ClientReport | None = None,
    ) -> None:
        self.config = config
        self.bind_host, self.bootstrap_port = config.bootstrap
        pattern = config.get("proxy.sni.host.pattern")
        self.sni = SniPattern(pattern) if pattern else None
        self.nodes = NodeMap(
            config.advertised_host,
            config.get("proxy.node.port.base"),
            config.get("proxy.node.id.max"),
            self._open_node,
        )
        self.client_tls = client_side_context(config)
        if self.sni is not None and self.client_tls is not None:
            remember_server_name(self.client_tls)
        self.shared = Shared(
            nodes=self.nodes,
            upstreams=config.upstreams,
            max_request=config.get("socket.request.max.bytes"),
            buffer_bytes=config.get("proxy.buffer.bytes"),
            connect_timeout=config.get("proxy.connect.timeout.ms") / 1000,
            request_hook=request_hook,
            response_hook=response_hook,
            connect_hook=connect_hook,
            tenant=tenant,
            sni=self.sni,
            upstream_tls=upstream_context(config),
            report=report,
            client_sasl=client_authenticators(config),
            upstream_login=upstream_login(config),
        )
        self._servers: dict[int | None, asyncio.Server] = {}
        self._pending_servers: set[asyncio.Task[Any]] = set()
        self._refresher: asyncio.Task[None] | None = None

    @property
    def node_ports(self) -> dict[int, int]:
        """Node id -> the port serving it, for every upstream node known."""
        return {n: self.nodes.endpoint(n)[1] for n in self.nodes.node_ids()}

    async def start(self) -> None:
        sock = listening_socket(self.bind_host, self.bootstrap_port)
        self.bootstrap_port = sock.getsockname()[1]
        if self.sni is not None:  # every node on this one port, told apart by TLS server name
            self.nodes.sni = (self.sni, self.bootstrap_port)
        await self._serve(None, sock)
        if not await self.refresh():
            log.warning(
                "no upstream bootstrap server (%s) answered Metadata yet: clients are connected to "
                "them as they come, and the proxy asks again every %d ms",
                ",".join(f"{h}:{p}" for h, p in self.shared.upstreams),
                self.config.get("proxy.metadata.refresh.ms"),
            )
        self._refresher = asyncio.get_running_loop().create_task(self._refresh_forever())

    async def _serve(self, node_id: int | None, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: ClientConnection(self.shared, node_id), sock=sock, ssl=self.client_tls
        )
        self._servers[node_id] = server

    def _open_node(self, node_id: int) -> None:
        """Bind node_id's listener now (connections wait in the backlog), serve it soon."""
        if self.sni is not None:
            return  # SNI routing: the bootstrap listener serves every node
        host, port = self.bind_host, self.nodes.endpoint(node_id)[1]
        try:
            sock = listening_socket(host, port)
        except OSError as e:
            log.error(
                "cannot listen on %s:%d for upstream node %d (%s): clients cannot reach that node "
                "through the proxy; choose another proxy.node.port.base",
                host,
                port,
                node_id,
                e.strerror or e,
            )
            return
        task = asyncio.get_running_loop().create_task(self._serve(node_id, sock))
        self._pending_servers.add(task)
        task.add_done_callback(self._pending_servers.discard)

    async def _refresh_forever(self) -> None:
        interval = self.config.get("proxy.metadata.refresh.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            await self.refresh()

    async def refresh(self) -> bool:
        """Ask an upstream broker for the brokers (Metadata, no topics); True when one answered."""
        known = sorted(self.nodes.upstream_addresses())
        for host, port in [*self.shared.upstreams, *known]:
            try:
                brokers = await asyncio.wait_for(
                    _metadata_brokers(
                        host,
                        port,
                        self.shared.upstream_tls,
                        self.shared.upstream_apis,
                        self.shared.upstream_login,
                    ),
                    self.shared.connect_timeout,
                )
            except (OSError, TimeoutError, EOFError, DecodeError, ValueError, LoginFailed) as e:
                log.debug("Metadata from %s:%d failed: %s", host, port, e)
                continue
            for node_id, node_host, node_port in brokers:
                self.nodes.learn(node_id, node_host, node_port)
            return True
        return False

    async def close(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        for task in list(self._pending_servers):
            with contextlib.suppress(Exception):
                await task
        for server in self._servers.values():
            server.close()
        for conn in list(self.shared.connections):
            conn.close()
        # TLS transports close with an exchange of their own: wait (bounded) until every one is gone
        for _ in range(500):  # at most 5 s
            if not (self.shared.connections or self.shared.upstream_sides):
                break
            await asyncio.sleep(0.01)
        for server in self._servers.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)
        self._servers.clear()


async def _metadata_brokers(
    host: str,
    port: int,
    tls: ssl.SSLContext | None,
    apis: dict[int, tuple[int, int]],
    login: Callable[[], UpstreamLogin] | None = None,
) -> list[tuple[int, str, int]]:
    """(node id, host, port) of the brokers in `host:port`'s Metadata answer; `apis` gets the
    ranges of its ApiVersions answer (what the compatibility report checks requests against)."""
    reader, writer = await asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None)
    try:
        if login is not None:  # a SASL upstream: the proxy's own login first
            attempt = login()
            frame: bytes | None = attempt.first()
            while frame is not None:
                writer.write(frame)
                frame = attempt.answer(await _read_frame(reader))
        versions = await _roundtrip(reader, writer, API_VERSIONS_KEY, 0, {})
        theirs = {k.api_key: k.max_version for k in versions.api_keys}
        apis.clear()
        apis.update((k.api_key, (k.min_version, k.max_version)) for k in versions.api_keys)
        ours = APIS[METADATA_KEY].versions.high or _METADATA_MAX
        version = min(theirs.get(METADATA_KEY, 0), ours, _METADATA_MAX)
        body: dict[str, Any] = {"topics": []}
        if version >= 4:
            body["allow_auto_topic_creation"] = False
        answer = await _roundtrip(reader, writer, METADATA_KEY, version, body)
        return [(b.node_id, b.host, b.port) for b in answer.brokers]
    finally:
        writer.close()


async def _roundtrip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: int, version: int, body: dict[str, Any]
) -> Any:
    writer.write(encode_request(key, version, 1, body, _CLIENT_ID))
    _, answer = decode_response(key, version, await _read_frame(reader))
    return answer


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    if not 4 <= size <= 64 << 20:
        raise ValueError(f"an answer of {size} bytes")
    return await reader.readexactly(size)
