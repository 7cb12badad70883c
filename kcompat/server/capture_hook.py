"""The broker's side of traffic capture: the dispatcher hands each request here, with its own path
to serve it, while a capture runs (kcompat/capture holds the engine, independent of the broker).

    CaptureHook(engine, node_id).around(request, client, serve)

With no capture running the dispatcher never calls here (one attribute read per request). The
capture sees what the client got, an injected fault's answer included (it wraps the fault hook).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

from kcompat.capture import CaptureEngine, Exchange
from kcompat.capture.bodies import frame_bytes
from kcompat.faults import RequestFacts
from kcompat.wire.protocol import Chunk, Request, decode_response

Answer = list[Chunk] | asyncio.Future[list[Chunk] | None] | None


class CaptureHook:
    __slots__ = ("engine", "node_id")

    def __init__(self, engine: CaptureEngine, node_id: int) -> None:
        self.engine = engine
        self.node_id = node_id

    async def around(
        self, request: Request[Any], client: Any, serve: Callable[[], Awaitable[Answer]]
    ) -> Answer:
        keys = self.engine.api_keys
        if keys is not None and request.api_key not in keys:  # no running capture wants this API
            return await serve()
        started, clock = time.time(), perf_counter()
        answer = await serve()
        if isinstance(answer, asyncio.Future):
            return asyncio.ensure_future(self._deferred(request, client, answer, started, clock))
        self._observe(request, client, answer, started, clock)
        return answer

    async def _deferred(
        self,
        request: Request[Any],
        client: Any,
        pending: asyncio.Future[list[Chunk] | None],
        started: float,
        clock: float,
    ) -> list[Chunk] | None:
        answer = await pending
        self._observe(request, client, answer, started, clock)
        return answer

    def _observe(
        self, request: Request[Any], client: Any, answer: list[Chunk] | None, started: float, clock: float
    ) -> None:
        if not self.engine.on:
            return
        facts = RequestFacts(
            request.api_key,
            request.api_version,
            request.client_id,
            principal=getattr(client, "principal", "User:ANONYMOUS"),
            peer=getattr(client, "host", ""),
            broker=self.node_id,
            body=request.body,
            topic_name=self.engine.topic_name,
        )

        def response() -> Any:
            if answer is None:
                return None
            return decode_response(request.api_key, request.api_version, frame_bytes(answer)[4:])[1]

        self.engine.observe(
            Exchange(facts, request.correlation_id, response, started, perf_counter() - clock)
        )
