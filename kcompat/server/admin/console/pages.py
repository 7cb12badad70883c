"""The web console's routes: server-rendered HTML (Jinja2 templates), htmx for the parts that refresh,
uPlot for the lag chart, every file served from this package (nothing from a CDN).

    /                  overview: the broker, topic and group counts
    /topics            topics: partitions, records, size
    /topic?name=T      partitions (start, end, size, segments), configs, the message browser
    /topic/messages    the browser's result (htmx fragment): partition, offset|timestamp, format, limit
    /groups            groups: type, state, members, total lag
    /group?id=G        members and their partitions, per-partition lag (refreshed), the lag chart
    /group/lag         the per-partition table alone (htmx fragment, every 2 s)
    /group/lag.json    the lag history the chart draws
    /brokers           the brokers (this node; in cluster mode every registered broker), controllers,
                       this broker's configs with their source
    /static/...        htmx, uPlot, the console's css and js
    /clients           client telemetry (KIP-714): each client instance and the last values it pushed
    /security          ACLs (as kafka-acls lists them) and SCRAM users (mechanisms, iterations)
    /login             the login form (actions.py takes its POST and the actions' forms)

Every page is computed from memory on the event loop in well under a millisecond for a few
hundred partitions; the browser reads at most MAX_READ_BYTES from the log per request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from kcompat.admin_http.http_server import Page
from kcompat.config.client_metrics_config import CLIENT_METRICS
from kcompat.security.authorizer import AclOperation
from kcompat.server.admin.console import browse, telemetry_view, views
from kcompat.server.admin.console.lag_history import LagHistory
from kcompat.server.admin.console.session import Session, Sessions

if TYPE_CHECKING:
    from kcompat.server.broker import Broker

HERE = Path(__file__).parent
STATIC = HERE / "static"
_TYPES = {".js": "text/javascript", ".css": "text/css", ".LICENSE": "text/plain; charset=utf-8"}
HTML = "text/html; charset=utf-8"

Query = dict[str, list[str]]


def _one(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _int(query: Query, name: str) -> int | None:
    value = (_one(query, name) or "").strip()
    try:
        return int(value) if value else None
    except ValueError:
        return None


class Console:
    def __init__(self, broker: Broker, history: LagHistory, sessions: Sessions | None = None) -> None:
        self.broker = broker
        self.history = history
        self.sessions = sessions
        self._session: Session | None = None  # the request's, while its page renders (synchronously)
        self.env = environment()
        self._static = {p.name: p.read_bytes() for p in STATIC.iterdir() if p.is_file()}  # some 110 KB

    def routes(self) -> dict[str, Callable[[Query], Page]]:
        pages: dict[str, Callable[[Query], Page]] = {
            "/": self.overview,
            "/topics": self.topics,
            "/topic": self.topic,
            "/topic/messages": self.messages,
            "/groups": self.groups,
            "/group": self.group,
            "/group/lag": self.group_lag,
            "/group/lag.json": self.lag_json,
            "/brokers": self.brokers,
            "/static/": self.static,
            "/login": self.login,
            "/security": self.security,
            "/clients": self.clients,
        }
        return {path: self._as_logged_in(page) for path, page in pages.items()}

    def _as_logged_in(self, page: Callable[[Query], Page]) -> Callable[[Query], Page]:
        def route(query: Query) -> Page:
            cookie = _one(query, "_cookie")
            self._session = self.sessions.get(cookie) if self.sessions is not None else None
            try:
                return page(query)
            finally:
                self._session = None

        return route

    def security(self, query: Query) -> Page:
        if not self._may(query, AclOperation.DESCRIBE):
            return self._page("security.html", page="security", refused=True, acls=None, users=[])
        return self._page(
            "security.html",
            page="security",
            refused=False,
            acls=views.acls(self.broker),
            users=views.users(self.broker),
        )

    def clients(self, query: Query) -> Page:
        return self._page(
            "clients.html",
            page="clients",
            clients=telemetry_view.clients(self.broker.telemetry, self.broker.now_ms()),
            subscriptions=len(self.broker.metadata.resource_names(CLIENT_METRICS)),
        )

    def _may(self, query: Query, operation: AclOperation) -> bool:
        principal = self._session.principal if self._session is not None else None
        return views.may_describe_cluster(self.broker, principal, _one(query, "_peer") or "", operation)

    def login(self, query: Query) -> Page:
        return self._page("login.html", page="login", next=_one(query, "next") or "/", error=None)

    def _page(self, template: str, status: int = 200, **context: Any) -> Page:
        context.setdefault("session", self._session)
        body = self.env.get_template(template).render(cluster_id=self.broker.cluster_id, **context)
        return Page(body.encode(), HTML, status)

    def overview(self, query: Query) -> Page:
        return self._page(
            "overview.html",
            page="overview",
            brokers=views.brokers(self.broker),
            topics=views.topics(self.broker),
            groups=views.groups(self.broker),
        )

    def brokers(self, query: Query) -> Page:
        return self._page(
            "brokers.html",
            page="brokers",
            brokers=views.brokers(self.broker),
            controllers=views.controllers(self.broker),
            configs=views.broker_configs(self.broker)
            if self._may(query, AclOperation.DESCRIBE_CONFIGS)
            else None,
        )

    def topics(self, query: Query) -> Page:
        return self._page("topics.html", page="topics", topics=views.topics(self.broker))

    def topic(self, query: Query) -> Page:
        name = _one(query, "name") or ""
        found = views.topic(self.broker, name)
        if found is None:
            return self._page("missing.html", 404, page="topics", what=f"topic {name}")
        row, partitions, configs = found
        return self._page(
            "topic.html",
            page="topics",
            topic=row,
            partitions=partitions,
            configs=configs,
            formats=browse.FORMATS,
        )

    def messages(self, query: Query) -> Page:
        name = _one(query, "name") or ""
        t = self.broker.metadata.topic(name)
        partition = _int(query, "partition") or 0
        form = _one(query, "format") or "text"
        if t is None or not 0 <= partition < t.partitions or form not in browse.FORMATS:
            return Page(b"<p class=error>no such topic, partition or format</p>", HTML, 400)
        start = browse.start_offset(
            self.broker, name, partition, _int(query, "offset"), _int(query, "timestamp")
        )
        search = browse.Search(
            key=(_one(query, "key") or "").encode(),
            value=(_one(query, "value") or "").encode(),
            header=(_one(query, "header") or "").encode(),
            until_offset=_int(query, "until"),
            from_ms=_int(query, "timestamp"),
            until_ms=_int(query, "until_ts"),
        )
        found = browse.browse(self.broker, name, partition, start, _int(query, "limit") or 20, form, search)
        return self._page(
            "messages.html",
            records=found.records,
            found=found,
            searching=search != browse.Search(from_ms=search.from_ms),
            start=start,
            partition=partition,
            show_bytes=browse.SHOW_BYTES,
        )

    def groups(self, query: Query) -> Page:
        return self._page("groups.html", page="groups", groups=views.groups(self.broker))

    def group(self, query: Query) -> Page:
        group_id = _one(query, "id") or ""
        row = views.group(self.broker, group_id)
        if row is None:
            return self._page("missing.html", 404, page="groups", what=f"group {group_id}")
        return self._page("group.html", page="groups", group=row, sample_s=self.history.sample_s)

    def group_lag(self, query: Query) -> Page:
        row = views.group(self.broker, _one(query, "id") or "")
        if row is None:
            return Page(b"<p class=error>the group is gone</p>", HTML, 404)
        return self._page("group_lag.html", group=row)

    def lag_json(self, query: Query) -> Page:
        return Page(json.dumps(self.history.series(_one(query, "id") or "")).encode(), "application/json")

    def static(self, query: Query) -> Page:
        name = _one(query, "path") or ""
        body = self._static.get(name)
        if body is None:
            return Page(b"not found\n", status=404)
        content_type = next((v for k, v in _TYPES.items() if name.endswith(k)), "application/octet-stream")
        return Page(body, content_type, max_age=3600)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
    env.filters["bytes"] = _human_bytes
    env.filters["thousands"] = lambda n: f"{n:,}"
    env.filters["utc"] = _utc
    return env


def _utc(ms: int) -> str:
    if ms < 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}"


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
