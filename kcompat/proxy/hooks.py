"""The proxy's two interception points, for fault injection and capture (kcompat/faults wires a
rule engine here; tests capture with them).

    request_hook(exchange, frame)  -> a replacement request frame (no size prefix), or None
    response_hook(exchange, chunks) -> replacement chunks of the whole answer frame, or None

`frame` is the request as the client sent it, without its size prefix; `chunks` the answer as the
proxy is about to send it (size prefix included, node addresses already rewritten). A hook that
raises CloseConnection closes that client's connection; a request hook that raises AnswerNow
answers the client itself, in order, and nothing goes upstream; any other exception is a bug in the hook
and closes the connection too, with one log line. Hooks run on the event loop: they must not block.
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


class CloseConnection(Exception):
    """Raised by a hook: close this client's connection (and its upstream one)."""


class AnswerNow(Exception):
    """Raised by a request hook: answer with `chunks` (a whole answer frame) instead of relaying."""

    def __init__(self, chunks: Sequence[Any]) -> None:
        super().__init__("answered by the proxy's request hook")
        self.chunks = list(chunks)


RequestHook = Callable[[Exchange, bytes | bytearray], "bytes | bytearray | None"]
ResponseHook = Callable[[Exchange, Sequence[Any]], "Sequence[Any] | None"]
