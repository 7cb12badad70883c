"""Big Produce, Fetch and ListOffsets requests give the event loop turns (kcompat.server.network.turns):
other coroutines run while one is handled, and the answer (order, values, per-partition errors)
is the one the request gets without turns. TURN_SECONDS = 0 makes a turn due before every
partition, so these tests do not depend on the machine's speed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kcompat.server.network import turns
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.list_offsets import LIST_OFFSETS
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.schema import Api
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch

TOPICS = ("a", "b", "c")
PARTITIONS = 4


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    harness = broker_harness({"auto.create.topics.enable": "false"})
    body = {"topics": [{"name": n, "num_partitions": PARTITIONS, "replication_factor": 1} for n in TOPICS],
            "timeout_ms": 1000}  # fmt: skip
    assert all(t.error_code == 0 for t in harness.call(CREATE_TOPICS, 7, body).topics)
    harness.run(harness.broker.replicas.created())  # no request below waits for new logs (await_logs)
    return harness


def with_ticker(h: BrokerHarness, api: Api, version: int, body: Any, on_tick: Any = None) -> tuple[Any, int]:
    """(the answer, how many times another coroutine ran while the request was handled)."""
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            if on_tick is not None:
                await on_tick(ticks)
            await asyncio.sleep(0)

    async def both() -> tuple[Any, int]:
        nonlocal done
        task = asyncio.ensure_future(ticker())
        await asyncio.sleep(0)  # the ticker has begun
        before = ticks
        answer = await h.call_async(api, version, body)
        during = ticks - before
        done = True
        await task
        return answer, during

    return h.run(both())


def plain(answer: Any) -> Any:
    """The answer as nested builtins, to compare two answers (records as bytes)."""
    if isinstance(answer, list):
        return [plain(x) for x in answer]
    if hasattr(answer, "__slots__"):
        return {k: plain(getattr(answer, k)) for k in answer.__slots__}
    if isinstance(answer, memoryview):
        return bytes(answer)
    return answer


def list_offsets_body() -> dict[str, Any]:
    parts = [{"partition_index": p, "timestamp": -1} for p in range(PARTITIONS)]
    return {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "a", "partitions": parts},
        {"name": "nope", "partitions": [{"partition_index": 0, "timestamp": -1}]},
        {"name": "b", "partitions": [*parts, {"partition_index": 9, "timestamp": -2}]},
        {"name": "c", "partitions": [{"partition_index": 1, "timestamp": -1}, {"partition_index": 1, "timestamp": -2},
                                     {"partition_index": 2, "timestamp": -3}]},
    ]}  # fmt: skip


def produce_body(round_: int) -> dict[str, Any]:
    good = [{"index": p, "records": batch(f"{round_}-{p}".encode())} for p in range(PARTITIONS)]
    return {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "a", "partition_data": good},
        {"name": "nope", "partition_data": [{"index": 0, "records": batch(b"x")}]},
        {"name": "b", "partition_data": [*good, {"index": 7, "records": batch(b"x")}, {"index": 1, "records": b"junk"}]},
    ]}  # fmt: skip


def fetch_body() -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": t, "partitions": [{"partition": p, "fetch_offset": 0, "current_leader_epoch": -1,
                                                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                                                   for p in (*range(PARTITIONS), 5)]} for t in (*TOPICS, "nope")]}  # fmt: skip


def test_list_offsets_takes_turns_and_answers_the_same(
    h: BrokerHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h.call(PRODUCE, 9, produce_body(0))
    body = list_offsets_body()
    monkeypatch.setattr(turns, "TURN_SECONDS", 60.0)
    without, ran = with_ticker(h, LIST_OFFSETS, 7, body)
    assert ran <= 1  # no turn
    monkeypatch.setattr(turns, "TURN_SECONDS", 0.0)
    answer, ran = with_ticker(h, LIST_OFFSETS, 7, body)
    assert ran >= 13  # a turn before each of the 14 partitions
    assert plain(answer) == plain(without)
    codes = [[(p.partition_index, p.error_code, p.offset) for p in t.partitions] for t in answer.topics]
    assert codes == [
        [(0, 0, 1), (1, 0, 1), (2, 0, 1), (3, 0, 1)],
        [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)],
        [(0, 0, 1), (1, 0, 1), (2, 0, 1), (3, 0, 1), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)],
        [(1, ErrorCode.INVALID_REQUEST, -1), (1, ErrorCode.INVALID_REQUEST, -1), (2, 0, -1)],
    ]


def test_list_offsets_sees_a_topic_deleted_during_a_turn(
    h: BrokerHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turns, "TURN_SECONDS", 0.0)
    body = {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": "a", "partitions": [{"partition_index": p, "timestamp": -1} for p in range(PARTITIONS)]}]}  # fmt: skip

    async def delete_at(tick: int) -> None:
        if tick == 3:  # after the request's first partitions
            await h.broker.metadata.delete_topic("a")

    answer, _ = with_ticker(h, LIST_OFFSETS, 7, body, delete_at)
    codes = [p.error_code for p in answer.topics[0].partitions]
    gone = codes.index(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert gone >= 1 and codes == [0] * gone + [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * (len(codes) - gone)


def test_produce_takes_turns_and_answers_the_same(h: BrokerHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns, "TURN_SECONDS", 60.0)
    without, ran = with_ticker(h, PRODUCE, 9, produce_body(0))
    assert ran <= 1
    monkeypatch.setattr(turns, "TURN_SECONDS", 0.0)
    answer, ran = with_ticker(h, PRODUCE, 9, produce_body(1))
    assert ran >= 10  # a turn before each of the 11 partitions
    rows = [[(p.index, p.error_code, p.base_offset) for p in t.partition_responses] for t in answer.responses]
    assert rows == [[(p, e, o + 1 if o >= 0 else o) for p, e, o in t] for t in
                    ([(p.index, p.error_code, p.base_offset) for p in t.partition_responses] for t in without.responses)]  # fmt: skip
    assert rows[0] == [(p, 0, 1) for p in range(PARTITIONS)]
    assert [e for _, e, _ in rows[1] + rows[2][PARTITIONS:]] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.CORRUPT_MESSAGE]  # fmt: skip
    for p in range(PARTITIONS):  # both rounds' batches, in order, in every partition of a and b
        for t in ("a", "b"):
            plog = h.broker.replicas.partition_log(t, p)
            assert plog.log_end_offset == 2
            assert f"1-{p}".encode() in plog.read(1, 1 << 20).read_bytes()


def test_fetch_takes_turns_and_answers_the_same(h: BrokerHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    h.call(PRODUCE, 9, produce_body(0))
    monkeypatch.setattr(turns, "TURN_SECONDS", 60.0)
    without, ran = with_ticker(h, FETCH, 12, fetch_body())
    assert ran <= 1
    monkeypatch.setattr(turns, "TURN_SECONDS", 0.0)
    answer, ran = with_ticker(h, FETCH, 12, fetch_body())
    assert ran >= 19  # a turn before each of the 20 partitions
    assert plain(answer) == plain(without)
    rows = [
        [(p.partition_index, p.error_code, len(p.records or b"") > 0) for p in t.partitions]
        for t in answer.responses
    ]
    known = [(p, 0, True) for p in range(PARTITIONS)] + [(5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False)]
    empty = [(p, 0, False) for p in range(PARTITIONS)] + [(5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False)]
    unknown = [(p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False) for p in (*range(PARTITIONS), 5)]
    assert rows == [known, known, empty, unknown]
