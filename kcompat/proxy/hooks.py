"""The proxy's two interception points, for fault injection and capture (kcompat/faults wires a
rule engine here; tests capture with them).

    request_hook(exchange, frame)  -> a replacement request frame (no size prefix), or None
    response_hook(exchange, chunks) -> replacement chunks of the whole answer frame, or None

`frame` is the request as the client sent it, without its size prefix; `chunks` the answer as the
proxy is about to send it (size prefix included, node addresses already rewritten). A hook that
raises CloseConnection closes that client's connection; a request hook that raises AnswerNow
answers the client itself, in order, and nothing goes upstream; a request hook that raises
HoldRequest relays the request later (or never), a response hook that raises HoldAnswer sends the
answer later (or never), the connection's later answers waiting behind it; any other exception is
a bug in the hook and closes the connection too, with one log line. Hooks run on the event loop:
they must not block, so waiting is the connection's (timers), never the hook's.

    connect_hook(node_id, client) -> False to refuse a new client connection (closed at once)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request through the proxy: whose, to which node, of what."""

    connection_id: int
    client: tuple[str, int]
    node_id: int | None  # None: the bootstrap listener
    api_key: int
    api_version: int
    correlation_id: int
    principal: str = "User:ANONYMOUS"  # who authenticated, when SASL is terminated at the proxy


class CloseConnection(Exception):
    """Raised by a hook: close this client's connection (and its upstream one)."""


class AnswerNow(Exception):
    """Raised by a request hook: answer with `chunks` (a whole answer frame) instead of relaying."""

    def __init__(self, chunks: Sequence[Any]) -> None:
        super().__init__("answered by the proxy's request hook")
        self.chunks = list(chunks)


class HoldRequest(Exception):
    """Raised by a request hook: relay the request `delay` seconds from now, the connection's
    later requests behind it (delay None: never relay it; it is never answered)."""

    def __init__(self, delay: float | None) -> None:
        super().__init__("request held by the proxy's request hook")
        self.delay = delay


class HoldAnswer(Exception):
    """Raised by a response hook: send the answer `delay` seconds from now (None: never); the
    connection's later answers wait behind it, as a client expects its answers in order."""

    def __init__(self, delay: float | None) -> None:
        super().__init__("answer held by the proxy's response hook")
        self.delay = delay


RequestHook = Callable[[Exchange, bytes | bytearray], "bytes | bytearray | None"]
ResponseHook = Callable[[Exchange, Sequence[Any]], "Sequence[Any] | None"]
ConnectHook = Callable[[int | None, tuple[str, int]], bool]
