"""A client of a broker's traffic captures (the admin listener's /captures), for tests and the CLI.

    captures = Captures("http://127.0.0.1:9644")
    cid = captures.start(topic="orders", client_id="billing")   # matchers as for fault rules
    ...                                                          # clients produce and consume
    captures.produced(cid)     # [{"topic", "partition", "offset", "key", "value", "headers", ...}]
    captures.consumed(cid, client_id="audit")
    captures.stop(cid); captures.records(cid); captures.remove(cid); captures.clear()
    captures.start(kind="log", file="traffic.jsonl", full=True)  # JSON lines; see kcompat/capture

Keywords of start() other than kind, max_records, file, max_bytes, files and full are matchers
(api, versions, topic, partition, group_id, transactional_id, client_id, principal, peer,
broker). The standard library only.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from kcompat.fault_client import AdminApi

_SPEC_KEYS = ("kind", "max_records", "file", "max_bytes", "files", "full")


def capture(spec: Mapping[str, Any] | None = None, /, **kw: Any) -> dict[str, Any]:
    """A capture's JSON from keywords (a mapping is taken as the whole capture)."""
    if spec is not None:
        return dict(spec)
    out: dict[str, Any] = {k: kw.pop(k) for k in _SPEC_KEYS if kw.get(k) is not None}
    out["match"] = {k: v for k, v in kw.items() if v is not None}
    return out


class Captures(AdminApi):
    """The same HTTP plumbing as Faults (errors: FaultApiError with the status), on /captures."""

    path = "/captures"

    def start(self, spec: Mapping[str, Any] | None = None, /, **kw: Any) -> int:
        return int(self.call("POST", body=capture(spec, **kw))["id"])

    def list(self) -> builtins.list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.call("GET")["captures"]
        return found

    def get(self, cid: int) -> dict[str, Any]:
        found: dict[str, Any] = self.call("GET", f"/{cid}")
        return found

    def records(self, cid: int, since: int = 0) -> builtins.list[dict[str, Any]]:
        """Every record captured so far (paged through)."""
        out: builtins.list[dict[str, Any]] = []
        while True:
            page = self.call("GET", f"/{cid}?since={since + len(out)}")["records"]
            if not page:
                return out
            out.extend(page)

    def produced(self, cid: int, **where: Any) -> builtins.list[dict[str, Any]]:
        return [r for r in self.records(cid) if r["direction"] == "produce" and _has(r, where)]

    def consumed(self, cid: int, **where: Any) -> builtins.list[dict[str, Any]]:
        return [r for r in self.records(cid) if r["direction"] == "consume" and _has(r, where)]

    def stop(self, cid: int) -> None:
        self.call("POST", f"/{cid}/stop")

    def remove(self, cid: int) -> None:
        self.call("DELETE", f"/{cid}")

    def clear(self) -> int:
        return int(self.call("DELETE")["cleared"])


def _has(record: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    return all(record.get(k) == v for k, v in where.items())
