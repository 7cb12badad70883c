"""The fault rules' HTTP API on the admin listener (the rule engine is kcompat/faults).

    GET    /faults         {"rules": [{"id", "match", "action", "trigger", "state", "seen", "fired"}],
                            "fired": {action: count}}
    POST   /faults         a rule, or a list of rules: 201 {"ids": [...], "rules": [...]}
    GET    /faults/ID      one rule
    PUT    /faults/ID      change a rule (its trigger state starts afresh)
    DELETE /faults/ID      remove a rule;   DELETE /faults: remove them all ({"cleared": n})

A rule the engine cannot read is a 400 whose `error` names the field at fault; nothing a client
sends reaches the broker's request path but a rule the engine accepted. This is the one admin
route that changes anything, and it changes only the rules: the broker's state is the rules'
to disturb, never the listener's.
"""

from __future__ import annotations

import json
from typing import Any

from kcompat.admin_http.http_server import Page
from kcompat.faults import FaultEngine, RuleError, rule_from_json

MAX_RULES = 1000
_JSON = "application/json"


def faults_route(engine: FaultEngine) -> Any:
    def route(method: str, path: str, query: dict[str, list[str]], body: bytes) -> Page:
        rest = path[len("/faults") :].strip("/")
        if rest:
            if not rest.isdigit():
                return _error(404, f"no rule {rest!r}: rule ids are numbers")
            return _one(engine, method, int(rest), body)
        if method in ("GET", "HEAD"):
            return _page(200, {"rules": engine.listing(), "fired": dict(engine.fired_by_action)})
        if method == "POST":
            return _add(engine, body)
        if method == "DELETE":
            return _page(200, {"cleared": engine.clear()})
        return _error(405, "use GET, POST or DELETE on /faults")

    return route


def _one(engine: FaultEngine, method: str, rule_id: int, body: bytes) -> Page:
    if method in ("GET", "HEAD"):
        found = [r for r in engine.listing() if r["id"] == rule_id]
        return _page(200, found[0]) if found else _error(404, f"no rule {rule_id}")
    if method == "DELETE":
        return (
            _page(200, {"removed": rule_id}) if engine.remove(rule_id) else _error(404, f"no rule {rule_id}")
        )
    if method == "PUT":
        try:
            rule = rule_from_json(_json(body))
        except RuleError as e:
            return _error(400, str(e))
        if not engine.replace(rule_id, rule):
            return _error(404, f"no rule {rule_id}")
        return _page(200, {"id": rule_id})
    return _error(405, "use GET, PUT or DELETE on /faults/ID")


def _add(engine: FaultEngine, body: bytes) -> Page:
    try:
        data = _json(body)
        items = data if isinstance(data, list) else [data]
        rules = []
        for i, item in enumerate(items):
            try:
                rules.append(rule_from_json(item))
            except RuleError as e:
                raise RuleError(f"rule {i}: {e}" if len(items) > 1 else str(e)) from None
    except RuleError as e:
        return _error(400, str(e))
    if not rules:
        return _error(400, "no rule given")
    if len(engine.rules) + len(rules) > MAX_RULES:
        return _error(409, f"at most {MAX_RULES} rules at once: clear some first")
    ids = [engine.add(rule) for rule in rules]
    listed = {r["id"]: r for r in engine.listing()}
    return _page(201, {"ids": ids, "rules": [listed[i] for i in ids]})


def _json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise RuleError("the body is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise RuleError(f"the body is not JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except (RecursionError, ValueError):
        raise RuleError("the body is not JSON a rule can be read from (too deep or too large)") from None


def _page(status: int, data: Any) -> Page:
    return Page(json.dumps(data, indent=1).encode() + b"\n", _JSON, status=status)


def _error(status: int, message: str) -> Page:
    return _page(status, {"error": message})
