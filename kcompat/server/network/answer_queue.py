"""Produce pipelining: a connection's answers still to come, in request order.

Kafka mutes a connection from a request until its answer is sent, so an acks=all Produce of a
pipelining producer (max.in.flight > 1) is only read once the one before it has been replicated:
each request ahead adds a whole replication round trip to the latency of the next. kcompat takes
the next Produce while an earlier one waits for the ISR (a Deferred answer, registry.py), so the
records of several in-flight requests are replicated together. Only a Produce goes ahead of the
answers still to come, at most MAX_DEFERRED of them; any other request waits until every earlier
answer is out, as on Kafka, and answers always go out in request order.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from kcompat.server.network.sendfile import Chunk

Answer = Sequence[Chunk] | None
PRODUCE_KEY = b"\0\0"  # a request frame starts with its int16 API key
MAX_DEFERRED = 5  # answers awaited at once (the Java producer's max.in.flight.requests default)


class AnswerQueue:
    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: deque[asyncio.Future[Answer]] = deque()

    def __bool__(self) -> bool:
        return bool(self._items)

    def push(self, answer: Answer | asyncio.Future[Answer]) -> None:
        """Queue an answer behind those to come (an answer given at once waits its turn too)."""
        if not isinstance(answer, asyncio.Future):
            done: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
            done.set_result(answer)
            answer = done
        self._items.append(answer)

    def admits(self, frame: bytes | bytearray) -> bool:
        """May `frame` be handled before the answers to come are out?"""
        return len(self._items) < MAX_DEFERRED and frame[:2] == PRODUCE_KEY

    async def turn(
        self,
        requests: deque[bytes | bytearray],
        send: Callable[[Answer], Awaitable[None]],
        idle: Callable[[asyncio.Future[Answer]], Awaitable[None]],
    ) -> bool:
        """The connection's next step with answers to come: send the first once ready, or True when
        the next request may be handled now; else wait for the first answer (`idle`: or a request).
        A failed answer raises what its handler raised."""
        head = self._items[0]
        if head.done():
            self._items.popleft()
            await send(head.result())
        elif requests and self.admits(requests[0]):
            return True
        elif requests:  # a request that waits for every earlier answer
            await asyncio.wait([head])
        else:
            await idle(head)
        return False

    def cancel(self) -> None:
        """The connection closed: answers still to come are dropped (their handlers stop waiting)."""
        for answer in self._items:
            if not answer.cancel() and not answer.cancelled():
                answer.exception()  # retrieved, so that asyncio does not report it: nobody is left to answer
        self._items.clear()
