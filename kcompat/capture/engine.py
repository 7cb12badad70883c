"""The captures running now: each request and its answer are offered to every one of them.

A capture matches requests by the fault rules' matchers (kcompat.faults' Match and matches, one
implementation for both). A `records` capture keeps what clients produced and consumed, record
by record, up to max_records (later records are counted as dropped); a `log` capture queues one
JSON line per exchange to its file's writer thread (log_writer.py). `on` is False while nothing
runs: the front then skips the capture path with one attribute read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kcompat.capture.bodies import body_json
from kcompat.capture.log_writer import JsonLinesWriter
from kcompat.capture.records import FETCH, PRODUCE, Captured, TopicName, consumed, produced
from kcompat.capture.spec import CaptureError, CaptureSpec, spec_to_json
from kcompat.faults.engine import matches
from kcompat.faults.facts import RequestFacts
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import APIS

MAX_CAPTURES = 100
MAX_PAGE = 100_000


@dataclass(slots=True)
class Capture:
    id: int
    spec: CaptureSpec
    running: bool = True
    seen: int = 0  # exchanges matched
    records: list[Captured] = field(default_factory=list)
    dropped: int = 0
    writer: JsonLinesWriter | None = None
    # client id -> (topic, partition) -> the offset after the last record that client consumed
    consumed_to: dict[str, dict[tuple[str | None, int], int]] = field(default_factory=dict)


@dataclass(slots=True)
class Exchange:
    """One request and its answer as a front saw them. `response()` decodes the answer's body
    (None: the request has none, acks=0 Produce), only when a capture asks for it."""

    facts: RequestFacts
    correlation_id: int
    response: Callable[[], Any]
    started: float  # wall clock, seconds
    elapsed: float  # seconds from the request read to its answer ready


class CaptureEngine:
    def __init__(self, log_dir: Path | None = None, topic_name: TopicName | None = None) -> None:
        self.log_dir = log_dir
        self.topic_name = topic_name
        self.captures: dict[int, Capture] = {}
        self.on = False
        # The API keys some running capture may match (None: any): the others skip observe().
        self.api_keys: frozenset[int] | None = frozenset()
        self._next_id = 1
        self._seq = 0

    def start(self, spec: CaptureSpec) -> int:
        if len(self.captures) >= MAX_CAPTURES:
            raise CaptureError(f"at most {MAX_CAPTURES} captures at once: remove some first")
        writer = None
        if spec.kind == "log":
            if self.log_dir is None:
                raise CaptureError("kind log: this front has no capture directory")
            writer = JsonLinesWriter(self.log_dir / spec.file, spec.max_bytes, spec.files)
        cid = self._next_id
        self._next_id += 1
        self.captures[cid] = Capture(cid, spec, writer=writer)
        self._refresh()
        return cid

    def stop(self, cid: int) -> bool:
        c = self.captures.get(cid)
        if c is None:
            return False
        c.running = False
        if c.writer is not None:
            c.writer.close()
        self._refresh()
        return True

    def remove(self, cid: int) -> bool:
        if not self.stop(cid):
            return False
        del self.captures[cid]
        return True

    def clear(self) -> int:
        n = len(self.captures)
        for cid in list(self.captures):
            self.remove(cid)
        return n

    def close(self) -> None:
        self.clear()

    def _refresh(self) -> None:
        running = [c.spec.match.api_keys for c in self.captures.values() if c.running]
        self.on = bool(running)
        self.api_keys = None if any(keys is None for keys in running) else frozenset().union(*running)  # type: ignore[arg-type]

    def describe(self, c: Capture) -> dict[str, Any]:
        out: dict[str, Any] = {"id": c.id, **spec_to_json(c.spec), "running": c.running, "seen": c.seen}
        if c.writer is not None:
            w = c.writer
            out.update(path=str(w.path), written=w.written, dropped=w.dropped, rotations=w.rotations)
        else:
            out.update(captured=len(c.records), dropped=c.dropped)
        return out

    def listing(self) -> list[dict[str, Any]]:
        return [self.describe(c) for c in self.captures.values()]

    def records(self, cid: int, since: int = 0, limit: int = MAX_PAGE) -> dict[str, Any] | None:
        """The capture and its records from position `since` (a page of at most `limit`)."""
        c = self.captures.get(cid)
        if c is None:
            return None
        page = c.records[since : since + min(limit, MAX_PAGE)]
        return {**self.describe(c), "since": since, "records": page}

    # -- the request path ----------------------------------------------------------------------

    def observe(self, ex: Exchange) -> None:
        facts = ex.facts
        decoded = _Lazy(ex.response)
        line: dict[bool, dict[str, Any]] = {}
        for c in self.captures.values():
            if not c.running or not matches(c.spec.match, facts):
                continue
            c.seen += 1
            if c.writer is not None:
                full = c.spec.full
                if full not in line:
                    line[full] = self._line(ex, decoded, full)
                c.writer.put(line[full])
            elif facts.api_key in (PRODUCE, FETCH):
                self._keep(c, ex, decoded)

    def _keep(self, c: Capture, ex: Exchange, decoded: _Lazy) -> None:
        facts = ex.facts
        response = decoded.get()
        if response is _UNDECODABLE:
            return
        client = facts.client_id or ""
        if facts.api_key == PRODUCE:
            direction, found = "produce", produced(facts.body, response, self.topic_name)
        else:
            if response is None:
                return
            last = c.consumed_to.setdefault(client, {})
            direction, found = "consume", consumed(facts.body, response, self.topic_name, last)
        m = c.spec.match
        for item in found:
            if m.topics is not None and item["topic"] not in m.topics:
                continue
            if m.partitions is not None and item["partition"] not in m.partitions:
                continue
            if len(c.records) >= c.spec.max_records:
                c.dropped += 1
                continue
            self._seq += 1
            c.records.append(
                {
                    "seq": self._seq,
                    "direction": direction,
                    "client_id": client,
                    "principal": facts.principal,
                    "peer": facts.peer,
                    **item,
                }
            )

    def _line(self, ex: Exchange, decoded: _Lazy, full: bool) -> dict[str, Any]:
        f = ex.facts
        api = APIS.get(f.api_key)
        response = decoded.get()
        return {
            "time": round(ex.started, 6),
            "api": api.name if api else f.api_key,
            "api_key": f.api_key,
            "version": f.api_version,
            "correlation_id": ex.correlation_id,
            "client_id": f.client_id,
            "principal": f.principal,
            "peer": f.peer,
            "broker": f.broker,
            "elapsed_ms": round(ex.elapsed * 1000, 3),
            "request": body_json(f.body, full=full),
            "response": "undecodable" if response is _UNDECODABLE else body_json(response, full=full),
        }


_UNDECODABLE = object()
_UNSET = object()


class _Lazy:
    """The answer's body, decoded at most once and only if a capture needs it."""

    __slots__ = ("_decode", "_value")

    def __init__(self, decode: Callable[[], Any]) -> None:
        self._decode = decode
        self._value: Any = _UNSET

    def get(self) -> Any:
        if self._value is _UNSET:
            try:
                self._value = self._decode()
            except (DecodeError, ValueError, IndexError):  # a corrupted or duplicated answer
                self._value = _UNDECODABLE
        return self._value
