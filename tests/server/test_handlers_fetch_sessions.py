"""Fetch with incremental sessions (KIP-227) through the broker: full, incremental, closed, errors,
long polling on a session's partitions. The session rules on their own: test_fetch_session.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.messages.produce import PRODUCE
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch
from tests.server.test_handlers_fetch import by_id, fetch_body, produce


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    harness = broker_harness({"num.partitions": "3"})
    harness.call(METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
    return harness


def parts(resp: Any) -> list[tuple[int, int, int, int]]:
    """(partition, error, high watermark, record bytes) of each partition in a response."""
    return [(p.partition_index, p.error_code, p.high_watermark, len(p.records or b"")) for t in resp.responses
            for p in t.partitions]  # fmt: skip


@pytest.mark.parametrize("version", [7, 12, 13, 18])
def test_full_then_incremental_then_close(h: BrokerHarness, version: int) -> None:
    produce(h, batch(b"a"), partition=0)

    def body(plist: list[tuple[str, int, int]], **kw: Any) -> dict[str, Any]:
        b = fetch_body(plist, **kw)
        return by_id(h, b) if version >= 13 else b

    full = h.call(FETCH, version, body([("t", 0, 0), ("t", 1, 0), ("t", 2, 0)], session_epoch=0))
    sid = full.session_id
    assert sid != 0 and full.error_code == 0
    assert [p[:3] for p in parts(full)] == [(0, 0, 1), (1, 0, 0), (2, 0, 0)]

    # The client moved partition 0 past what it read: nothing is new, an empty answer in the session.
    inc = h.call(FETCH, version, body([("t", 0, 1)], session_id=sid, session_epoch=1))
    assert (inc.error_code, inc.session_id, parts(inc)) == (0, sid, [])
    # New data in partition 2, named by no request since the full one: only it comes back.
    produce(h, batch(b"b"), partition=2)
    inc = h.call(FETCH, version, body([], session_id=sid, session_epoch=2))
    assert [p[:3] for p in parts(inc)] == [(2, 0, 1)] and parts(inc)[0][3] > 0
    # The client moves partition 2 on and forgets partition 1.
    b = body([("t", 2, 1)], session_id=sid, session_epoch=3)
    b["forgotten_topics_data"] = (
        [{"topic": "t", "partitions": [1]}]
        if version < 13
        else [{"topic_id": b["topics"][0]["topic_id"], "partitions": [1]}]
    )
    inc = h.call(FETCH, version, b)
    assert (inc.error_code, parts(inc)) == (0, [])
    session = h.broker.fetch_sessions.cache.get(sid)
    assert session is not None and [k[1] for k in session.partitions] == [0, 2]
    # A wrong epoch, then closing the session with epoch -1 (a sessionless full answer).
    bad = h.call(FETCH, version, body([], session_id=sid, session_epoch=9))
    assert (bad.error_code, bad.session_id, bad.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    closing = h.call(FETCH, version, body([("t", 0, 0)], session_id=sid, session_epoch=-1))
    assert (closing.error_code, closing.session_id, [p[:3] for p in parts(closing)]) == (0, 0, [(0, 0, 1)])
    assert h.broker.fetch_sessions.cache.get(sid) is None
    gone = h.call(FETCH, version, body([], session_id=sid, session_epoch=5))
    assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_incremental_long_poll_wakes_on_any_partition_of_the_session(h: BrokerHarness) -> None:
    full = h.call(FETCH, 12, fetch_body([("t", 0, 0), ("t", 1, 0), ("t", 2, 0)], session_epoch=0))
    sid = full.session_id

    async def scenario() -> tuple[Any, float]:
        t0 = time.monotonic()
        # The incremental request names no partition: it must still park on all three.
        fetching = asyncio.ensure_future(h.call_async(FETCH, 12, fetch_body([], session_id=sid, session_epoch=1,
                                                                            max_wait=5000)))  # fmt: skip
        await asyncio.sleep(0.05)
        assert not fetching.done() and h.broker.replicas.fetch_waiters.parked() == 1
        await h.call_async(
            PRODUCE,
            9,
            {
                "acks": 1,
                "timeout_ms": 1000,
                "topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": batch(b"wake")}]}],
            },
        )
        return await asyncio.wait_for(fetching, 2), time.monotonic() - t0

    resp, elapsed = h.run(scenario())
    assert elapsed < 1.5
    assert [(p, e, hw) for p, e, hw, _ in parts(resp)] == [(1, 0, 1)] and parts(resp)[0][3] > 0


def test_sessionless_fetches_and_a_full_cache(broker_harness: HarnessFactory) -> None:
    h = broker_harness({"num.partitions": "1", "max.incremental.fetch.session.cache.slots": "8"})
    h.call(METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
    assert h.call(FETCH, 12, fetch_body([("t", 0, 0)])).session_id == 0  # epoch -1: no session
    ids = [h.call(FETCH, 12, fetch_body([("t", 0, 0)], session_epoch=0)).session_id for _ in range(9)]
    assert (
        all(ids[:8]) and ids[8] == 0
    )  # one slot per shard: the ninth finds none, a full answer all the same
    assert len(h.broker.fetch_sessions.cache) == 8
