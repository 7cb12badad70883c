"""A request that touches new partitions before their logs are made (CreateTopics answers first)
makes them in a worker thread and waits for them (ReplicaManager.await_logs), while the event loop
serves everybody else; past its timeout it answers NOT_LEADER_OR_FOLLOWER (retriable), a log that
cannot be made answers KAFKA_STORAGE_ERROR, and a topic deleted meanwhile leaves no directory.
In cluster mode the logs a new image assigns here are made in a worker thread before it is applied."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kcompat.config import BrokerConfig
from kcompat.log.config import LogConfig
from kcompat.metadata import records as r
from kcompat.metadata.loader import MetadataLoader
from kcompat.server.cluster.kraft_metadata import KRaftMetadata
from kcompat.server.cluster.replication.partition import Partition
from kcompat.server.cluster.replication.replica_delta import ReplicaDeltaApplier
from kcompat.server.cluster.replication.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from kcompat.server.replica_manager import ReplicaManager
from kcompat.testing import wait_until_async
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.delete_topics import DELETE_TOPICS
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.list_offsets import LIST_OFFSETS
from kcompat.wire.messages.produce import PRODUCE
from tests.metadata.test_metadata_loader import D1, T1, partition, register, topic
from tests.metadata.test_metadata_loader import batch as metadata_batch
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch


@pytest.fixture
def h(broker_harness: HarnessFactory) -> Iterator[BrokerHarness]:
    return broker_harness()


@pytest.fixture
def held(h: BrokerHarness) -> Iterator[None]:
    """The background creation held back (its maintenance lock taken): only requests make logs."""
    lock = h.broker.replicas.maintenance_lock
    h.run(lock.acquire())
    yield
    lock.release()


def create(h: BrokerHarness, name: str, partitions: int) -> None:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": -1, "configs": []}
    r = h.call(CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 100, "validate_only": False}).topics
    assert r[0].error_code == 0


def made(h: BrokerHarness, name: str) -> set[int]:
    logs = h.broker.replicas.logs
    assert logs is not None
    return {p for t, p in logs.partitions() if t == name}


def list_offsets(name: str, partitions: range, version: int = 7, timeout_ms: int = 30_000) -> dict[str, Any]:
    body: dict[str, Any] = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": name, "partitions": [
        {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in partitions]}]}  # fmt: skip
    if version >= 10:
        body["timeout_ms"] = timeout_ms
    return body


def produce(name: str, partitions: range, timeout_ms: int = 30_000) -> dict[str, Any]:
    return {"transactional_id": None, "acks": 1, "timeout_ms": timeout_ms, "topic_data": [
        {"name": name, "partition_data": [{"index": p, "records": batch(b"v")} for p in partitions]}]}  # fmt: skip


def fetch(name: str, partitions: range, max_wait_ms: int = 0) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": name, "partitions": [
                {"partition": p, "fetch_offset": 0, "current_leader_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20} for p in partitions]}],
            "forgotten_topics_data": [], "rack_id": ""}  # fmt: skip


def codes(answer: Any) -> list[int]:
    return [p.error_code for t in answer.topics for p in t.partitions]


@pytest.mark.usefixtures("held")
def test_the_loop_runs_while_a_request_waits_for_its_new_logs(h: BrokerHarness) -> None:
    create(h, "a", 200)
    assert made(h, "a") == set()

    async def scenario() -> tuple[list[int], Any]:
        request = asyncio.ensure_future(h.call_async(LIST_OFFSETS, 7, list_offsets("a", range(200))))
        seen = []  # logs made at each turn the loop took while the request was pending
        while not request.done():
            seen.append(len(made(h, "a")))
            await asyncio.sleep(0)
        return seen, request.result()

    seen, answer = h.run(scenario())
    # Made on the loop, the request would finish in the loop's first turn with all 200 made.
    assert any(n < 200 for n in seen[1:]), seen[:5]
    assert codes(answer) == [0] * 200
    assert [p.offset for p in answer.topics[0].partitions] == [0] * 200
    assert made(h, "a") == set(range(200))


@pytest.mark.usefixtures("held")
def test_produce_and_fetch_wait_for_their_new_logs_and_answer_in_full(h: BrokerHarness) -> None:
    create(h, "b", 30)
    r = h.call(PRODUCE, 9, produce("b", range(0, 30, 2)))
    assert [(p.index, p.error_code, p.base_offset) for p in r.responses[0].partition_responses] == [
        (p, 0, 0) for p in range(0, 30, 2)
    ]
    r = h.call(FETCH, 12, fetch("b", range(30)))
    parts = r.responses[0].partitions
    assert [p.error_code for p in parts] == [0] * 30
    assert [p.high_watermark for p in parts] == [1 - p % 2 for p in range(30)]
    assert made(h, "b") == set(range(30))


@pytest.mark.usefixtures("held")
def test_past_the_timeout_the_partitions_answer_not_leader_then_their_logs(h: BrokerHarness) -> None:
    create(h, "c", 8)
    making = h.broker.replicas._make_lock
    making.acquire()  # the worker thread cannot make any log until released
    try:
        r = h.call(LIST_OFFSETS, 10, list_offsets("c", range(8), version=10, timeout_ms=50))
        assert codes(r) == [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 8
        r = h.call(PRODUCE, 9, produce("c", range(2), timeout_ms=50))
        assert [p.error_code for p in r.responses[0].partition_responses] == [
            ErrorCode.NOT_LEADER_OR_FOLLOWER
        ] * 2
        assert made(h, "c") == set()
    finally:
        making.release()
    h.run(wait_until_async(lambda: made(h, "c") == set(range(8))))
    assert codes(h.call(LIST_OFFSETS, 10, list_offsets("c", range(8), version=10))) == [0] * 8


@pytest.mark.usefixtures("held")
def test_a_log_that_cannot_be_made_answers_storage_error_and_is_tried_again(h: BrokerHarness) -> None:
    create(h, "d", 4)
    blocker = Path(h.props["log.dirs"]) / "d-2"
    blocker.write_text("not a directory")  # mkdir of the partition's directory fails
    r = h.call(LIST_OFFSETS, 7, list_offsets("d", range(4)))
    assert codes(r) == [0, 0, ErrorCode.KAFKA_STORAGE_ERROR, 0]
    r = h.call(FETCH, 12, fetch("d", range(4)))  # tried again, in the worker thread: refused again
    assert [p.error_code for p in r.responses[0].partitions] == [0, 0, ErrorCode.KAFKA_STORAGE_ERROR, 0]
    blocker.unlink()
    r = h.call(PRODUCE, 9, produce("d", range(2, 3)))
    assert r.responses[0].partition_responses[0].error_code == 0
    assert made(h, "d") == set(range(4))


def test_a_topic_deleted_while_its_logs_are_made_for_a_request_leaves_none(h: BrokerHarness) -> None:
    held = h.broker.replicas.maintenance_lock
    h.run(held.acquire())
    create(h, "e", 20)
    making = h.broker.replicas._make_lock
    making.acquire()

    async def scenario() -> tuple[Any, Any]:
        request = asyncio.ensure_future(h.call_async(LIST_OFFSETS, 7, list_offsets("e", range(20))))
        await wait_until_async(lambda: h.broker.replicas._making)  # its worker thread is waiting for the lock
        held.release()
        deletion = asyncio.ensure_future(
            h.call_async(DELETE_TOPICS, 5, {"topic_names": ["e"], "timeout_ms": 100})
        )
        await wait_until_async(lambda: h.broker.metadata.topic("e") is None)
        making.release()
        return await request, await deletion

    answer, deleted = h.run(scenario())
    assert deleted.responses[0].error_code == 0
    assert codes(answer) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 20
    assert made(h, "e") == set()
    assert not [d for d in Path(h.props["log.dirs"]).iterdir() if d.name.startswith("e-")]


def test_requests_cost_no_wait_once_every_log_is_made(h: BrokerHarness) -> None:
    create(h, "f", 5)
    h.run(h.broker.replicas.created())
    assert h.broker.replicas._pending == 0

    async def answered_in_one_turn() -> bool:
        request = asyncio.ensure_future(h.call_async(LIST_OFFSETS, 7, list_offsets("f", range(5))))
        await asyncio.sleep(0)
        return request.done()

    assert h.run(answered_in_one_turn())


def test_cluster_mode_makes_the_logs_an_image_assigns_before_applying_it(tmp_path: Path) -> None:
    """A KRaft image that makes this broker host new partitions: their logs are made in a worker
    thread (new_logs + make_logs, awaited before apply), with the topic's config; apply makes none."""
    md = KRaftMetadata(BrokerConfig({"node.id": "1", "process.roles": "broker"}))
    loader = MetadataLoader()
    loader.append(metadata_batch(0, register(1, 10), (r.UNFENCE_BROKER, 0, {"id": 1, "epoch": 10}), topic("t", T1),
                                 *(partition(T1, p, [1], 1, [D1]) for p in range(40)),
                                 (r.CONFIG, 0, {"resource_type": 2, "resource_name": "t", "name": "segment.bytes",
                                                "value": "1048576"})))  # fmt: skip
    image = loader.advance(50)
    assert image is not None
    hosted: dict[tuple[str, int], Partition] = {}
    replicas = ReplicaManager(topic=md.topic, log_config=md.log_config, cluster_mode=True, hosted=hosted)
    fetchers = ReplicaFetcherManager(FetcherSettings(1, "c", uuid.uuid4()), broker_epoch=lambda: 10,
                                     topic_id=lambda name: None, now_ms=lambda: 0, on_append=lambda p: None)  # fmt: skip
    applier = ReplicaDeltaApplier(1, md, replicas, hosted, fetchers, "PLAINTEXT", lambda: 0)

    async def scenario() -> tuple[list[tuple[str, int]], list[tuple[str, int]], list[int]]:
        await replicas.start([tmp_path / "data"], LogConfig(), cluster_id="c", node_id=1, topic_configs={},
                             clock=lambda: 0, topics=[])  # fmt: skip
        assert replicas.logs is not None
        wanted = applier.new_logs(image)
        await replicas.make_logs(wanted)
        made = replicas.logs.partitions()
        sizes = [replicas.logs.get("t", p).config.segment_bytes for p in range(40)]  # type: ignore[union-attr]
        applier.apply(image)
        assert applier.new_logs(image) == []  # hosted now: nothing more to make
        after = replicas.logs.partitions()
        await replicas.close()
        return made, after, sizes

    made, after, sizes = asyncio.run(scenario())
    assert made == after == [("t", p) for p in range(40)]
    assert sizes == [1048576] * 40  # the topic's config from the image, not the broker default
    assert [replicas.partitions[("t", p)].is_leader for p in range(40)] == [True] * 40
