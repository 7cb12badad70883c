"""The admin listener's pages, wired to a running broker (imported only when admin.listener is set).

    open_admin(config)                    step 3 of start-up: bind, or say why not (only `socket` is needed)
    AdminListener.start(broker, reactor)  once the broker listens: serve the pages
        /metrics   Prometheus (kcompat.server.admin.metrics)
        /faults    the fault rules: GET, POST, PUT, DELETE (kcompat.admin_http.faults)
        /captures  traffic captures: GET, POST, DELETE (kcompat.admin_http.captures)
        /...       the web console (kcompat.server.admin.console.pages)

The socket is bound at start (a port in use fails the start), but the HTTP code (h11) is imported
in a worker thread by the first connection: the first answers of the Kafka listeners do not compete
with it, and the connection waits in the backlog meanwhile. Only the lag chart's sampling starts with
the broker. Prometheus and the console (prometheus_client, jinja2: some 6 MB resident and 60 ms of
imports) wait for the first scrape or page, the fault and capture engines for the first use of
/faults or /captures, so an idle broker nobody browses stays as small as one without the listener.

The default port (9644) being taken does not stop the broker: kcompat is often one of several
brokers started side by side on a CI machine, and the Kafka listener is what they are for; a port
the user chose that cannot be bound stops start-up, as a Kafka listener's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from kcompat.config.broker_config import BrokerConfig
from kcompat.config.broker_properties import admin_address

if TYPE_CHECKING:
    from kcompat.admin_http.http_server import AdminServer, ApiRoute, Form, FormRoute, Page
    from kcompat.server.admin.console.lag_history import LagHistory
    from kcompat.server.broker import Broker
    from kcompat.server.network.reactor import Reactor

log = logging.getLogger("kcompat.server.admin.listener")

Query = dict[str, list[str]]  # a request's query string, parsed


class AdminUnavailable(Exception):
    """The admin listener the user asked for cannot be opened (one line says why)."""


class AdminListener:
    def __init__(self, sock: socket.socket, url: str) -> None:
        self.sock = sock
        self.url = url
        self.server: AdminServer | None = None
        self.history: LagHistory | None = None
        self._serving: asyncio.Task[None] | None = None

    async def start(self, broker: Broker, reactor: Reactor) -> None:
        """Once the broker listens: the lag chart samples from now on; the first connection loads
        the HTTP server (it waits in the backlog until then)."""
        from kcompat.server.admin.console.lag_history import LagHistory

        self.history = LagHistory(broker)
        self.history.start()
        loop = asyncio.get_running_loop()

        def first_connection() -> None:
            loop.remove_reader(self.sock.fileno())
            self._serving = asyncio.create_task(self._serve(broker, reactor))

        loop.add_reader(self.sock.fileno(), first_connection)

    async def _serve(self, broker: Broker, reactor: Reactor) -> None:
        try:
            await self._serve_pages(broker, reactor)
        except Exception:
            log.exception("the admin listener could not start serving; the Kafka listeners still serve")
            raise

    async def _serve_pages(self, broker: Broker, reactor: Reactor) -> None:
        http = await asyncio.to_thread(_load)
        # The console (jinja2) and /metrics (prometheus_client), some 6 MB resident between them,
        # are imported when a page or a scrape first asks: a broker nobody browses or scrapes
        # stays as small as one without the admin listener.
        loaded: dict[str, Callable[[Query], Page]] = {}
        from kcompat.server.admin.login import login_for, users

        credentials = users(broker.config, broker.scram.get)
        from kcompat.server.admin.console.session import Sessions

        sessions = Sessions(credentials.valid, str(broker.config.get("admin.console.token") or ""))
        forms: dict[str, FormRoute] = {}

        def load_routes() -> dict[str, Callable[[Query], Page]]:
            if not loaded:
                from kcompat.server.admin import metrics
                from kcompat.server.admin.console import pages

                collector = metrics.BrokerCollector(
                    broker, connections=lambda: len(reactor.connections), accepted=lambda: reactor.accepted
                )
                render = metrics.metrics_page(collector)

                def metrics_route(query: Query) -> Page:
                    body, content_type = render(query)
                    page: Page = http.Page(body, content_type)
                    return page

                assert self.history is not None
                console = pages.Console(broker, self.history, sessions)
                loaded.update(console.routes())
                loaded["/metrics"] = metrics_route
            return loaded

        def lazy(path: str) -> Callable[[Query], Page]:
            return lambda query: load_routes()[path](query)

        def lazy_form(path: str) -> FormRoute:
            async def route(form: Form) -> Page:
                if not forms:
                    from kcompat.server.admin.console import pages
                    from kcompat.server.admin.console.actions import ConsoleActions

                    load_routes()
                    forms.update(ConsoleActions(broker, sessions, pages.environment()).routes())
                return await forms[path](form)

            return route

        def faults(method: str, path: str, query: Query, body: bytes) -> Page:
            from kcompat.admin_http.faults import faults_route

            page: Page = faults_route(broker.faults)(method, path, query, body)
            return page

        def captures(method: str, path: str, query: Query, body: bytes) -> Page:
            from kcompat.admin_http.captures import captures_route

            page: Page = captures_route(broker.captures)(method, path, query, body)
            return page

        login = login_for(broker.config, broker.scram.get)
        api: dict[str, ApiRoute] = {"/faults": faults, "/captures": captures}
        self.server = http.AdminServer(
            {path: lazy(path) for path in ROUTES},
            login.check if login else None,
            api=api,
            forms={path: lazy_form(path) for path in FORMS},
            session=lambda cookie: s.principal if (s := sessions.get(cookie)) else None,
        )
        await self.server.start(self.sock)

    async def close(self) -> None:
        if self._serving is None:
            asyncio.get_running_loop().remove_reader(self.sock.fileno())
        else:
            self._serving.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # a failure was logged
                await self._serving
        if self.server is not None:
            await self.server.close()
        if self.history is not None:
            await self.history.close()
        self.sock.close()


# The console's pages (console/pages.py: Console.routes) and /metrics.
ROUTES = (
    "/",
    "/topics",
    "/topic",
    "/topic/messages",
    "/groups",
    "/group",
    "/group/lag",
    "/group/lag.json",
    "/brokers",
    "/static/",
    "/metrics",
    "/login",
    "/security",
    "/clients",
)
# The console's forms (console/actions.py: ConsoleActions.routes), answered to POST only.
FORMS = (
    "/login",
    "/logout",
    "/action/topic/create",
    "/action/topic/delete",
    "/action/topic/produce",
    "/action/topic/configs",
    "/action/topic/partitions",
    "/action/group/delete",
    "/action/group/reset",
    "/action/group/delete-offsets",
)


def _load() -> ModuleType:
    from kcompat.admin_http import http_server as admin_http

    return admin_http


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
            log.warning(
                "admin listener not started: %s:%d is in use (set admin.listener to another "
                "host:port, or to nothing to silence this)",
                host,
                port,
            )
            return None
        raise AdminUnavailable(f"cannot listen on admin.listener {host}:{port}: {e.strerror or e}") from None
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return AdminListener(sock, f"http://{shown}:{bound_port}")
