"""registry.Deferred through the dispatcher: a request taken now and answered later (acks=all
Produce in cluster mode) comes back as a future of the encoded response, for the connection to
write in its turn (answer_queue.py; the ordering is pinned in test_connection.py)."""

from __future__ import annotations

import asyncio
import gc
import inspect
import warnings
from dataclasses import replace
from typing import Any

import pytest

from kcompat.server.registry import HANDLERS, Deferred, registration
from kcompat.wire.messages.api_versions import API_VERSIONS
from kcompat.wire.protocol import decode_response
from tests.server.broker_harness import HarnessFactory, flatten


def test_a_deferred_body_comes_back_as_a_future_of_the_response(
    broker_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = broker_harness()
    reg = registration(API_VERSIONS.key)
    assert reg is not None

    async def later(ctx: Any, request: Any) -> Deferred:
        async def body() -> Any:
            await gate.wait()
            return await reg.handler(ctx, request)

        return Deferred(body())

    monkeypatch.setitem(HANDLERS, API_VERSIONS.key, replace(reg, handler=later))

    async def go() -> Any:
        answer = await h.broker.handle(memoryview(h.frame(API_VERSIONS, 3, {"client_software_name": "t",
                                                                            "client_software_version": "1"}))[4:], None)  # fmt: skip
        assert isinstance(answer, asyncio.Future)
        await asyncio.sleep(0)
        assert not answer.done()  # the body waits for the gate
        gate.set()
        return flatten(await answer)

    gate = asyncio.Event()
    data = h.run(go())
    correlation, resp = decode_response(API_VERSIONS.key, 3, data[4:])
    assert correlation == h.correlation
    assert resp.error_code == 0 and any(k.api_key == API_VERSIONS.key for k in resp.api_keys)


def test_a_deferred_answer_cancelled_before_it_ran_closes_its_body_and_is_counted(
    broker_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection closed at once after a Produce was taken (AnswerQueue.cancel) cancels the
    answer's task before its first step: the body coroutine must still end (closed, no
    `coroutine ... was never awaited`) and the request be counted as cancelled (issue 26, fault 5)."""
    h = broker_harness()
    reg = registration(API_VERSIONS.key)
    assert reg is not None
    bodies: list[Any] = []

    async def later(ctx: Any, request: Any) -> Deferred:
        async def body() -> Any:
            return await reg.handler(ctx, request)

        bodies.append(body())
        return Deferred(bodies[-1])

    monkeypatch.setitem(HANDLERS, API_VERSIONS.key, replace(reg, handler=later))

    async def go() -> None:
        answer = await h.broker.handle(memoryview(h.frame(API_VERSIONS, 3, {"client_software_name": "t",
                                                                            "client_software_version": "1"}))[4:], None)  # fmt: skip
        assert isinstance(answer, asyncio.Future)
        answer.cancel()  # as the connection's AnswerQueue.cancel does when it closes
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert answer.cancelled()

    h.run(go())
    (body,) = bodies
    assert inspect.getcoroutinestate(body) == inspect.CORO_CLOSED
    del body
    bodies.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    assert h.broker.stats.requests[API_VERSIONS.key].cancelled == 1
