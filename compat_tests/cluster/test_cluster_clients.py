"""Cluster mode, client matrix: kcat, aiokafka, confluent-kafka, kafka-python and the Java client
3.9 and 4.3 against three kcompat brokers under one Kafka 4.3.1 controller. Each client gets its own
topic, RF=3 with `min.insync.replicas=2`, three partitions led by three different brokers (explicit
assignments); it produces with acks=all and a consumer group of that client reads everything back:
the exact values, in order, per partition. The committed offsets are then read from the group's
coordinator, found through FindCoordinator on a broker that is not the coordinator.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Iterator

import confluent_kafka
import kafka
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from compat_tests.client_data import unique
from compat_tests.cluster.test_group_coordinator import Cluster
from compat_tests.groups_members import KAFKA_CLIENTS_39_JARS, KAFKA_JARS, Group, compile_java, java_member
from compat_tests.test_clients_java import QUIET, SOURCE, JavaClient
from kcompat.testing import Broker, wait_until
from kcompat.testing_cluster import ControllerQuorum
from kcompat.wire.messages.describe_configs import DESCRIBE_CONFIGS

pytestmark = pytest.mark.timeout(120)

BROKER_IDS = (1, 2, 3)
PARTITIONS = 3
PER_PARTITION = 15
JAR_SETS = {"3.9": KAFKA_CLIENTS_39_JARS, "4.3": KAFKA_JARS}
QUIET_KEY = {"3.9": "3.9", "4.3": "4.x"}  # test_clients_java names 4.3 "4.x"


def values(p: int) -> list[str]:
    """What each client writes to partition p: "<p>-<i>" (the form groups_members reads back)."""
    return [f"{p}-{i}" for i in range(PER_PARTITION)]


EXPECTED = {p: values(p) for p in range(PARTITIONS)}
ENDS = dict.fromkeys(range(PARTITIONS), PER_PARTITION)


@pytest.fixture(scope="module")
def cluster(kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(kraft_quorum, tmp_path_factory.mktemp("clients"))
    with c.running(BROKER_IDS):
        yield c


def create_topic(cluster: Cluster, prefix: str) -> str:
    """An RF=3, min.insync.replicas=2 topic whose partition p is led by broker p+1 (preferred leader
    first in its replica list), created through the controller; returns once every broker's
    Metadata shows those leaders."""
    topic = unique(prefix)
    ids = list(BROKER_IDS)
    placed = [ids[p:] + ids[:p] for p in range(PARTITIONS)]
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"}, assignments=placed)
    leaders = cluster.leaders(topic, PARTITIONS)
    assert leaders == {p: ids[p] for p in range(PARTITIONS)}, leaders
    for b in cluster.brokers.values():  # every leader holds acks=all to the topic's own minimum
        wait_until(
            lambda b=b: min_insync(cluster, b, topic) == "2",
            f"min.insync.replicas=2 on {b.bootstrap}",
            timeout=40,
        )
    return topic


def min_insync(cluster: Cluster, via: Broker, topic: str) -> str | None:
    r = cluster.call(via, DESCRIBE_CONFIGS.key, 4, {
        "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": ["min.insync.replicas"]}],
    })  # fmt: skip
    (res,) = r.results  # type: ignore[attr-defined]
    return (
        next((c.value for c in res.configs if c.name == "min.insync.replicas"), None)
        if res.error_code == 0
        else None
    )


def committed_offsets(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    """FindCoordinator through a broker that is not the coordinator, then OffsetFetch from it."""
    first = cluster.coordinator(group, cluster.live()[0])
    other = next(b for i, b in cluster.brokers.items() if i != first)
    coordinator = cluster.coordinator(group, other)
    assert coordinator == first, (coordinator, first)
    return cluster.committed(coordinator, group, topic, PARTITIONS)


def by_partition(records: list[tuple[int, int, str]]) -> dict[int, list[str]]:
    """(partition, offset, value) in reading order -> the values per partition, checking the offsets
    of each partition came in order with no gap and no repeat."""
    out: dict[int, list[str]] = {}
    offsets: dict[int, list[int]] = {}
    for p, o, v in records:
        out.setdefault(p, []).append(v)
        offsets.setdefault(p, []).append(o)
    assert offsets == {p: list(range(len(vs))) for p, vs in out.items()}, offsets
    return out


# --- kcat (librdkafka 2.0.2) --------------------------------------------------------------------


@pytest.mark.skipif(
    shutil.which("kcat") is None, reason="kcat is not installed: run tools/setup-test-deps.sh"
)
def test_kcat_acks_all_and_a_consumer_group(cluster: Cluster) -> None:
    topic = create_topic(cluster, "cc-kcat")
    for p in range(PARTITIONS):
        subprocess.run(["kcat", "-b", cluster.bootstrap, "-P", "-t", topic, "-p", str(p), "-X", "acks=all"],
                       input="".join(v + "\n" for v in values(p)), text=True, check=True, timeout=30,
                       capture_output=True)  # fmt: skip
    group = unique("cc-kcat-group")
    # -G: a balanced consumer group; -e: exit once every assigned partition reached its end
    # (kcat stores each message's offset; at close librdkafka 2.0.2 commits the stored offsets of
    # the partitions it unassigns, an OffsetCommit its cgrp debug log shows, auto commit on or off).
    done = subprocess.run(["kcat", "-b", cluster.bootstrap, "-G", group, "-J", "-e", "-X", "auto.offset.reset=earliest",
                           topic], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert by_partition([(m["partition"], m["offset"], m["payload"]) for m in got]) == EXPECTED
    assert committed_offsets(cluster, group, topic) == ENDS


# --- aiokafka ---------------------------------------------------------------------------------


async def aiokafka_round(
    bootstrap: str, topic: str, group: str
) -> tuple[list[tuple[int, int, str]], dict[int, int]]:
    """aiokafka: every value produced with acks=all (offsets checked), then read by a group member
    that commits; what it read and what it committed."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for p in range(PARTITIONS):
            for v in values(p):
                meta = await producer.send_and_wait(topic, value=v.encode(), partition=p)
                assert (meta.partition, meta.offset) == (p, int(v.split("-")[1]))
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest")  # fmt: skip
    await consumer.start()
    try:
        read: list[tuple[int, int, str]] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 40
        while len(read) < PARTITIONS * PER_PARTITION and loop.time() < deadline:
            for tp, msgs in (await consumer.getmany(timeout_ms=300)).items():
                read += [(tp.partition, m.offset, m.value.decode()) for m in msgs]
        await consumer.commit()
        committed = {p: await consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        await consumer.stop()
    return read, committed


def test_aiokafka_acks_all_and_a_consumer_group(cluster: Cluster) -> None:
    topic = create_topic(cluster, "cc-aiokafka")
    group = unique("cc-aiokafka-group")

    read, committed = asyncio.run(asyncio.wait_for(aiokafka_round(cluster.bootstrap, topic, group), 90))
    assert by_partition(read) == EXPECTED
    assert committed == ENDS
    assert committed_offsets(cluster, group, topic) == ENDS


# --- the Java client, 3.9 and 4.3 -------------------------------------------------------------


@pytest.mark.parametrize("version", list(JAR_SETS))
def test_java_acks_all_and_a_consumer_group(
    cluster: Cluster, version: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    topic = create_topic(cluster, f"cc-java-{version}")
    group = unique(f"cc-java-{version}-group")
    base = tmp_path_factory.mktemp(f"java-{version}")
    jars = JAR_SETS[version]
    producer = JavaClient(compile_java(base / "scenarios", jars, SOURCE), jars, base / "producer.log",
                          QUIET[QUIET_KEY[version]])  # fmt: skip
    try:
        for p in range(PARTITIONS):
            out = producer.call("produce", bootstrap=cluster.bootstrap, topic=topic, partition=p,
                                records=[{"key": None, "value": v.encode().hex()} for v in values(p)],
                                config={"acks": "all"})  # fmt: skip
            assert [(r["partition"], r["offset"]) for r in out["results"]] == [
                (p, i) for i in range(PER_PARTITION)
            ], out
    finally:
        producer.close()

    start = java_member(compile_java(base / "consumer", jars), jars, cluster.bootstrap, topic, group, {})
    members = Group(start, PARTITIONS)
    try:
        member = members.add()
        members.wait_consumed({v for vs in EXPECTED.values() for v in vs})
        member.leave()
    finally:
        members.stop()
    assert by_partition([(r["p"], r["o"], r["v"]) for r in member.records()]) == EXPECTED
    assert committed_offsets(cluster, group, topic) == ENDS


# --- confluent-kafka (librdkafka from its wheel) and kafka-python -------------------------------


def test_confluent_kafka_acks_all_and_a_consumer_group(cluster: Cluster) -> None:
    topic = create_topic(cluster, "cc-confluent")
    group = unique("cc-confluent-group")
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for p in range(PARTITIONS):
        for v in values(p):
            producer.produce(topic, value=v.encode(), partition=p)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        consumer.subscribe([topic])
        read: list[tuple[int, int, str]] = []
        deadline = time.monotonic() + 40
        while len(read) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            msg = consumer.poll(0.3)
            if msg is not None and msg.error() is None:
                read.append((msg.partition(), msg.offset(), msg.value().decode()))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert by_partition(read) == EXPECTED
    assert committed_offsets(cluster, group, topic) == ENDS


def test_kafka_python_acks_all_and_a_consumer_group(cluster: Cluster) -> None:
    topic = create_topic(cluster, "cc-kafka-python")
    group = unique("cc-kafka-python-group")
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    try:
        for p in range(PARTITIONS):
            for i, v in enumerate(values(p)):
                meta = producer.send(topic, value=v.encode(), partition=p).get(timeout=30)
                assert (meta.partition, meta.offset) == (p, i)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group,
                                   enable_auto_commit=False, auto_offset_reset="earliest")  # fmt: skip
    try:
        read: list[tuple[int, int, str]] = []
        deadline = time.monotonic() + 40
        while len(read) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=300).items():
                read += [(tp.partition, m.offset, m.value.decode()) for m in msgs]
        consumer.commit()
    finally:
        consumer.close(autocommit=False)
    assert by_partition(read) == EXPECTED
    assert committed_offsets(cluster, group, topic) == ENDS
