"""The console's actions: login, logout and the forms that change something.

    POST /login                     user + password (a SASL user), or the admin.console.token
    POST /logout
    POST /action/topic/create       name, partitions, replication, configs (k=v a line)
    POST /action/topic/delete       name
    POST /action/topic/produce      name, partition, key, value, headers (k=v a line)
    POST /action/topic/configs      name, set (k=v a line), delete (names a line): IncrementalAlterConfigs
    POST /action/topic/partitions   name, count (the new total): CreatePartitions
    POST /action/group/...          delete, reset offsets (with a dry run), delete offsets: group_actions.py

Every action needs a session (403 otherwise) and its CSRF token (403 otherwise), is refused when
the browser says it comes from another origin, goes to the broker as the Kafka request a client
would send (kafka_calls.py: the authorizer decides as for that principal), and is logged at INFO
with its principal and outcome. The answer names Kafka's error (TOPIC_AUTHORIZATION_FAILED, ...).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from kcompat.admin_http.http_server import Form, Page
from kcompat.server.admin.console import kafka_calls as k
from kcompat.server.admin.console.group_actions import GroupActions, Outcome
from kcompat.server.admin.console.kafka_calls import CallFailed, KafkaCalls, error_name
from kcompat.server.admin.console.session import Session, Sessions
from kcompat.wire.records import Record, build_batch

if TYPE_CHECKING:
    import jinja2

    from kcompat.server.broker import Broker

log = logging.getLogger("kcompat.server.admin.console")
HTML = "text/html; charset=utf-8"


def _field(form: Form, name: str) -> str:
    values = form.fields.get(name)
    return values[0].strip() if values else ""


def _pairs(text: str) -> list[tuple[str, str]]:
    """`k=v` a line (blank lines skipped); a line without '=' is a key with an empty value."""
    out = []
    for line in text.splitlines():
        if line.strip():
            key, _, value = line.partition("=")
            out.append((key.strip(), value.strip()))
    return out


class ConsoleActions:
    def __init__(self, broker: Broker, sessions: Sessions, env: jinja2.Environment) -> None:
        self.broker = broker
        self.sessions = sessions
        self.env = env
        self.kafka = KafkaCalls(broker)
        self.group_actions = GroupActions(broker, self.kafka)

    def routes(self) -> dict[str, Callable[[Form], Awaitable[Page]]]:
        acts: dict[str, Callable[[Session, Form], Awaitable[Outcome]]] = {
            "/action/topic/create": self.create_topic,
            "/action/topic/delete": self.delete_topic,
            "/action/topic/produce": self.produce,
            "/action/topic/configs": self.alter_configs,
            "/action/topic/partitions": self.add_partitions,
            **self.group_actions.routes(),
        }
        routes: dict[str, Callable[[Form], Awaitable[Page]]] = {
            path: self._guarded(path, act) for path, act in acts.items()
        }
        routes["/login"] = self.login
        routes["/logout"] = self.logout
        return routes

    def _render(self, template: str, status: int = 200, **context: Any) -> Page:
        body = self.env.get_template(template).render(cluster_id=self.broker.cluster_id, **context)
        return Page(body.encode(), HTML, status)

    async def login(self, form: Form) -> Page:
        user = _field(form, "user")
        if self.sessions.throttled(form.peer):  # said once, when it began (below)
            return self._render(
                "login.html",
                429,
                page="login",
                error="too many wrong logins from here: wait a minute",
                session=None,
            )
        session = self.sessions.login(user, form.fields.get("password", [""])[0])
        if session is None:
            self.sessions.failed(form.peer)
            log.info("console login refused for %r from %s", user, form.peer)
            if self.sessions.throttled(form.peer):
                log.warning("console login locked for %s: too many wrong logins, wait a minute", form.peer)
            return self._render(
                "login.html",
                403,
                page="login",
                error="SASL_AUTHENTICATION_FAILED: wrong user or password",
                session=None,
            )
        log.info("console login: %s from %s", session.principal, form.peer)
        target = _field(form, "next")
        target = target if target.startswith("/") and not target.startswith("//") else "/"
        return Page(b"", HTML, 303, headers=(("set-cookie", session.cookie()), ("location", target)))

    async def logout(self, form: Form) -> Page:
        self.sessions.logout(form.cookie)
        expired = "kcompat_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
        return Page(b"", HTML, 303, headers=(("set-cookie", expired), ("location", "/login")))

    def _guarded(
        self, path: str, act: Callable[[Session, Form], Awaitable[Outcome]]
    ) -> Callable[[Form], Awaitable[Page]]:
        async def route(form: Form) -> Page:
            session = self.sessions.get(form.cookie)
            if session is None:
                return Page(b"login required: POST /login first\n", status=403)
            if not session.csrf_ok(_field(form, "csrf")):
                log.info("console %s by %s refused: no valid CSRF token", path, session.principal)
                return Page(b"CSRF token missing or wrong: reload the page and try again\n", status=403)
            if form.origin and urlsplit(form.origin).netloc != (form.host or ""):
                log.info("console %s by %s refused: posted from %s", path, session.principal, form.origin)
                return Page(b"posted from another origin\n", status=403)
            rows: list[tuple[str, int, str, str]] = []  # a dry run's preview: topic, partition, now, then
            try:
                error, said, *more = await act(session, form)
                rows = more[0] if more else []
            except CallFailed as e:
                error, said = "INVALID_REQUEST", f"the broker refused the request: {e}"
            except ValueError as e:
                error, said = "INVALID_REQUEST", str(e)
            log.info("console %s by %s from %s: %s %s", path, session.principal, form.peer, error, said)
            status = 200 if error == "NONE" else 403 if error.endswith("AUTHORIZATION_FAILED") else 400
            back = _field(form, "back") or "/"
            back = back if back.startswith("/") and not back.startswith("//") else "/"
            return self._render(
                "result.html",
                status,
                page="",
                error=error,
                said=said,
                back=back,
                session=session,
                rows=rows,
                preview=_preview(form)
                if rows and _field(form, "mode") != "apply" and error == "NONE"
                else None,
            )

        return route

    async def create_topic(self, session: Session, form: Form) -> Outcome:
        name = _field(form, "name")
        partitions = int(_field(form, "partitions") or "-1")
        replication = int(_field(form, "replication") or "-1")
        configs = [{"name": n, "value": v} for n, v in _pairs(form.fields.get("configs", [""])[0])]
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication,
                    "configs": configs,
                }
            ],
            "timeout_ms": 30000,
            "validate_only": False,
        }
        resp = await self.kafka.call(session.principal, form.peer, k.CREATE_TOPICS, body)
        t = resp.topics[0]
        if t.error_code:
            return error_name(t.error_code), t.error_message or f"topic {name} not created"
        return "NONE", f"created topic {name} with {t.num_partitions} partition(s)"

    async def delete_topic(self, session: Session, form: Form) -> Outcome:
        name = _field(form, "name")
        body = {"topic_names": [name], "timeout_ms": 30000}
        resp = await self.kafka.call(session.principal, form.peer, k.DELETE_TOPICS, body)
        t = resp.responses[0]
        if t.error_code:
            return error_name(t.error_code), t.error_message or f"topic {name} not deleted"
        return "NONE", f"deleted topic {name}"

    async def produce(self, session: Session, form: Form) -> Outcome:
        name = _field(form, "name")
        partition = int(_field(form, "partition") or "0")
        key = form.fields.get("key", [""])[0]
        value = form.fields.get("value", [""])[0]
        headers = tuple((h, v.encode()) for h, v in _pairs(form.fields.get("headers", [""])[0]))
        record = Record(0, int(time.time() * 1000), key.encode() if key else None, value.encode(), headers)
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 30000,
            "topic_data": [
                {"name": name, "partition_data": [{"index": partition, "records": build_batch([record])}]}
            ],
        }
        resp = await self.kafka.call(session.principal, form.peer, k.PRODUCE, body)
        p = resp.responses[0].partition_responses[0]
        if p.error_code:
            return error_name(p.error_code), p.error_message or f"not written to {name}-{partition}"
        return "NONE", f"written to {name}-{partition} at offset {p.base_offset}"

    async def alter_configs(self, session: Session, form: Form) -> Outcome:
        name = _field(form, "name")
        configs: list[dict[str, Any]] = [
            {"name": n, "config_operation": SET, "value": v}
            for n, v in _pairs(form.fields.get("set", [""])[0])
        ]
        configs += [
            {"name": n, "config_operation": DELETE, "value": None}
            for n, _ in _pairs(form.fields.get("delete", [""])[0])
        ]
        if not configs:
            raise ValueError("no config to set or delete")
        body = {
            "resources": [{"resource_type": TOPIC, "resource_name": name, "configs": configs}],
            "validate_only": False,
        }
        resp = await self.kafka.call(session.principal, form.peer, k.INCREMENTAL_ALTER_CONFIGS, body)
        r = resp.responses[0]
        if r.error_code:
            return error_name(r.error_code), r.error_message or f"configs of {name} not changed"
        return "NONE", f"changed {len(configs)} config(s) of topic {name}"

    async def add_partitions(self, session: Session, form: Form) -> Outcome:
        name = _field(form, "name")
        count = int(_field(form, "count"))
        body = {
            "topics": [{"name": name, "count": count, "assignments": None}],
            "timeout_ms": 30000,
            "validate_only": False,
        }
        resp = await self.kafka.call(session.principal, form.peer, k.CREATE_PARTITIONS, body)
        r = resp.results[0]
        if r.error_code:
            return error_name(r.error_code), r.error_message or f"{name} not grown"
        return "NONE", f"topic {name} now has {count} partition(s)"


def _preview(form: Form) -> dict[str, str]:
    """A dry run's fields, for its "apply" form to post again."""
    return {name: _field(form, name) for name in ("id", "topic", "to", "value", "back")}


SET, DELETE = 0, 1  # IncrementalAlterConfigs' operations
TOPIC = 2  # ConfigResource.Type.TOPIC
