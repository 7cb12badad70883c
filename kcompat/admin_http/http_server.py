"""The HTTP admin listener (`admin.listener`, 127.0.0.1:9644 by default, Redpanda's admin port).

It runs on the broker's own event loop, beside the Kafka listeners: asyncio streams carry the
bytes and h11 (a small, well-kept, sans-I/O HTTP/1.1 implementation) parses and frames them, so
no HTTP is hand-written here and nothing starts a thread. A page is computed synchronously from
the broker's in-memory state (a scrape of /metrics takes well under a millisecond for a few
hundred partitions), so a request costs the Kafka clients one short turn of the loop.

    AdminServer(routes).start(sock)   serves GET/HEAD on a bound socket; routes map a path to a Page
    AdminServer.close()               stops accepting and closes the connections

With `login` (a Kafka listener uses SASL) every request needs an Authorization header it accepts,
or a console session cookie `session` accepts (401 with a Basic challenge and a link to /login
otherwise). Only GET and HEAD are answered (405 otherwise), except on the `api` routes (the fault
rules), which read a body of up to MAX_BODY bytes and take any method, and the `forms` routes (the
console's actions: POST only, their body read the same way; they check the session and the CSRF
token themselves); a request h11 cannot parse closes the connection
(logged at DEBUG); a connection idle for IDLE_S is closed.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

import h11

log = logging.getLogger("kcompat.admin_http")

IDLE_S = 60.0
_READ_SIZE = 65536


@dataclass(frozen=True, slots=True)
class Page:
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    status: int = 200
    max_age: int = 0  # seconds a browser may keep it (the vendored scripts: no refetch on every page)
    headers: tuple[tuple[str, str], ...] = ()  # more response headers (set-cookie, location)


@dataclass(frozen=True, slots=True)
class Form:
    """A POST to a console form: its fields (urlencoded body), the cookie and the origin it came with."""

    path: str
    query: dict[str, list[str]]
    fields: dict[str, list[str]]
    cookie: str | None
    origin: str | None
    host: str | None
    peer: str


Route = Callable[[dict[str, list[str]]], Page]
# A route that changes something (the fault rules): (method, path, query, body) -> Page.
ApiRoute = Callable[[str, str, dict[str, list[str]], bytes], Page]
# A POST of the console (an action): answered on the loop, possibly after awaiting the broker.
FormRoute = Callable[[Form], Awaitable[Page]]
MAX_BODY = 1 << 20


class AdminServer:
    def __init__(
        self,
        routes: dict[str, Route],
        login: Callable[[str | None], str | None] | None = None,
        api: dict[str, ApiRoute] | None = None,
        forms: dict[str, FormRoute] | None = None,
        session: Callable[[str | None], str | None] | None = None,
    ) -> None:
        self.routes = routes
        self.api = api or {}
        self.forms = forms or {}  # POST by exact path: the console's actions (they check the session)
        # the console's login session (a cookie) also lets a browser through the Basic login
        self.session = session  # by path prefix: "/faults" serves /faults and /faults/...
        # with SASL on: HTTP Basic against the broker's users (admin_login.BasicLogin.check)
        self.login = login
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_server(self._serve, sock=sock)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._exchange(reader, writer)
        except (ConnectionError, TimeoutError, h11.ProtocolError) as e:
            log.debug("admin connection closed: %s", e)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                async with asyncio.timeout(IDLE_S):
                    data = await reader.read(_READ_SIZE)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                api = self._api_route(event)
                form = self._form_route(event)
                if form is not None:
                    body = await _read_body(conn, reader)
                    await self._send(conn, writer, event, await self._form(form, event, body, writer))
                    if body is None:
                        return
                elif api is None:
                    await self._answer(conn, writer, event)
                else:
                    body = await _read_body(conn, reader)
                    await self._answer(conn, writer, event, (api, body))
                    if body is None:  # not read to its end: this connection cannot go on
                        return
            elif isinstance(event, h11.ConnectionClosed) or conn.our_state is h11.MUST_CLOSE:
                return
            if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                conn.start_next_cycle()  # keep-alive: the next request on this connection

    def _form_route(self, request: h11.Request) -> FormRoute | None:
        if request.method != b"POST":
            return None
        return self.forms.get(urlsplit(request.target.decode("latin-1")).path)

    async def _form(
        self, route: FormRoute, request: h11.Request, body: bytes | None, writer: asyncio.StreamWriter
    ) -> Page:
        if body is None:
            return Page(b"request body over 1 MiB\n", status=413)
        url = urlsplit(request.target.decode("latin-1"))
        form = Form(
            url.path,
            parse_qs(url.query),
            parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True),
            _header(request, b"cookie"),
            _header(request, b"origin"),
            _header(request, b"host"),
            _peer(writer),
        )
        try:
            return await route(form)
        except Exception:
            log.exception("admin form %s failed", url.path)
            return Page(b"internal error\n", status=500)

    def _allowed(self, request: h11.Request) -> bool:
        if self.login is None or self.login(_header(request, b"authorization")) is not None:
            return True
        return self.session is not None and self.session(_header(request, b"cookie")) is not None

    def _api_route(self, request: h11.Request) -> ApiRoute | None:
        path = urlsplit(request.target.decode("latin-1")).path
        for prefix, route in self.api.items():
            if path == prefix or path.startswith(prefix + "/"):
                return route
        return None

    async def _answer(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        api: tuple[ApiRoute, bytes | None] | None = None,
    ) -> None:
        method = request.method.decode()
        url = urlsplit(request.target.decode("latin-1"))
        route = self.routes.get(url.path)
        query = parse_qs(url.query)
        if route is None:  # a route ending in "/" serves what is below it, given as query["path"]
            for prefix, candidate in self.routes.items():
                if prefix.endswith("/") and prefix != "/" and url.path.startswith(prefix):
                    route, query["path"] = candidate, [url.path[len(prefix) :]]
                    break
        query["_cookie"] = [_header(request, b"cookie") or ""]  # the console's session, if any
        query["_peer"] = [_peer(writer)]
        if not self._allowed(request) and url.path != "/login" and not url.path.startswith("/static/"):
            page = Page(b'login required: <a href="/login">log in</a>\n', "text/html; charset=utf-8", 401)
        elif api is not None:
            page = _api_page(api[0], method, url.path, query, api[1])
        elif method not in ("GET", "HEAD"):
            page = Page(b"only GET and HEAD\n", status=405)
        elif route is None:
            page = Page(b"not found\n", status=404)
        else:
            try:
                page = route(query)
            except Exception:
                log.exception("admin page %s failed", url.path)
                page = Page(b"internal error\n", status=500)
        await self._send(conn, writer, request, page)

    async def _send(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, request: h11.Request, page: Page
    ) -> None:
        method = request.method.decode()
        headers = [("content-type", page.content_type), ("content-length", str(len(page.body)))]
        if page.max_age:
            headers.append(("cache-control", f"max-age={page.max_age}"))
        if page.status == 401:
            headers.append(("www-authenticate", 'Basic realm="kcompat", charset="UTF-8"'))
        headers.extend(page.headers)
        response = h11.Response(
            status_code=page.status, headers=headers, reason=HTTPStatus(page.status).phrase
        )
        out = conn.send(response) or b""
        if method != "HEAD":
            out += conn.send(h11.Data(data=page.body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        writer.write(out)
        await writer.drain()  # a request body (none for GET) is read and dropped by _exchange's loop


async def _read_body(conn: h11.Connection, reader: asyncio.StreamReader) -> bytes | None:
    """The request's body (None: over MAX_BODY, answered 413 and the connection closed)."""
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            async with asyncio.timeout(IDLE_S):
                data = await reader.read(_READ_SIZE)
            conn.receive_data(data)
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY:
                return None
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return bytes(body)


def _api_page(
    route: ApiRoute, method: str, path: str, query: dict[str, list[str]], body: bytes | None
) -> Page:
    if body is None:
        return Page(b'{"error": "request body over 1 MiB"}\n', "application/json", status=413)
    try:
        return route(method, path, query, body)
    except Exception:
        log.exception("admin %s %s failed", method, path)
        return Page(b'{"error": "internal error"}\n', "application/json", status=500)


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) else ""


def _header(request: h11.Request, name: bytes) -> str | None:
    for key, value in request.headers:
        if key == name:  # h11 gives names in lower case
            return value.decode("latin-1")
    return None
