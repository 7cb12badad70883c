"""A `kcompat proxy` on a uvloop event loop in a thread of the test process, with a capture of
every answer it sends: each is decoded (whatever the table of node_fields.py says) and every
host/port pair anywhere in it collected, so a test can assert that no client ever saw an upstream
address.

    with ProxyThread("127.0.0.1:9092,127.0.0.1:9093") as proxy:
        proxy.bootstrap                # "127.0.0.1:port" for the clients
        proxy.capture.addresses        # every (host, port) any answer carried
"""

from __future__ import annotations

import asyncio
import random
import socket
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any

import uvloop

from kcompat.config.proxy_config import ProxyConfig
from kcompat.proxy.admin import proxy_admin
from kcompat.proxy.hooks import Exchange, RequestHook, ResponseHook
from kcompat.proxy.server import ProxyServer
from kcompat.proxy.tenant import Tenant
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import API_VERSIONS_KEY, decode_response
from kcompat.wire.structs import Struct

HOST = "127.0.0.1"


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port_base(ids: int = 20) -> int:
    """A base whose ports base+0 .. base+ids are all free (node ids are small in these tests)."""
    for _ in range(200):
        base = random.randrange(20000, 60000)
        if all(_free(base + i) for i in range(ids + 1)):
            return base
    raise RuntimeError("no free port range for the proxy's node listeners")


def _walk(value: Any) -> Iterator[Any]:
    if isinstance(value, list):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, Struct):
        yield value
        for name in type(value).__slots__:
            if not name.startswith("_"):
                yield from _walk(getattr(value, name, None))


class AnswerCapture:
    """The response hook: decodes every answer the proxy sends and keeps every address in it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.addresses: Counter[tuple[str, int]] = Counter()
        self.by_api: Counter[int] = Counter()
        self.node_endpoint_answers: Counter[int] = Counter()  # api key -> answers with NodeEndpoints
        self.undecoded: Counter[int] = Counter()

    def __call__(self, exchange: Exchange, chunks: Sequence[Any]) -> None:
        data = b"".join(bytes(c) for c in chunks)[4:]
        key, version = exchange.api_key, exchange.api_version
        spec = APIS.get(key)
        if spec is None or version not in spec.versions:
            with self.lock:
                self.undecoded[key] += 1
            return
        if key == API_VERSIONS_KEY and int.from_bytes(data[4:6], "big", signed=True) != 0:
            version = 0  # an error answer is written in v0
        _, body = decode_response(key, version, data)
        found = [(s.host, s.port) for s in _walk(body) if hasattr(s, "host") and hasattr(s, "port")]
        with self.lock:
            self.by_api[key] += 1
            self.addresses.update(found)
            if getattr(body, "node_endpoints", None):
                self.node_endpoint_answers[key] += 1

    def seen(self) -> set[tuple[str, int]]:
        with self.lock:
            return set(self.addresses)


class ProxyThread:
    def __init__(
        self,
        upstream: str,
        request_hook: RequestHook | None = None,
        response_hook: ResponseHook | None = None,
        tenant: Tenant | None = None,
        **props: str,
    ) -> None:
        self.tenant = tenant
        self.port_base = free_port_base()
        self.bootstrap_port = self.port_base  # node ids start at 0 or 1: base itself is unused by both
        settings = {
            "proxy.upstream.bootstrap.servers": upstream,
            "proxy.bootstrap.listener": f"{HOST}:{self.bootstrap_port}",
            "proxy.node.port.base": str(self.port_base + 1),
            "proxy.node.id.max": "15",
            "proxy.metadata.refresh.ms": "2000",
            "proxy.connect.timeout.ms": "3000",
            **props,
        }
        self.config = ProxyConfig(settings)
        self.capture = AnswerCapture()
        # with proxy.admin.listener: the fault rules and captures on the hooks, as `kcompat proxy`
        self.admin = proxy_admin(self.config)
        if self.admin is not None:
            request_hook = request_hook or self.admin.intercept.request
            response_hook = response_hook or self.admin.intercept.response
        self.request_hook = request_hook
        self.response_hook = response_hook
        self.connect_hook = self.admin.intercept.connect if self.admin is not None else None
        self.server: ProxyServer | None = None
        self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="kcompat-proxy", daemon=True)

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.bootstrap_port}"

    def node_port(self, node_id: int) -> int:
        return self.port_base + 1 + node_id

    def start(self) -> ProxyThread:
        self._thread.start()
        self.server = ProxyServer(
            self.config,
            request_hook=self.request_hook,
            response_hook=self._answered,
            connect_hook=self.connect_hook,
            tenant=self.tenant,
            report=self.admin.report if self.admin is not None else None,
        )
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        if self.admin is not None:
            self.call(self.admin.start())
        return self

    def _answered(self, exchange: Exchange, chunks: Sequence[Any]) -> Sequence[Any] | None:
        replaced = self.response_hook(exchange, chunks) if self.response_hook is not None else None
        self.capture(exchange, chunks if replaced is None else replaced)
        return replaced

    def call(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _run(self) -> None:
        try:
            self.loop.run_forever()
            # Cancel what is left and let it unwind on this loop, so every transport is closed here
            # rather than freed later by the collector inside another test (uvloop's ResourceWarning).
            self.loop.run_until_complete(_unwind())
        finally:  # closed by its own thread: under load uvloop's close once took minutes (TLS upstream)
            self.loop.close()

    @property
    def admin_url(self) -> str | None:
        return self.admin.url if self.admin is not None else None

    def stop(self) -> None:
        if self.admin is not None:
            self.call(self.admin.close())
        if self.server is not None:
            self.call(self.server.close())
            self.server = None
        self.call(asyncio.sleep(0.05))  # closing transports finish their close callbacks
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def __enter__(self) -> ProxyThread:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def proxy_addresses(self) -> set[tuple[str, int]]:
        assert self.server is not None
        return {(HOST, self.node_port(n)) for n in range(16)}


async def _unwind() -> None:
    """Cancel every task left on the running loop and wait for them, then a moment for the close
    callbacks of the transports they held."""
    left = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in left:
        task.cancel()
    await asyncio.gather(*left, return_exceptions=True)
    await asyncio.sleep(0.05)
