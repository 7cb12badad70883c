"""Spark's Kafka source and sink against a 3-broker kcompat cluster under a real Kafka 4.3.1
controller: topics RF=3 with `min.insync.replicas=2`, partition p led by broker p+1.

A batch write and a batch read round-trip exact records; a structured-streaming query (Kafka source
-> Kafka sink, with a checkpoint) copies one topic to another while input keeps arriving, and a
broker that leads a partition of both topics (not the first of the bootstrap list) is killed -9 in
the middle. The query must keep running and its output must hold every input record: Spark's Kafka
sink is at-least-once, so duplicates are allowed (and reported), loss and foreign records are not.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from compat_tests.cluster.test_replication import BROKER_IDS, Cluster
from kcompat.testing import wait_until
from kcompat.testing_cluster import ControllerQuorum

from .kafka_io import Rec, consume_all, produce, spark_rows_to_recs, unique
from .support import kafka_reader, with_millis

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PARTITIONS = 3
VICTIM = 2  # leads partition 1; the bootstrap list starts with broker 1


@pytest.fixture(scope="module")
def cluster(kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(kraft_quorum, tmp_path_factory.mktemp("spark-cluster"))
    with c.running(BROKER_IDS):
        yield c


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    """Every broker, broker 1 first; fixed at the start so it still names the killed one."""
    return ",".join(cluster.brokers[i].bootstrap for i in BROKER_IDS)


def create_topic(cluster: Cluster, prefix: str) -> str:
    """RF=3, min.insync.replicas=2, partition p's preferred (and first) leader broker p+1; created
    on the controller, returned once Metadata shows those leaders and the whole ISR."""
    topic = unique(prefix)
    ids = list(BROKER_IDS)
    placed = [ids[p:] + ids[:p] for p in range(PARTITIONS)]
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"}, assignments=placed)
    wait_until(
        lambda: all(
            leader == ids[p] and sorted(isr) == ids
            for p, (leader, _, _, isr) in cluster.partitions(topic).items()
        ),
        f"{topic}: partition p led by broker p+1, ISR whole",
        timeout=40,
    )
    return topic


def records(topic: str, count: int, start: int = 0) -> list[Rec]:
    """`count` records per partition, values "<p>-<i>" for i from `start`, keyed and timestamped."""
    t0 = 1_700_000_000_000
    return [
        Rec(topic, p, -1, f"k{p}-{i}".encode(), f"{p}-{i}".encode(), t0 + i, None)
        for p in range(PARTITIONS)
        for i in range(start, start + count)
    ]


def test_batch_write_and_read(spark: Any, cluster: Cluster, bootstrap: str) -> None:
    topic = create_topic(cluster, "spark-cluster-batch")
    sent = records(topic, 40)
    # One Spark partition per Kafka partition (records in order), written by concurrent tasks.
    rows = spark.sparkContext.parallelize([(r.key, r.value, r.partition) for r in sent], PARTITIONS)
    df = spark.createDataFrame(rows, "key binary, value binary, partition int")
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.acks", "all")
        .option("topic", topic)
        .save()
    )
    # Read back by a client other than Spark, then by Spark's batch source: the same records.
    got = consume_all(bootstrap, topic, PARTITIONS)
    assert [(r.partition, r.key, r.value) for r in got] == [(r.partition, r.key, r.value) for r in sent]
    read_rows = with_millis(
        kafka_reader(
            spark, bootstrap, subscribe=topic, startingOffsets="earliest", includeHeaders="true"
        ).load()
    ).collect()
    read = spark_rows_to_recs(read_rows)
    assert [(r.partition, r.offset, r.key, r.value) for r in read] == [
        (r.partition, r.offset, r.key, r.value) for r in got
    ]
    assert {r.partition: r.offset for r in read} == dict.fromkeys(range(PARTITIONS), 39)


def test_streaming_copy_survives_a_broker_killed(
    spark: Any, cluster: Cluster, bootstrap: str, tmp_path: Path
) -> None:
    source = create_topic(cluster, "spark-cluster-in")
    sink = create_topic(cluster, "spark-cluster-out")
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value", F.col("partition"))  # each record to the same partition of the sink
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.acks", "all")
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    sent: list[Rec] = []
    try:

        def feed(start: int, count: int) -> None:
            batch = records(source, count, start)
            produce(bootstrap, batch, acks="all", **{"enable.idempotence": True})
            sent.extend(batch)

        def copied() -> int:
            progress = query.recentProgress
            return sum(int(p["numInputRows"]) for p in progress)

        for step in range(3):  # the query is running and copying before the fault
            feed(step * 20, 20)
        wait_until(lambda: copied() >= len(sent), "the first records copied", timeout=120)

        cluster.brokers[VICTIM].kill()
        killed_at = time.monotonic()
        for step in range(3, 8):  # more input while broker 2's partitions fail over
            feed(step * 20, 20)
        wait_until(
            lambda: sorted(cluster.partitions(source)[1][3]) == [1, 3] or None,
            "partition 1's ISR without the killed broker",
            timeout=60,
        )
        wait_until(lambda: copied() >= len(sent), "every record copied after the kill", timeout=180)
        caught_up = time.monotonic() - killed_at
        assert query.isActive and query.exception() is None, query.exception()
    finally:
        query.stop()

    out = consume_all(bootstrap, sink, PARTITIONS, timeout=60)
    expected = Counter((r.partition, r.key, r.value) for r in sent)
    got = Counter((r.partition, r.key, r.value) for r in out)
    lost = expected - got
    foreign = set(got) - set(expected)
    duplicates = sum((got - expected).values())
    print(
        f"\nSpark stream over kill -9 of broker {VICTIM}: {len(sent)} in, {len(out)} out, "
        f"lost {sum(lost.values())}, duplicates {duplicates}, caught up {caught_up:.1f}s after the kill"
    )
    assert not lost, f"{sum(lost.values())} records lost, e.g. {sorted(lost)[:5]}"
    assert not foreign, f"records never sent: {sorted(foreign)[:5]}"
    # At-least-once: a duplicate is a re-sent record, so per partition the first copies keep order.
    for p in range(PARTITIONS):
        firsts = list(dict.fromkeys(r.value for r in out if r.partition == p))
        assert firsts == [r.value for r in sent if r.partition == p], f"partition {p} out of order"
