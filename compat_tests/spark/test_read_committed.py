"""Spark's Kafka source with `kafka.isolation.level=read_committed` against kcompat, over a topic of
committed and aborted transactions (written with confluent-kafka), non-transactional records, an
aborted transaction at the end of the log and one still open: a batch read and a streaming read
(availableNow, failOnDataLoss left at its default, true) return exactly the committed records. The
offsets that markers and aborted records occupy are gaps Spark must skip without calling them data
loss, and "latest" is the last stable offset, so the open transaction's records stay out."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from .kafka_io import create_topics, unique
from .support import kafka_reader

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PARTITIONS = 2


def transaction(producer: Producer, topic: str, values: list[str], *, commit: bool) -> None:
    producer.begin_transaction()
    for i, v in enumerate(values):
        producer.produce(topic, value=v.encode(), partition=i % PARTITIONS)
    producer.flush(20)  # in the log before the abort: librdkafka's abort drops what is still queued
    if commit:
        producer.commit_transaction(20)
    else:
        producer.abort_transaction(20)


@pytest.fixture(scope="module")
def txn_topic(broker: Any) -> Iterator[tuple[str, list[str]]]:
    """The topic, and its committed values in (partition, offset) order. An open transaction stays
    at the end of each partition while the module's tests run."""
    bs = broker.bootstrap
    topic = unique("txn")
    create_topics(bs, PARTITIONS, topic)
    tx = Producer({"bootstrap.servers": bs, "transactional.id": unique("spark-tx")})
    tx.init_transactions(20)
    plain = Producer({"bootstrap.servers": bs})
    transaction(tx, topic, [f"a{i}" for i in range(6)], commit=True)
    transaction(tx, topic, [f"b{i}" for i in range(6)], commit=False)
    for p in range(PARTITIONS):
        plain.produce(topic, value=b"n%d" % p, partition=p)
    assert plain.flush(20) == 0
    transaction(tx, topic, [f"c{i}" for i in range(4)], commit=True)
    transaction(tx, topic, [f"d{i}" for i in range(4)], commit=False)  # the committed data ends in a gap
    # Record i of a transaction went to partition i % PARTITIONS.
    expected = [
        v
        for p in range(PARTITIONS)
        for v in [f"a{i}" for i in range(p, 6, PARTITIONS)]
        + [f"n{p}"]
        + [f"c{i}" for i in range(p, 4, PARTITIONS)]
    ]
    opener = Producer(
        {"bootstrap.servers": bs, "transactional.id": unique("spark-open"), "transaction.timeout.ms": 600000}
    )
    opener.init_transactions(20)
    opener.begin_transaction()
    for p in range(PARTITIONS):
        opener.produce(topic, value=b"open%d" % p, partition=p)
    opener.flush(20)
    yield topic, expected
    opener.abort_transaction(20)


def in_partition_order(rows: list[Any]) -> list[str]:
    return [bytes(r.value).decode() for r in sorted(rows, key=lambda r: (r.partition, r.offset))]


def test_batch_read_committed_skips_aborted_and_open(spark: Any, broker: Any, txn_topic: Any) -> None:
    topic, expected = txn_topic
    committed = kafka_reader(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest",
                             endingOffsets="latest", **{"kafka.isolation.level": "read_committed"}).load()  # fmt: skip
    rows = committed.select("partition", "offset", "value").collect()
    assert in_partition_order(rows) == expected
    # The same read uncommitted: the aborted and the open records are there, only hidden above.
    everything = kafka_reader(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest",
                              endingOffsets="latest").load().select("partition", "offset", "value").collect()  # fmt: skip
    seen = set(in_partition_order(everything))
    assert {"b0", "d0", "open0", "open1"} <= seen and set(expected) <= seen
    # Offsets: each partition's committed records sit among marker and aborted offsets (gaps).
    offsets = sorted((r.partition, r.offset) for r in rows)
    assert any(b[1] - a[1] > 1 for a, b in itertools.pairwise(offsets) if a[0] == b[0])


def test_streaming_read_committed_available_now(spark: Any, broker: Any, txn_topic: Any) -> None:
    topic, expected = txn_topic
    name = unique("rc").replace("-", "_")
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .option("maxOffsetsPerTrigger", "8")  # several micro-batches, some ending inside a gap
        .load()
    )
    query = source.select("partition", "offset", "value").writeStream.format("memory").queryName(name)
    running = query.trigger(availableNow=True).start()
    try:
        assert running.awaitTermination(120), "availableNow query still running after 120 s"
        assert running.exception() is None
        batches = [p["numInputRows"] for p in running.recentProgress]
    finally:
        running.stop()
    rows = spark.sql(f"select * from {name}").collect()
    assert in_partition_order(rows) == expected
    assert len([n for n in batches if n]) > 1, batches
