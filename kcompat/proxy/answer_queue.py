"""The answers one client connection is owed, sent in request order.

A Kafka broker answers a connection's requests in order, so each request relayed (or answered by
the proxy itself) takes its place in `_waiting`, and those relayed in `_inflight` too, in the order
sent. An answer from the upstream is matched to the head of `_inflight` (its correlation id
checked), rewritten where it names nodes (frames.rewrite_answer; ApiVersions intersected), shown
to the response hook, and leaves when every answer before it has left and its own time has come
(a held answer holds the ones after it, as a broker's would). A large Fetch answer whose turn has
come streams instead (answer_stream.py).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kcompat.proxy.answer_stream import AnswerStream, open_stream
from kcompat.proxy.api_versions import rewrite_api_versions
from kcompat.proxy.frames import Pending, rewrite_answer
from kcompat.proxy.hooks import CloseConnection, Exchange, HoldAnswer
from kcompat.proxy.relay_reader import send
from kcompat.proxy.shared import Shared
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import API_VERSIONS_KEY

log = logging.getLogger("kcompat.proxy")
_SIZE = struct.Struct(">i")


@dataclass(slots=True)
class _Waiting:
    pending: Pending
    exchange: Exchange
    chunks: Sequence[Any] | None = None  # the answer, once known (the upstream's or the proxy's own)
    due: float = 0.0  # the loop time it may leave at (0: as soon as its turn comes)
    never: bool = False  # black-holed: never sent, and the answers after it wait behind it


class AnswerQueue:
    """The answer side of connection.ClientConnection, which sets these and closes and fails."""

    shared: Shared
    peer: tuple[str, int]
    transport: asyncio.Transport | None
    _closed: bool
    _waiting: deque[_Waiting]  # every answer owed, in request order
    _inflight: deque[_Waiting]  # those the upstream owes, in the order sent
    _timers: dict[str, asyncio.TimerHandle]

    def close(self) -> None:
        raise NotImplementedError

    def fail(self, kind: str, message: str) -> None:
        raise NotImplementedError

    def owed(self) -> int:
        return len(self._inflight)

    def _wake(self, name: str, when: float, callback: Callable[[], None]) -> None:
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()
        self._timers[name] = asyncio.get_running_loop().call_at(when, callback)

    # -- answers ----------------------------------------------------------------------------------

    def answer(self, frame: bytes | bytearray) -> None:
        """An answer frame (no size prefix) from the upstream."""
        if not self._inflight or len(frame) < 4:
            self.fail(
                "unasked", f"the upstream for {self.peer[0]} sent an answer nobody asked for: closing it"
            )
            return
        waiting = self._inflight.popleft()
        pending = waiting.pending
        correlation = _SIZE.unpack_from(frame)[0]
        if correlation != pending.correlation_id:
            self.fail(
                "correlation",
                f"the upstream answered correlation id {correlation}, expected {pending.correlation_id}: "
                "closing the client's connection",
            )
            return
        try:
            if pending.api_key == API_VERSIONS_KEY:
                ours = rewrite_api_versions(pending.api_version, frame, self.shared.upstream_apis)
                chunks = ours or [_SIZE.pack(len(frame)), frame]
            else:
                chunks, _ = rewrite_answer(
                    pending, frame, self.shared.nodes.endpoint, self.shared.nodes.learn, self.shared.tenant
                )
        except DecodeError as e:
            spec = APIS.get(pending.api_key)
            name = f"{spec.name if spec else pending.api_key} v{pending.api_version}"
            self.fail(
                "bad-answer", f"the upstream's answer to {name} does not decode ({e}): closing the connection"
            )
            return
        except Exception:  # a bug in the rewrite: this client only
            log.exception(
                "the proxy could not rewrite an answer: closing the connection from %s", self.peer[0]
            )
            self.close()
            return
        self._ready(waiting, chunks)

    def open_stream(self, size: int) -> AnswerStream | None:
        """The next answer relayed as it arrives, when it may be: its turn come, no hook or virtual
        cluster to see it (answer_stream.py says which APIs, and whether node addresses fit)."""
        ahead = self._waiting and self._inflight and self._waiting[0] is self._inflight[0]
        if self._closed or not ahead or self.transport is None:
            return None
        waiting, shared = self._inflight[0], self.shared
        idle = shared.response_hook is None or (
            shared.hooks_idle is not None and shared.hooks_idle(waiting.exchange)
        )
        if shared.tenant or not idle or not (p := waiting.pending).known:
            return None
        stream = open_stream(p.api_key, p.api_version, p.correlation_id, size, self._write, self.shared.nodes)
        if stream is not None:  # it stays at the head of _waiting (no chunks) till its last byte
            self._inflight.popleft()
            stream.finished = self._streamed
        return stream

    def _write(self, chunks: Sequence[bytes | bytearray | memoryview]) -> None:
        if not self._closed and self.transport is not None:  # a client gone mid-answer: dropped
            send(self.transport, chunks)

    def _streamed(self) -> None:
        self._waiting.popleft()
        self._flush()  # answers the proxy gave itself meanwhile

    def _answer_here(self, waiting: _Waiting, chunks: Sequence[Any]) -> None:
        """An answer the proxy gives itself, sent in its turn."""
        self._waiting.append(waiting)
        self._ready(waiting, chunks)

    def _ready(self, waiting: _Waiting, chunks: Sequence[Any]) -> None:
        """The answer is known: the response hook sees it now; it leaves in its turn (_flush)."""
        if self.shared.response_hook is not None:
            try:
                replaced = self.shared.response_hook(waiting.exchange, chunks)
            except CloseConnection:
                self.close()
                return
            except HoldAnswer as held:
                replaced = None
                if held.delay is None:
                    waiting.never = True
                else:
                    waiting.due = asyncio.get_running_loop().time() + held.delay
            except Exception:  # a bug in the hook: this client only
                log.exception(
                    "the proxy's response hook failed: closing the connection from %s", self.peer[0]
                )
                self.close()
                return
            if replaced is not None:
                chunks = replaced
        waiting.chunks = chunks
        self._flush()

    def _flush(self) -> None:
        """Send the answers at the head whose time has come, in request order."""
        while self._waiting and not self._closed:
            head = self._waiting[0]
            if head.chunks is None or head.never:
                return
            if head.due and head.due > asyncio.get_running_loop().time():
                self._wake("answers", head.due, self._flush)
                return
            self._waiting.popleft()
            if self.transport is not None:
                self.transport.writelines(head.chunks)
