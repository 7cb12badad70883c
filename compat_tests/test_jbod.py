"""Several log dirs (JBOD) with Kafka 4.3.1's own tools, on one `kcompat serve` with two log dirs:
kafka-log-dirs --describe per dir, kafka-reassign-partitions moving a replica between dirs with
log_dirs (--execute, --verify until completed) while a producer writes, every acknowledged record
read back from the new dir, and a move to a dir that is not one of log.dirs refused as Kafka does."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support import kafka_tool

from compat_tests.crash.ledger import read_topic
from compat_tests.jbod_wire import placement
from kcompat.testing import Broker


@pytest.fixture(scope="module")
def jbod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, list[Path]]]:
    base = tmp_path_factory.mktemp("jbod")
    dirs = [base / "d0", base / "d1"]
    broker = Broker(
        data_dir=dirs[0],
        log_path=base / "broker.log",
        overrides={"log.dirs": ",".join(str(d) for d in dirs), "num.partitions": "2"},
    )
    broker.start()
    try:
        yield broker, dirs
    finally:
        broker.stop()


def create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def log_dirs_json(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    out = kafka_tool(
        "kafka-log-dirs", "--bootstrap-server", bootstrap, "--describe", "--topic-list", topic
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("{"))
    (broker,) = json.loads(line)["brokers"]
    return broker["logDirs"]  # type: ignore[no-any-return]


def test_log_dirs_describe_lists_each_dir(jbod: tuple[Broker, list[Path]]) -> None:
    broker, dirs = jbod
    create(broker.bootstrap, "spread", 4)
    described = log_dirs_json(broker.bootstrap, "spread")
    assert sorted(d["logDir"] for d in described) == sorted(str(d) for d in dirs)
    assert all(d["error"] is None for d in described)
    assert [len(d["partitions"]) for d in described] == [2, 2]  # the dir with the fewest, each time


def test_reassign_partitions_moves_a_replica_between_dirs_while_producing(
    jbod: tuple[Broker, list[Path]], tmp_path: Path
) -> None:
    broker, dirs = jbod
    topic = "moved"
    create(broker.bootstrap, topic)
    acked: list[tuple[int, int]] = []
    failed: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        elif msg.partition() == 0:
            acked.append((msg.offset(), int(msg.value()[:8])))

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(3000):
        producer.produce(topic, b"%08d" % i + b"x" * 1000, partition=0, on_delivery=delivered)
        producer.poll(0)
    producer.flush(30)
    ((src, _),) = [(d, f) for (p, f), d in placement(broker.bootstrap, topic).items() if p == 0]
    dest = str(next(d for d in dirs if str(d) != src))
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [dest]}],
            }
        )
    )
    stop = threading.Event()

    def keep_producing() -> None:
        i = 3000
        while not stop.is_set():
            producer.produce(topic, b"%08d" % i, partition=0, on_delivery=delivered)
            producer.poll(0.005)
            i += 1

    writer = threading.Thread(target=keep_producing)
    writer.start()
    try:
        tool = ("kafka-reassign-partitions", "--bootstrap-server", broker.bootstrap)
        executed = kafka_tool(*tool, "--execute", "--reassignment-json-file", str(plan)).stdout
        assert (
            f"Successfully started moving log directory to {dest} for replica {topic}-0 with broker 1"
            in executed
        ), executed
        deadline = time.monotonic() + 60
        while True:
            verified = kafka_tool(*tool, "--verify", "--reassignment-json-file", str(plan)).stdout
            if f"Reassignment of replica {topic}-0-1 completed successfully." in verified:
                break
            assert time.monotonic() < deadline, verified
            time.sleep(0.5)
    finally:
        stop.set()
        writer.join()
    producer.flush(30)
    assert failed == []
    assert placement(broker.bootstrap, topic) == {
        (0, False): dest,
        (1, False): placement(broker.bootstrap, topic)[(1, False)],
    }
    described = {
        d["logDir"]: [p["partition"] for p in d["partitions"]] for d in log_dirs_json(broker.bootstrap, topic)
    }
    assert f"{topic}-0" in described[dest] and f"{topic}-0" not in described[src]
    stored = read_topic(broker.bootstrap, topic, 2)[0]
    by_offset = {s.offset: int(s.value[:8]) for s in stored}
    assert len(acked) > 3000 and all(by_offset.get(o) == seq for o, seq in acked)  # nothing lost
    assert [s.offset for s in stored] == list(range(len(stored)))


def test_a_move_to_a_dir_not_in_log_dirs_is_refused(jbod: tuple[Broker, list[Path]], tmp_path: Path) -> None:
    broker, _ = jbod
    create(broker.bootstrap, "stays")
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "stays", "partition": 0, "replicas": [1], "log_dirs": [str(tmp_path)]}
                ],
            }
        )
    )
    refused = kafka_tool(
        "kafka-reassign-partitions", "--bootstrap-server", broker.bootstrap,
        "--execute", "--reassignment-json-file", str(plan), check=False,
    )  # fmt: skip
    assert refused.returncode != 0, refused.stdout
    assert "LogDirNotFoundException" in refused.stdout + refused.stderr, refused.stdout + refused.stderr
