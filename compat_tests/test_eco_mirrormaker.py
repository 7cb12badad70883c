"""MirrorMaker 2 (Apache Kafka 4.3.1's connect-mirror-maker, dedicated mode) from an Apache Kafka
4.3.1 broker (single KRaft node, combined mode) into `kcompat serve`.

On the source: a two-partition topic with topic configs set, keyed records in it, and a consumer
group that read part of it and committed. MirrorMaker 2 runs with its internal topics (offsets,
configs, status, heartbeats, checkpoints) on kcompat and must, on kcompat:
- create `src.<topic>` with the source's partitions and copy its records, partition by partition
  in order, and copy its topic configs (kcompat accepts every config Kafka describes);
- emit checkpoints into `src.checkpoints.internal`;
- sync the group's offsets (`sync.group.offsets.enabled`): the group's committed offsets on the
  source appear on kcompat translated. MirrorMaker translates conservatively, from the last offset
  sync at or before the commit (one every `offset.lag.max` records), so a commit mid-partition
  lands at or before its source offset, never past it (a record skipped); a commit at the end of
  a partition translates exactly (the last record's sync goes out at the worker's offset commit).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from eco_support import (
    JavaProcess,
    connect_classpath,
    module_broker,
    read_committed,
    wait_for,
    write_properties,
)

from benchmarks.brokers import KafkaBroker
from kcompat.testing import Broker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "mm-data"
MIRRORED = f"src.{TOPIC}"  # DefaultReplicationPolicy: <source alias>.<topic>
GROUP = "mm-group"
PARTITIONS = 2
RECORDS = 400  # 200 a partition
CONSUMED = {0: 150, 1: 200}  # the group's committed offsets on the source
TOPIC_CONFIGS = {"retention.ms": "7200000", "max.message.bytes": "2000000", "segment.ms": "3600000"}
MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"


class _Kafka(KafkaBroker):
    def command(self, properties: Path) -> list[str]:
        # A small heap: the source holds a few hundred records, and the machine runs other JVMs.
        return self._java(["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC"], "kafka.Kafka", str(properties))


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Kafka]:
    why = KafkaBroker.available()
    if why is not None:
        pytest.fail(why, pytrace=False)
    broker = _Kafka(tmp_path_factory.mktemp("eco-mm-kafka"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def kcompat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    yield from module_broker(tmp_path_factory.mktemp("eco-mm-kcompat"))


def mm2_properties(path: Path, source: str, target: str) -> Path:
    every_second = {
        "refresh.topics.interval.seconds": 1,
        "refresh.groups.interval.seconds": 1,
        "sync.topic.configs.interval.seconds": 1,
        "emit.checkpoints.interval.seconds": 1,
        "sync.group.offsets.interval.seconds": 1,
        "emit.heartbeats.interval.seconds": 1,
    }
    return write_properties(
        path,
        {
            "clusters": "src, dst",
            "src.bootstrap.servers": source,
            "dst.bootstrap.servers": target,
            "src->dst.enabled": "true",
            "src->dst.topics": TOPIC,
            "src->dst.groups": GROUP,
            "dst->src.enabled": "false",
            "sync.topic.configs.enabled": "true",
            "emit.checkpoints.enabled": "true",
            "sync.group.offsets.enabled": "true",
            **every_second,
            # A herder's worker properties are its target cluster's (`<alias>.`): delayed offset
            # syncs go out at each offset commit of the worker (60 s by default) ...
            "dst.offset.flush.interval.ms": 1000,
            "src.offset.flush.interval.ms": 1000,
            "replication.factor": 1,
            "checkpoints.topic.replication.factor": 1,
            "heartbeats.topic.replication.factor": 1,
            "offset-syncs.topic.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "config.storage.replication.factor": 1,
            "tasks.max": 1,
            # ... and every plugin has a ServiceLoader manifest: no ~8 s scan of the classpath each.
            "plugin.discovery": "service_load",
            "dst.plugin.discovery": "service_load",
            "src.plugin.discovery": "service_load",
        },
    )


def seed_source(bootstrap: str) -> list[list[tuple[bytes, bytes]]]:
    """The topic with configs and records, and the group's commits; returns each partition's records."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=TOPIC_CONFIGS)])[TOPIC].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    records: list[list[tuple[bytes, bytes]]] = [[] for _ in range(PARTITIONS)]
    for i in range(RECORDS):
        p = i % PARTITIONS
        key, value = f"k{i:04d}".encode(), f"v{i:04d}-{'m' * (i % 37)}".encode()
        producer.produce(TOPIC, value, key, partition=p)
        records[p].append((key, value))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in CONSUMED.items()], asynchronous=False)
    consumer.close()
    return records


def committed(bootstrap: str, topic: str) -> dict[int, int]:
    """GROUP's committed offsets on `topic` (partitions with none left out)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


def test_mirror_maker_2_into_kcompat(kafka: _Kafka, kcompat: Broker, tmp_path: Path) -> None:
    started = time.monotonic()
    records = seed_source(kafka.bootstrap)
    assert committed(kafka.bootstrap, TOPIC) == CONSUMED
    props = mm2_properties(tmp_path / "mm2.properties", kafka.bootstrap, kcompat.bootstrap)
    mm2 = JavaProcess(MAIN, [str(props)], tmp_path / "mm2.log", connect_classpath())
    mm2.start()
    try:
        # The records, partition by partition in order.
        got = read_committed(kcompat.bootstrap, MIRRORED, PARTITIONS, RECORDS, timeout=90)
        by_partition: list[list[tuple[bytes, bytes]]] = [[] for _ in range(PARTITIONS)]
        for p, key, value in got:
            by_partition[p].append((key, value))
        for p in range(PARTITIONS):
            assert by_partition[p] == records[p], (
                f"{MIRRORED}[{p}]: {len(by_partition[p])} records\n{mm2.tail()}"
            )
        copied_at = time.monotonic() - started
        print(f"\neco-mm2: records copied after {copied_at:.1f}s")

        # The topic configs.
        admin = AdminClient({"bootstrap.servers": kcompat.bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, MIRRORED)

        def configs_copied() -> bool:
            entries = admin.describe_configs([resource])[resource].result(timeout=10)
            return all(entries[k].value == v for k, v in TOPIC_CONFIGS.items())

        wait_for(f"{MIRRORED}'s configs {TOPIC_CONFIGS}", configs_copied, 60, mm2.tail)
        assert "Unknown topic config" not in mm2.tail(100000)

        # Checkpoints, and the group's offsets synced.
        checkpoints = "src.checkpoints.internal"
        wait_for(
            f"a checkpoint in {checkpoints}",
            lambda: (
                checkpoints in admin.list_topics(timeout=10).topics
                and read_committed(kcompat.bootstrap, checkpoints, 1, 1, timeout=2)
            ),
            60,
            mm2.tail,
        )
        synced_at = time.monotonic() - started

        def translated() -> bool:
            got = committed(kcompat.bootstrap, MIRRORED)
            return got.get(1) == CONSUMED[1] and 0 < got.get(0, -1) <= CONSUMED[0]

        wait_for(
            f"{GROUP}'s offsets {CONSUMED} synced onto {MIRRORED}",
            translated,
            60,
            lambda: f"kcompat has {committed(kcompat.bootstrap, MIRRORED)}\n{mm2.tail()}",
        )
        print(
            f"\neco-mm2: {RECORDS} records copied {copied_at:.1f}s after start, configs and checkpoints by "
            f"{synced_at:.1f}s; group offsets {CONSUMED} synced as {committed(kcompat.bootstrap, MIRRORED)}; "
            f"{time.monotonic() - started:.1f}s"
        )
    finally:
        mm2.stop()
