"""The fault rules and traffic captures on the proxy's two hooks (the engines: kcompat/faults and
kcompat/capture, the same as `kcompat serve`'s).

    intercept = Intercept(FaultEngine(), CaptureEngine(log_dir))
    ProxyServer(config, request_hook=intercept.request, response_hook=intercept.response,
                connect_hook=intercept.connect)

A rule's or a capture's `broker` is the upstream node the request goes to (-1: the bootstrap
listener). A request is decoded once, and only while a rule is set or a capture wants its API.
Every action applies: error is answered by the proxy itself (nothing goes upstream); drop closes
the connection (before the request goes on, or once its answer came back); delay holds the
request (before) or its answer (after); blackhole swallows the request (before: never relayed)
or its answer (after: served upstream, never sent on), the connection kept; throttle holds each
answer for its size at the rule's rate; duplicate and corrupt change the answer; partition cuts
the client off the node: a matching request closes its connection, and a new connection to that
node from a matching peer is refused while the rule holds. Hooks never wait themselves: they
raise HoldRequest/HoldAnswer and the connection's timers hold. A capture sees what the client
got, an injected answer included (a black-holed one: nothing).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from kcompat.capture import CaptureEngine
from kcompat.capture import Exchange as Observed
from kcompat.capture.bodies import frame_bytes
from kcompat.faults import FaultEngine, RequestFacts, Verdict, corrupt, duplicate, error_response
from kcompat.faults.rules import AFTER
from kcompat.proxy.hooks import AnswerNow, CloseConnection, Exchange, HoldAnswer, HoldRequest
from kcompat.wire.errors import DecodeError
from kcompat.wire.protocol import UnsupportedRequest, decode_request, decode_response, encode_response

_PRODUCE = 0
_CONNECT_KINDS = frozenset({"partition"})  # the rules a new connection is checked against
Key = tuple[int, int]  # (connection id, correlation id)
# Requests waiting for their answer, at most: a connection closed with requests in flight never
# answers them, so the oldest entry goes once this many wait (far above any client's in-flight).
_MAX_WAITING = 100_000


@dataclass(slots=True)
class _Started:
    facts: RequestFacts
    started: float
    clock: float


class Intercept:
    __slots__ = ("_after", "_capturing", "captures", "faults")

    def __init__(self, faults: FaultEngine, captures: CaptureEngine) -> None:
        self.faults = faults
        self.captures = captures
        self._after: dict[Key, Verdict] = {}  # an after-rule to apply to the answer
        self._capturing: dict[Key, _Started] = {}  # a request a capture waits to see answered

    def idle(self, exchange: Exchange | None) -> bool:
        """Whether the hooks pass this exchange's answer (None: any request, its header not yet
        read) untouched: then the proxy may stream it rather than hold it whole."""
        if self.faults.armed or self.captures.on:
            return False
        return exchange is None or (
            _key(exchange) not in self._after and _key(exchange) not in self._capturing
        )

    # -- connections ------------------------------------------------------------------------------

    def connect(self, node_id: int | None, client: tuple[str, int]) -> bool:
        """False: a partition rule cuts this peer off this node (the connection is closed at once)."""
        if not self.faults.armed:
            return True
        broker = -1 if node_id is None else node_id
        facts = RequestFacts(-1, 0, None, peer=client[0], broker=broker)  # no request: no api, no names
        return self.faults.decide(facts, _CONNECT_KINDS) is None

    # -- requests ---------------------------------------------------------------------------------

    def request(self, exchange: Exchange, frame: bytes | bytearray) -> None:
        armed = self.faults.armed
        keys = self.captures.api_keys
        capturing = self.captures.on and (keys is None or exchange.api_key in keys)
        if not (armed or capturing):
            return
        facts = _facts(exchange, frame)
        if capturing:
            if exchange.api_key == _PRODUCE and getattr(facts.body, "acks", -1) == 0:
                self._observe(facts, exchange.correlation_id, None, time.time(), perf_counter())
            else:
                _bounded(self._capturing)[_key(exchange)] = _Started(facts, time.time(), perf_counter())
        if armed:
            try:
                self._fault(exchange, facts)
            except CloseConnection:
                self._capturing.pop(_key(exchange), None)
                raise

    def _fault(self, exchange: Exchange, facts: RequestFacts) -> None:
        verdict = self.faults.decide(facts)
        if verdict is None:
            return
        action = verdict.action
        if action.when == AFTER:  # acts on the answer: response() applies it
            _bounded(self._after)[_key(exchange)] = verdict
            return
        kind = action.kind
        if kind in ("drop", "partition"):
            raise CloseConnection
        if kind == "delay":
            raise HoldRequest(action.delay_ms / 1000)
        if kind == "blackhole":
            self._capturing.pop(_key(exchange), None)  # the client gets nothing to capture
            raise HoldRequest(None)
        # error: answered here, in its turn
        body = facts.body
        if exchange.api_key == _PRODUCE and (body is None or getattr(body, "acks", -1) == 0):
            raise CloseConnection  # acks=0 has no answer to give (an unreadable one: no telling)
        text = f"injected by kcompat fault rule {verdict.rule_id}"
        answer = error_response(exchange.api_key, exchange.api_version, body, action.error, text)
        raise AnswerNow(
            encode_response(exchange.api_key, exchange.api_version, exchange.correlation_id, answer)
        )

    # -- answers ----------------------------------------------------------------------------------

    def response(self, exchange: Exchange, chunks: Sequence[Any]) -> Sequence[Any] | None:
        if not (self._after or self._capturing):
            return None
        key = _key(exchange)
        replaced: Sequence[Any] | None = None
        hold = 0.0
        verdict = self._after.pop(key, None)
        if verdict is not None:
            kind = verdict.action.kind
            if kind in ("drop", "blackhole"):
                self._capturing.pop(key, None)
                raise CloseConnection if kind == "drop" else HoldAnswer(None)
            if kind == "delay":
                hold = verdict.action.delay_ms / 1000
            elif kind == "throttle":
                size = sum(len(c) for c in chunks)
                hold = self.faults.throttle_delay(verdict.rule_id, size, time.monotonic())
            else:
                replaced = duplicate(chunks) if kind == "duplicate" else corrupt(chunks)
        started = self._capturing.pop(key, None)
        if started is not None:
            sent = chunks if replaced is None else replaced
            self._observe(started.facts, exchange.correlation_id, sent, started.started, started.clock)
        if hold > 0:
            raise HoldAnswer(hold)
        return replaced

    def _observe(
        self,
        facts: RequestFacts,
        correlation: int,
        answer: Sequence[Any] | None,
        started: float,
        clock: float,
    ) -> None:
        if not self.captures.on:
            return

        def response() -> Any:
            if answer is None:
                return None
            return decode_response(facts.api_key, facts.api_version, frame_bytes(answer)[4:])[1]

        self.captures.observe(Observed(facts, correlation, response, started, perf_counter() - clock))


def _bounded(waiting: dict[Key, Any]) -> dict[Key, Any]:
    if len(waiting) >= _MAX_WAITING:
        del waiting[next(iter(waiting))]
    return waiting


def _key(exchange: Exchange) -> Key:
    return (exchange.connection_id, exchange.correlation_id)


def _facts(exchange: Exchange, frame: bytes | bytearray) -> RequestFacts:
    try:
        request = decode_request(frame, strict=False)
        body, client_id = request.body, request.client_id
    except (DecodeError, UnsupportedRequest):  # match on the header alone
        body, client_id = None, None
    return RequestFacts(
        exchange.api_key,
        exchange.api_version,
        client_id,
        peer=exchange.client[0],
        broker=-1 if exchange.node_id is None else exchange.node_id,
        principal=exchange.principal,
        body=body,
    )
