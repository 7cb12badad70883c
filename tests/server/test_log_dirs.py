"""Several log dirs through the wire: DescribeLogDirs per dir, AlterReplicaLogDirs (a move that
completes while produce goes on, Kafka's codes for bad moves) and a log dir removed under a
running broker (taken offline, the other dir serves on)."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_replica_log_dirs import ALTER_REPLICA_LOG_DIRS
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.describe_log_dirs import DESCRIBE_LOG_DIRS
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.produce import PRODUCE
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch

TICKS = itertools.count()


@pytest.fixture
def h(broker_harness: HarnessFactory, tmp_path: Path) -> BrokerHarness:
    dirs = f"{tmp_path / 'd0'},{tmp_path / 'd1'}"
    return broker_harness({"log.dirs": dirs, "num.partitions": "2", "log.roll.ms": "1"})


def create(h: BrokerHarness, name: str) -> None:
    topics = [{"name": name, "num_partitions": 2, "replication_factor": -1}]
    (r,) = h.call(CREATE_TOPICS, 7, {"topics": topics, "timeout_ms": 100, "validate_only": False}).topics
    assert r.error_code == 0


def produce(h: BrokerHarness, topic: str, partition: int, value: bytes = b"v" * 300) -> Any:
    ts = 1_700_000_000_000 + 10 * next(TICKS)  # past log.roll.ms: each append rolls, making files
    body = {
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch(value, ts=ts)}]}
        ],
    }
    return h.call(PRODUCE, 9, body).responses[0].partition_responses[0]


def describe(h: BrokerHarness) -> dict[str, Any]:
    return {r.log_dir: r for r in h.call(DESCRIBE_LOG_DIRS, 4, {"topics": None}).results}


def where(h: BrokerHarness, topic: str, partition: int) -> list[tuple[str, bool]]:
    return [
        (d, p.is_future_key)
        for d, r in describe(h).items()
        for t in r.topics
        if t.name == topic
        for p in t.partitions
        if p.partition_index == partition
    ]


def alter(h: BrokerHarness, path: str, topic: str, *partitions: int) -> dict[int, int]:
    body = {"dirs": [{"path": path, "topics": [{"name": topic, "partitions": list(partitions)}]}]}
    (t,) = h.call(ALTER_REPLICA_LOG_DIRS, 2, body).results
    return {p.partition_index: p.error_code for p in t.partitions}


def fetch_values(h: BrokerHarness, topic: str, partition: int) -> int:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 24,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 24}],
            }
        ],
    }
    p = h.call(FETCH, 11, body).responses[0].partitions[0]
    assert p.error_code == 0
    return p.high_watermark


def test_partitions_spread_and_each_dir_described(h: BrokerHarness, tmp_path: Path) -> None:
    create(h, "a")
    create(h, "b")
    dirs = describe(h)
    assert set(dirs) == {str(tmp_path / "d0"), str(tmp_path / "d1")}
    assert [sum(len(t.partitions) for t in r.topics) for r in dirs.values()] == [2, 2]
    assert all(r.error_code == 0 and r.total_bytes > 0 and r.usable_bytes > 0 for r in dirs.values())


def test_a_move_completes_while_produce_goes_on(h: BrokerHarness, tmp_path: Path) -> None:
    create(h, "t")
    for _ in range(40):
        assert produce(h, "t", 0).error_code == 0
    ((src, _),) = where(h, "t", 0)
    dest = str(tmp_path / ("d1" if src.endswith("d0") else "d0"))
    assert alter(h, dest, "t", 0) == {0: 0}
    acked = 40
    for _ in range(100):
        if where(h, "t", 0) == [(dest, False)]:
            break
        assert produce(h, "t", 0).error_code == 0
        acked += 1
        h.sleep(0.01)
    assert where(h, "t", 0) == [(dest, False)]
    assert produce(h, "t", 0).error_code == 0
    assert fetch_values(h, "t", 0) == acked + 1  # every acknowledged record, from the new dir
    assert alter(h, dest, "t", 0) == {0: 0}  # there already: nothing to do
    h.restart()
    assert where(h, "t", 0) == [(dest, False)] and fetch_values(h, "t", 0) == acked + 1


def test_bad_moves_answer_as_kafka(h: BrokerHarness, tmp_path: Path) -> None:
    create(h, "t")
    assert alter(h, str(tmp_path / "nowhere"), "t", 0) == {0: ErrorCode.LOG_DIR_NOT_FOUND}
    assert alter(h, str(tmp_path / "d0"), "nope", 0) == {0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert alter(h, str(tmp_path / "d0"), "t", 7) == {7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_a_removed_log_dir_goes_offline_and_the_other_serves(h: BrokerHarness, tmp_path: Path) -> None:
    create(h, "t")
    gone = next(d for d, _ in where(h, "t", 0))
    kept = str(tmp_path / ("d1" if gone.endswith("d0") else "d0"))
    assert where(h, "t", 1) == [(kept, False)]
    shutil.rmtree(gone)  # the disk pulled: the next segment cannot be made there
    errors = {produce(h, "t", 0).error_code for _ in range(12)}
    assert ErrorCode.KAFKA_STORAGE_ERROR in errors
    assert produce(h, "t", 0).error_code == ErrorCode.KAFKA_STORAGE_ERROR  # offline from then on
    assert produce(h, "t", 1).error_code == 0
    dirs = describe(h)
    assert dirs[gone].error_code == ErrorCode.KAFKA_STORAGE_ERROR and dirs[gone].topics == []
    assert dirs[kept].error_code == 0
    assert alter(h, gone, "t", 1) == {1: ErrorCode.KAFKA_STORAGE_ERROR}
    assert alter(h, kept, "t", 0) == {0: ErrorCode.KAFKA_STORAGE_ERROR}
    # The last dir online stays online (its writes fail meanwhile): a disk that fills up and is
    # freed again takes writes again without a restart, as on a single node.
    shutil.rmtree(kept)
    errors = {produce(h, "t", 1).error_code for _ in range(12)}
    assert ErrorCode.KAFKA_STORAGE_ERROR in errors
    assert Path(kept) not in h.broker.replicas.logs.offline_dirs and produce(h, "t", 1).error_code != 0
