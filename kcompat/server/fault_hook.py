"""The broker's side of fault injection: the dispatcher asks this before a handler runs and
before its answer goes out, and it does what the rule engine (kcompat/faults, pure) decided.

    FaultHook(engine, node_id, topic_name).around(request, client, serve)

`serve()` is the dispatcher's own path (handler, encode); with no rule set the dispatcher never
calls here (one attribute read per request). A fault that closes the connection raises
CloseConnection, as a request Kafka would not answer does; a never-answered request is a future
that is never done (the connection drops it when it closes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kcompat.faults import FaultEngine, RequestFacts, Verdict, corrupt, duplicate, error_response
from kcompat.faults.facts import TopicName
from kcompat.faults.rules import AFTER
from kcompat.wire.protocol import Chunk, Request, encode_response

log = logging.getLogger("kcompat.server.faults")

Answer = list[Chunk] | asyncio.Future[list[Chunk] | None] | None
_PRODUCE = 0


class FaultHook:
    __slots__ = ("close_error", "engine", "node_id", "topic_name")

    def __init__(
        self,
        engine: FaultEngine,
        node_id: int,
        close_error: type[Exception],
        topic_name: TopicName | None = None,
    ) -> None:
        self.engine = engine
        self.node_id = node_id
        self.close_error = close_error
        self.topic_name = topic_name

    async def around(
        self, request: Request[Any], client: Any, serve: Callable[[], Awaitable[Answer]]
    ) -> Answer:
        facts = RequestFacts(
            request.api_key,
            request.api_version,
            request.client_id,
            principal=getattr(client, "principal", "User:ANONYMOUS"),
            peer=getattr(client, "host", ""),
            broker=self.node_id,
            body=request.body,
            topic_name=self.topic_name,
        )
        verdict = self.engine.decide(facts)
        if verdict is None:
            return await serve()
        action = verdict.action
        kind = action.kind
        if action.when != AFTER:
            if kind == "error":
                if request.api_key == _PRODUCE and getattr(request.body, "acks", -1) == 0:
                    raise self.close_error(f"fault rule {verdict.rule_id}: error on an acks=0 Produce")
                text = f"injected by kcompat fault rule {verdict.rule_id}"
                body = error_response(request.api_key, request.api_version, request.body, action.error, text)
                return encode_response(request.api_key, request.api_version, request.correlation_id, body)
            if kind == "delay":
                await asyncio.sleep(action.delay_ms / 1000)
                return await serve()
            if kind == "drop":
                raise self.close_error(f"fault rule {verdict.rule_id}: drop")
            return _never()  # blackhole, partition
        answer = await serve()
        if isinstance(answer, asyncio.Future):
            return asyncio.ensure_future(self._after_deferred(verdict, answer))
        return await self._after(verdict, answer)

    async def _after_deferred(self, verdict: Verdict, pending: asyncio.Future[list[Chunk] | None]) -> Any:
        answer = await pending
        after = await self._after(verdict, answer)
        return await after if isinstance(after, asyncio.Future) else after

    async def _after(self, verdict: Verdict, answer: list[Chunk] | None) -> Answer:
        kind = verdict.action.kind
        if kind == "drop":
            raise self.close_error(f"fault rule {verdict.rule_id}: drop after the request was served")
        if kind == "blackhole":
            return _never()
        if answer is None:  # acks=0: nothing to delay, throttle, duplicate or corrupt
            return None
        if kind == "delay":
            await asyncio.sleep(verdict.action.delay_ms / 1000)
        elif kind == "throttle":
            size = sum(len(c) for c in answer)
            delay = self.engine.throttle_delay(verdict.rule_id, size, asyncio.get_running_loop().time())
            await asyncio.sleep(delay)
        elif kind == "duplicate":
            return duplicate(answer)
        elif kind == "corrupt":
            return corrupt(answer)
        return answer


def _never() -> asyncio.Future[list[Chunk] | None]:
    return asyncio.get_running_loop().create_future()
