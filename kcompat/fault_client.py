"""A client of a broker's fault rules (the admin listener's /faults), for tests and the CLI.

    faults = Faults("http://127.0.0.1:9644")
    rule = faults.add("error", api="Produce", error="NOT_LEADER_OR_FOLLOWER", trigger="once")
    faults.add({"match": {"api": "Fetch"}, "action": "drop", "trigger": {"nth": 2}})  # JSON form
    faults.fired(rule)            # how often it acted;  faults.list(), faults.remove(rule), faults.clear()

Keywords of add() other than trigger, when, error, delay_ms and bytes_per_second are matchers
(api, versions, topic, partition, group_id, transactional_id, client_id, principal, peer,
broker). The standard library only: a test suite needs nothing more than kcompat.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

_ACTION_KEYS = ("error", "delay_ms", "bytes_per_second", "when")


class FaultApiError(Exception):
    """The broker refused the call (a rule it cannot read: the message names the field)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def rule(action: str | Mapping[str, Any], /, *, trigger: Any = "always", **kw: Any) -> dict[str, Any]:
    """A rule's JSON from keywords (a mapping is taken as the whole rule)."""
    if isinstance(action, Mapping):
        return dict(action)
    act: dict[str, Any] = {"kind": action}
    act.update({k: kw.pop(k) for k in _ACTION_KEYS if kw.get(k) is not None})
    match = {k: v for k, v in kw.items() if v is not None}
    return {"match": match, "action": act, "trigger": trigger}


class AdminApi:
    """JSON over HTTP to one of the admin listener's API routes (`path`: /faults, /captures)."""

    path = ""

    def __init__(
        self, admin_url: str, user: str | None = None, password: str | None = None, timeout: float = 10.0
    ):
        self.url = admin_url.rstrip("/") + self.path
        self.timeout = timeout
        self._auth = None
        if user is not None:
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            self._auth = f"Basic {token}"

    def call(self, method: str, path: str = "", body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("content-type", "application/json")
        if self._auth is not None:
            req.add_header("authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as e:
            with e:  # its socket is closed here, not whenever it is collected
                text = e.read().decode("utf-8", "replace")
            try:
                message = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                message = text.strip() or e.reason
            raise FaultApiError(e.code, f"{e.code}: {message}") from None


class Faults(AdminApi):
    path = "/faults"

    def add(self, action: str | Mapping[str, Any], /, **kw: Any) -> int:
        """Add a rule; its id."""
        ids: list[int] = self.call("POST", body=rule(action, **kw))["ids"]
        return ids[0]

    def replace(self, rule_id: int, action: str | Mapping[str, Any], /, **kw: Any) -> None:
        self.call("PUT", f"/{rule_id}", rule(action, **kw))

    def list(self) -> list[dict[str, Any]]:
        rules: list[dict[str, Any]] = self.call("GET")["rules"]
        return rules

    def get(self, rule_id: int) -> dict[str, Any]:
        found: dict[str, Any] = self.call("GET", f"/{rule_id}")
        return found

    def fired(self, rule_id: int) -> int:
        return int(self.get(rule_id)["fired"])

    def wait_fired(self, rule_id: int, times: int = 1, timeout: float = 30.0) -> int:
        """Until the rule has acted `times` times (TimeoutError otherwise); how often it has."""
        deadline = time.monotonic() + timeout
        while (n := self.fired(rule_id)) < times:
            if time.monotonic() > deadline:
                raise TimeoutError(f"fault rule {rule_id} fired {n} of {times} times in {timeout:g} s")
            time.sleep(0.05)
        return n

    def remove(self, rule_id: int) -> None:
        self.call("DELETE", f"/{rule_id}")

    def clear(self) -> int:
        return int(self.call("DELETE")["cleared"])
