"""The admin listener's pages, wired to a running broker (imported only when admin.listener is set).

    open_admin(config)                    step 3 of start-up: bind, or say why not (only `socket` is needed)
    AdminListener.start(broker, reactor)  once the broker listens: serve the pages
        /metrics   Prometheus (kcompat.server.metrics)
        /...       the web console (kcompat.server.console.pages)

The HTTP, Prometheus and console code (h11, prometheus_client, jinja2: some 80 ms of imports on
an idle 2-core machine, more on a busy one) is imported by start() in a worker thread, after the start-up line:
the Kafka listeners answer from the same moment as without the admin listener, and the event loop
keeps serving them while the imports run; a scrape that comes first waits in the listen backlog.

The default port (9644) being taken does not stop the broker: kcompat is often one of several
brokers started side by side on a CI machine, and the Kafka listener is what they are for; a port
the user chose that cannot be bound stops start-up, as a Kafka listener's does.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from types import ModuleType
from typing import TYPE_CHECKING

from kcompat.config.broker_config import BrokerConfig
from kcompat.config.broker_properties import admin_address

if TYPE_CHECKING:
    from kcompat.server.admin_http import AdminServer, Page
    from kcompat.server.broker import Broker
    from kcompat.server.console.lag_history import LagHistory
    from kcompat.server.reactor import Reactor

log = logging.getLogger("kcompat.server.admin")


class AdminUnavailable(Exception):
    """The admin listener the user asked for cannot be opened (one line says why)."""


class AdminListener:
    def __init__(self, sock: socket.socket, url: str) -> None:
        self.sock = sock
        self.url = url
        self.server: AdminServer | None = None
        self.history: LagHistory | None = None

    async def start(self, broker: Broker, reactor: Reactor) -> None:
        http, metrics, console, lag_history = await asyncio.to_thread(_load)
        collector = metrics.BrokerCollector(broker, connections=lambda: len(reactor.connections),
                                            accepted=lambda: reactor.accepted)  # fmt: skip
        render = metrics.metrics_page(collector)

        def metrics_route(query: dict[str, list[str]]) -> Page:
            body, content_type = render(query)
            page: Page = http.Page(body, content_type)
            return page

        self.history = lag_history.LagHistory(broker)
        self.history.start()
        routes = console.Console(broker, self.history).routes()
        routes["/metrics"] = metrics_route
        self.server = http.AdminServer(routes)
        await self.server.start(self.sock)

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()
        if self.history is not None:
            await self.history.close()
        self.sock.close()


def _load() -> tuple[ModuleType, ModuleType, ModuleType, ModuleType]:
    from kcompat.server import admin_http, metrics
    from kcompat.server.console import lag_history, pages

    return admin_http, metrics, pages, lag_history


def bind_admin(host: str, port: int) -> socket.socket:
    """A listening socket for the admin listener (OSError as bind raises it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(16)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def open_admin(config: BrokerConfig) -> AdminListener | None:
    """The bound admin listener; None when switched off or when the default port is taken."""
    address = admin_address(str(config.get("admin.listener") or ""))
    if address is None:
        return None
    host, port = address
    try:
        sock = bind_admin(host, port)
    except OSError as e:
        if e.errno == errno.EADDRINUSE and not config.is_set("admin.listener"):
            log.warning("admin listener not started: %s:%d is in use (set admin.listener to another "
                        "host:port, or to nothing to silence this)", host, port)  # fmt: skip
            return None
        raise AdminUnavailable(f"cannot listen on admin.listener {host}:{port}: {e.strerror or e}") from None
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return AdminListener(sock, f"http://{shown}:{bound_port}")
