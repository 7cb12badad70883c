"""The fault rules and traffic captures on the proxy's two hooks (the engines: kcompat/faults and
kcompat/capture, the same as `kcompat serve`'s).

    intercept = Intercept(FaultEngine(), CaptureEngine(log_dir))
    ProxyServer(config, request_hook=intercept.request, response_hook=intercept.response)

A rule's or a capture's `broker` is the upstream node the request goes to (-1: the bootstrap
listener). A request is decoded once, and only while a rule is set or a capture wants its API.
Hooks run on the event loop and may not wait, so the proxy applies the faults that need no
waiting: an error answered by the proxy itself (nothing goes upstream), drop (before or after the
request was served), duplicate and corrupt. A rule that would make the proxy wait (delay,
blackhole, partition, throttle) is logged once and not applied: set those on `kcompat serve`.
A capture sees what the client got, an injected answer included.
"""

from __future__ import annotations

import logging
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
from kcompat.proxy.hooks import AnswerNow, CloseConnection, Exchange
from kcompat.proxy.log_limit import LogLimit
from kcompat.wire.errors import DecodeError
from kcompat.wire.protocol import UnsupportedRequest, decode_request, decode_response, encode_response

log = logging.getLogger("kcompat.proxy.faults")
_PRODUCE = 0
_ANSWER_FAULTS = ("drop", "duplicate", "corrupt")  # what the proxy does to an answer, unwaiting
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
    __slots__ = ("_after", "_capturing", "_logs", "captures", "faults")

    def __init__(self, faults: FaultEngine, captures: CaptureEngine) -> None:
        self.faults = faults
        self.captures = captures
        self._after: dict[Key, Verdict] = {}  # an after-rule to apply to the answer
        self._capturing: dict[Key, _Started] = {}  # a request a capture waits to see answered
        self._logs = LogLimit()

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
        if action.when == AFTER and action.kind in _ANSWER_FAULTS:
            _bounded(self._after)[_key(exchange)] = verdict
            return
        if action.when != AFTER and action.kind == "drop":
            raise CloseConnection
        if action.when != AFTER and action.kind == "error":
            body = facts.body
            if exchange.api_key == _PRODUCE and (body is None or getattr(body, "acks", -1) == 0):
                raise CloseConnection  # acks=0 has no answer to give (an unreadable one: no telling)
            text = f"injected by kcompat fault rule {verdict.rule_id}"
            answer = error_response(exchange.api_key, exchange.api_version, body, action.error, text)
            raise AnswerNow(
                encode_response(exchange.api_key, exchange.api_version, exchange.correlation_id, answer)
            )
        self._logs.info(
            log,
            f"waits:{verdict.rule_id}",
            f"fault rule {verdict.rule_id} ({action.kind}) makes the answer wait, which the proxy does not "
            "do: the request is relayed as usual; set this rule on kcompat serve instead",
        )

    # -- answers ----------------------------------------------------------------------------------

    def response(self, exchange: Exchange, chunks: Sequence[Any]) -> Sequence[Any] | None:
        if not (self._after or self._capturing):
            return None
        key = _key(exchange)
        replaced: Sequence[Any] | None = None
        verdict = self._after.pop(key, None)
        if verdict is not None:
            kind = verdict.action.kind
            if kind == "drop":
                self._capturing.pop(key, None)
                raise CloseConnection
            replaced = duplicate(chunks) if kind == "duplicate" else corrupt(chunks)
        started = self._capturing.pop(key, None)
        if started is not None:
            sent = chunks if replaced is None else replaced
            self._observe(started.facts, exchange.correlation_id, sent, started.started, started.clock)
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
        body=body,
    )
