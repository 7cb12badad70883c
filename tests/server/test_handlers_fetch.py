"""Fetch: every partition answered once, offset ranges, byte limits, every version 4-18, topic ids,
replica fetches and leader hints, long polling (on the broker clock). Sessions: test_handlers_fetch_sessions.py."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from kcompat.log.log_file import FetchSlice
from kcompat.testing import wait_until_async
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.protocol import encode_request
from kcompat.wire.record_batch import split_batches
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    harness = broker_harness({"num.partitions": "3"})
    harness.call(METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
    return harness


def produce(h: BrokerHarness, records: bytes, partition: int = 0, topic: str = "t") -> int:
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }
    r = h.call(PRODUCE, 9, body).responses[0].partition_responses[0]
    assert r.error_code == 0
    return r.base_offset


def fetch_body(parts: list[tuple[str, int, int]], *, max_wait: int = 0, min_bytes: int = 1, max_bytes: int = 1 << 30,
               partition_max: int = 1 << 20, **extra: Any) -> dict[str, Any]:  # fmt: skip
    topics: list[dict[str, Any]] = []
    for topic, p, offset in parts:
        if not topics or topics[-1]["topic"] != topic:
            topics.append({"topic": topic, "partitions": []})
        topics[-1]["partitions"].append(
            {"partition": p, "fetch_offset": offset, "partition_max_bytes": partition_max}
        )
    return {
        "max_wait_ms": max_wait,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "topics": topics,
        **extra,
    }


def topic_id(h: BrokerHarness, name: str) -> uuid.UUID:
    return h.call(METADATA, 12, {"topics": [{"name": name}]}).topics[0].topic_id


def by_id(h: BrokerHarness, body: dict[str, Any]) -> dict[str, Any]:
    """A fetch_body for v13+: topics named by id."""
    for t in body["topics"]:
        t["topic_id"] = topic_id(h, t.pop("topic"))
    return body


def flat(resp: Any) -> list[tuple[str, Any]]:
    return [(t.topic, p) for t in resp.responses for p in t.partitions]


def test_every_requested_partition_once_in_order(h: BrokerHarness) -> None:
    produce(h, batch(b"a"), partition=1)
    resp = h.call(FETCH, 12, fetch_body([("t", 2, 0), ("t", 1, 0), ("nope", 0, 0), ("t", 0, 0), ("t", 1, 0)]))
    got = [(topic, p.partition_index, p.error_code) for topic, p in flat(resp)]
    assert got == [("t", 2, 0), ("t", 1, 0), ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("t", 0, 0)]
    assert resp.session_id == 0 and resp.error_code == 0
    by_partition = {p.partition_index: p for topic, p in flat(resp) if topic == "t"}
    assert len(by_partition[1].records) > 0 and len(by_partition[0].records) == 0
    for p in by_partition.values():
        assert p.preferred_read_replica == -1 and p.aborted_transactions == []
        assert p.last_stable_offset == p.high_watermark


def test_offset_out_of_range_and_fetch_at_the_end(h: BrokerHarness) -> None:
    produce(h, batch(b"a", b"b"))
    resp = h.call(FETCH, 11, fetch_body([("t", 0, 2)]))
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.log_start_offset, len(p.records)) == (0, 2, 0, 0)
    resp = h.call(FETCH, 11, fetch_body([("t", 0, 3)]))
    assert resp.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert resp.responses[0].partitions[0].high_watermark == 2
    resp = h.call(FETCH, 11, fetch_body([("t", 0, -1)]))
    assert resp.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_records_are_file_slices_for_sendfile(h: BrokerHarness) -> None:
    produce(h, batch(b"a"))
    frame = encode_request(1, 12, 9, fetch_body([("t", 0, 0)]))
    chunks = h.raw(frame)
    assert chunks is not None and any(isinstance(c, FetchSlice) for c in chunks)


def test_byte_limits_return_whole_batches_and_at_least_one(h: BrokerHarness) -> None:
    for i in range(5):
        produce(h, batch(b"x" * 1000, b"%d" % i))
    size = len(batch(b"x" * 1000, b"0"))
    one = h.call(FETCH, 12, fetch_body([("t", 0, 0)], partition_max=10)).responses[0].partitions[0]
    assert len(one.records) == size  # the first batch even though it is larger than the limit
    two = h.call(FETCH, 12, fetch_body([("t", 0, 0)], partition_max=2 * size + 10)).responses[0].partitions[0]
    assert [s for _, s in split_batches(bytes(two.records))] == [size, size]
    capped = h.call(FETCH, 12, fetch_body([("t", 0, 0)], max_bytes=size + 1))
    assert len(capped.responses[0].partitions[0].records) == size
    # A second partition gets nothing once the response's max_bytes is used up.
    produce(h, batch(b"y" * 1000), partition=1)
    resp = h.call(FETCH, 12, fetch_body([("t", 0, 0), ("t", 1, 0)], max_bytes=size + 1))
    parts = [p for _, p in flat(resp)]
    assert len(parts[0].records) == size and len(parts[1].records) == 0


def test_mid_batch_offset_returns_the_batch_holding_it(h: BrokerHarness) -> None:
    produce(h, batch(b"a", b"b", b"c"))
    p = h.call(FETCH, 12, fetch_body([("t", 0, 1)])).responses[0].partitions[0]
    assert int.from_bytes(bytes(p.records)[:8], "big") == 0


def test_leader_epoch_fencing(h: BrokerHarness) -> None:
    body = fetch_body([("t", 0, 0)])
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = 5
    assert h.call(FETCH, 12, body).responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = 0
    assert h.call(FETCH, 12, body).responses[0].partitions[0].error_code == 0


def test_long_poll_times_out_empty(h: BrokerHarness) -> None:
    t0 = time.monotonic()
    resp = h.call(FETCH, 12, fetch_body([("t", 0, 0)], max_wait=200))
    waited = time.monotonic() - t0
    assert 0.18 <= waited < 2
    assert len(resp.responses[0].partitions[0].records) == 0


def test_long_poll_is_woken_by_an_append(h: BrokerHarness) -> None:
    async def scenario() -> tuple[Any, float]:
        t0 = time.monotonic()
        fetching = asyncio.ensure_future(
            h.call_async(FETCH, 12, fetch_body([("t", 0, 0), ("t", 2, 0)], max_wait=5000))
        )
        await wait_until_async(lambda: h.broker.replicas.fetch_waiters.parked() == 1)
        assert not fetching.done()
        await h.call_async(
            PRODUCE,
            9,
            {
                "acks": 1,
                "timeout_ms": 1000,
                "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": batch(b"wake")}]}],
            },
        )
        resp = await asyncio.wait_for(fetching, 2)
        return resp, time.monotonic() - t0

    resp, elapsed = h.run(scenario())
    assert elapsed < 1.5
    parts = [p for _, p in flat(resp)]
    assert len(parts[0].records) == 0 and len(parts[1].records) > 0
    assert h.broker.replicas.fetch_waiters.parked() == 0


def test_long_poll_waits_for_min_bytes(h: BrokerHarness) -> None:
    async def scenario() -> Any:
        fetching = asyncio.ensure_future(
            h.call_async(FETCH, 12, fetch_body([("t", 0, 0)], max_wait=5000, min_bytes=300))
        )
        for i in range(3):
            await wait_until_async(lambda: h.broker.replicas.fetch_waiters.parked() == 1)
            assert not fetching.done()
            await h.call_async(
                PRODUCE,
                9,
                {
                    "acks": 1,
                    "timeout_ms": 1000,
                    "topic_data": [
                        {
                            "name": "t",
                            "partition_data": [{"index": 0, "records": batch(b"v" * 60, b"%d" % i)}],
                        }
                    ],
                },
            )
        return await asyncio.wait_for(fetching, 2)

    resp = h.run(scenario())
    assert len(resp.responses[0].partitions[0].records) >= 300


def test_close_releases_parked_fetches(h: BrokerHarness) -> None:
    produce(h, batch(b"a"))

    async def scenario() -> Any:
        fetching = asyncio.ensure_future(h.call_async(FETCH, 12, fetch_body([("t", 0, 1)], max_wait=10000)))
        await wait_until_async(lambda: h.broker.replicas.fetch_waiters.parked() == 1)
        t0 = time.monotonic()
        await h.broker.close()
        resp = await asyncio.wait_for(fetching, 2)
        return resp, time.monotonic() - t0

    resp, elapsed = h.run(scenario())
    assert elapsed < 2
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, len(p.records)) == (0, 1, 0)


@pytest.mark.parametrize("version", range(4, 19))
def test_every_advertised_version_round_trips(h: BrokerHarness, version: int) -> None:
    produce(h, batch(b"a"))
    body = fetch_body([("t", 0, 0)])
    if version >= 13:
        body = by_id(h, body)
    resp = h.call(FETCH, version, body)
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0 and p.high_watermark == 1 and len(p.records) > 0
    if version >= 13:
        assert resp.responses[0].topic_id == topic_id(h, "t")


def test_topic_ids_unknown_id_and_known_id_bad_partition(h: BrokerHarness) -> None:
    produce(h, batch(b"a"))
    tid = topic_id(h, "t")
    unknown = uuid.uuid4()
    body = {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic_id": tid,
                "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20},
                    {"partition": 7, "fetch_offset": 0, "partition_max_bytes": 1 << 20},
                ],
            },
            {
                "topic_id": unknown,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            },
        ],
    }
    resp = h.call(FETCH, 18, body)
    got = [(t.topic_id, p.partition_index, p.error_code) for t in resp.responses for p in t.partitions]
    assert got == [
        (tid, 0, 0),
        (tid, 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (unknown, 0, ErrorCode.UNKNOWN_TOPIC_ID),
    ]
    assert len(resp.responses[0].partitions[0].records) > 0


# A replica fetch (replica_id >= 0) on a single node: no replica is known, as Kafka answers it.
@pytest.mark.parametrize(("version", "leader_epoch", "error"), [
    (12, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (12, 0, ErrorCode.UNKNOWN_LEADER_EPOCH),
    (15, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (16, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (18, 0, ErrorCode.UNKNOWN_LEADER_EPOCH),
])  # fmt: skip
def test_replica_fetch_is_refused_per_partition(
    h: BrokerHarness, version: int, leader_epoch: int, error: int
) -> None:
    produce(h, batch(b"a"))
    body = fetch_body([("t", 0, 0)])
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = leader_epoch
    if version >= 15:
        body["replica_state"] = {"replica_id": 2, "replica_epoch": 5}
    else:
        body["replica_id"] = 2
    if version >= 13:
        body = by_id(h, body)
    resp = h.call(FETCH, version, body)
    p = resp.responses[0].partitions[0]
    assert (p.error_code, len(p.records)) == (error, 0)
    hinted = version >= 16 and error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == ((1, 0) if hinted else (-1, -1))
    assert [(n.node_id, n.host, n.port) for n in resp.node_endpoints] == (
        [(1, "127.0.0.1", 19092)] if hinted else []
    )


@pytest.mark.parametrize("version", [15, 16])
def test_fenced_leader_epoch_carries_the_leader_from_v16(h: BrokerHarness, version: int) -> None:
    body = by_id(h, fetch_body([("t", 0, 0)]))
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = 0
    h.broker.metadata.topics.get("t").leader_epoch = 3  # type: ignore[union-attr]  # as after a leader change
    resp = h.call(FETCH, version, body)
    p = resp.responses[0].partitions[0]
    assert p.error_code == ErrorCode.FENCED_LEADER_EPOCH
    if version >= 16:
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 3)
        assert [(n.node_id, n.port) for n in resp.node_endpoints] == [(1, 19092)]
    else:
        assert (p.current_leader.leader_id, resp.node_endpoints) == (-1, [])


def test_long_poll_deadline_follows_the_broker_clock(broker_harness: HarnessFactory) -> None:
    ticks = iter(range(0, 10**6, 60))  # every reading of the clock is a minute later

    harness = broker_harness({"num.partitions": "1"}, clock=lambda: float(next(ticks)))
    harness.call(METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
    t0 = time.monotonic()
    resp = harness.call(FETCH, 12, fetch_body([("t", 0, 0)], max_wait=30_000))
    assert time.monotonic() - t0 < 5  # the 30 s wait was over by the broker's clock
    assert resp.responses[0].partitions[0].error_code == 0
