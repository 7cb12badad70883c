"""registry.Deferred through the dispatcher: a request taken now and answered later (acks=all
Produce in cluster mode) comes back as a future of the encoded response, for the connection to
write in its turn (answer_queue.py; the ordering is pinned in test_connection.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from kcompat.server.registry import HANDLERS, Deferred
from kcompat.wire.messages.api_versions import API_VERSIONS
from kcompat.wire.protocol import decode_response
from tests.server.broker_harness import HarnessFactory, flatten


def test_a_deferred_body_comes_back_as_a_future_of_the_response(
    broker_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = broker_harness()
    reg = HANDLERS[API_VERSIONS.key]

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
