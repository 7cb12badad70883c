"""Spark's batch Kafka source (`spark.read.format("kafka")`) against kcompat: subscribe,
subscribePattern and assign; starting/ending offsets as earliest, latest and per-partition JSON, and
by timestamp; every column including headers; minPartitions; data produced by librdkafka and
kafka-python with every codec, compared byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .kafka_io import (
    Rec,
    consume_all,
    create_topics,
    produce,
    produce_kafka_python,
    spark_rows_to_recs,
    stored_batches,
    unique,
)
from .support import kafka_reader, with_millis

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PARTITIONS = 3
PER_PARTITION = 5
BASE_TS = 1_700_000_000_000

KAFKA_SOURCE_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
    ]
)


def ts(partition: int, i: int) -> int:
    """Record i of a partition: one second apart, partitions a millisecond apart."""
    return BASE_TS + i * 1000 + partition


def record(topic: str, partition: int, i: int) -> Rec:
    """The awkward cases spread over the partitions: null key, null and empty values, binary
    bytes, no headers, repeated header keys, a null header value."""
    key: bytes | None = None if i == 1 else f"k{partition}-{i}".encode()
    value: bytes | None = {2: b"", 3: bytes(range(256)) + b"\x00\xff"}.get(i, f"v{partition}-{i}".encode())
    if partition == 2 and i == 4:
        value = None
    headers: tuple[tuple[str, bytes | None], ...] | None = {
        0: (("h1", b"a"), ("h2", b"\x00\x01")),
        1: None,
        2: (("dup", b"1"), ("dup", b"2")),
        3: (("nullvalue", None),),
    }.get(i, (("p", str(partition).encode()),))
    return Rec(topic, partition, i, key, value, ts(partition, i), headers)


@pytest.fixture(scope="module")
def topic(broker: Any) -> tuple[str, list[Rec]]:
    """A 3-partition topic with 5 records in each, offsets 0..4 (written by librdkafka)."""
    name = unique("read")
    create_topics(broker.bootstrap, PARTITIONS, name)
    records = [record(name, p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    produce(broker.bootstrap, records)
    return name, records


def read_recs(spark: Any, bootstrap: str, **options: Any) -> list[Rec]:
    df = kafka_reader(spark, bootstrap, includeHeaders="true", **options).load()
    return spark_rows_to_recs(with_millis(df).collect())


def offsets_json(topic: str, by_partition: dict[int, int]) -> str:
    return json.dumps({topic: {str(p): o for p, o in by_partition.items()}})


def test_subscribe_reads_every_column(spark: Any, broker: Any, topic: tuple[str, list[Rec]]) -> None:
    name, records = topic
    df = kafka_reader(spark, broker.bootstrap, subscribe=name, includeHeaders="true").load()
    assert df.schema == KAFKA_SOURCE_SCHEMA
    rows = with_millis(df).collect()
    assert {row.timestampType for row in rows} == {0}  # CreateTime
    assert spark_rows_to_recs(rows) == records
    # Without includeHeaders the source has no headers column at all.
    plain = kafka_reader(spark, broker.bootstrap, subscribe=name).load()
    assert plain.columns == [f.name for f in KAFKA_SOURCE_SCHEMA.fields if f.name != "headers"]
    assert plain.count() == len(records)


def test_log_append_time_topic(spark: Any, broker: Any) -> None:
    name = unique("logappend")
    create_topics(broker.bootstrap, 1, name, config={"message.timestamp.type": "LogAppendTime"})
    produce(broker.bootstrap, [Rec(name, 0, 0, b"k", b"v", BASE_TS, None)])
    (row,) = with_millis(kafka_reader(spark, broker.bootstrap, subscribe=name).load()).collect()
    assert row.timestampType == 1  # LogAppendTime: the broker's clock, not the producer's
    assert row.timestamp_ms > BASE_TS
    (theirs,) = consume_all(broker.bootstrap, name, 1)
    assert theirs.timestamp == row.timestamp_ms


def test_subscribe_pattern(spark: Any, broker: Any) -> None:
    prefix = unique("pat")
    a, b, other = f"{prefix}.a", f"{prefix}.b", unique("notpat")
    create_topics(broker.bootstrap, 2, a, b, other)
    produce(
        broker.bootstrap,
        [Rec(t, p, 0, None, f"{t}/{p}".encode(), BASE_TS, None) for t in (a, b, other) for p in (0, 1)],
    )
    df = kafka_reader(spark, broker.bootstrap, subscribePattern=f"{prefix}\\..*").load()
    got = sorted((r.topic, r.partition, bytes(r.value)) for r in df.collect())
    assert got == [(t, p, f"{t}/{p}".encode()) for t in (a, b) for p in (0, 1)]


def test_subscribe_list_and_assign(spark: Any, broker: Any, topic: tuple[str, list[Rec]]) -> None:
    name, records = topic
    other = unique("assign")
    create_topics(broker.bootstrap, 2, other)
    produce(broker.bootstrap, [Rec(other, 1, 0, None, b"other-1", BASE_TS, None)])
    both = read_recs(spark, broker.bootstrap, subscribe=f"{name},{other}")
    assert [r for r in both if r.topic == name] == records
    assert [(r.partition, r.value) for r in both if r.topic == other] == [(1, b"other-1")]

    assigned = read_recs(spark, broker.bootstrap, assign=json.dumps({name: [0, 2], other: [0]}))
    assert assigned == [r for r in records if r.partition in (0, 2)]


def test_starting_and_ending_offsets(spark: Any, broker: Any, topic: tuple[str, list[Rec]]) -> None:
    name, records = topic
    assert (
        read_recs(spark, broker.bootstrap, subscribe=name, startingOffsets="earliest", endingOffsets="latest")
        == records
    )

    # Per partition: -2 is earliest and -1 latest; the ending offset is exclusive.
    start = offsets_json(name, {0: 1, 1: -2, 2: 4})
    end = offsets_json(name, {0: 3, 1: -1, 2: 5})
    got = read_recs(spark, broker.bootstrap, subscribe=name, startingOffsets=start, endingOffsets=end)
    want = {0: range(1, 3), 1: range(5), 2: range(4, 5)}
    assert got == [r for r in records if r.offset in want[r.partition]]


def test_latest_moves_with_the_log(spark: Any, broker: Any) -> None:
    name = unique("latest")
    create_topics(broker.bootstrap, 1, name)
    first = [Rec(name, 0, i, None, f"first-{i}".encode(), BASE_TS + i, None) for i in range(2)]
    produce(broker.bootstrap, first)
    assert read_recs(spark, broker.bootstrap, subscribe=name, endingOffsets="latest") == first
    later = [Rec(name, 0, 2, b"late", b"late-value", BASE_TS + 2, None)]
    produce(broker.bootstrap, later)
    got = read_recs(
        spark,
        broker.bootstrap,
        subscribe=name,
        startingOffsets=offsets_json(name, {0: 2}),
        endingOffsets="latest",
    )
    assert got == later


def test_offsets_by_timestamp(spark: Any, broker: Any) -> None:
    name = unique("bytime")
    create_topics(broker.bootstrap, PARTITIONS, name)
    records = [record(name, p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    produce(broker.bootstrap, records)

    # The first offset whose timestamp is >= the given one; ending offsets by timestamp are exclusive.
    starting = json.dumps({name: {"0": ts(0, 2), "1": ts(1, 0) - 5000, "2": ts(2, 3) - 1}})
    ending = json.dumps({name: {"0": ts(0, 4), "1": ts(1, 1) + 1, "2": ts(2, 4) + 10_000}})
    got = read_recs(
        spark,
        broker.bootstrap,
        subscribe=name,
        startingOffsetsByTimestamp=starting,
        endingOffsetsByTimestamp=ending,
    )
    want = {0: range(2, 4), 1: range(2), 2: range(3, 5)}
    assert got == [r for r in records if r.offset in want[r.partition]]

    # One timestamp for every partition.
    got = read_recs(spark, broker.bootstrap, subscribe=name, startingTimestamp=str(ts(2, 3)))
    first = {0: 4, 1: 4, 2: 3}
    assert got == [r for r in records if r.offset >= first[r.partition]]

    # Past the last record ListOffsets answers offset -1: Spark fails by default ...
    late = json.dumps({name: {str(p): ts(2, 9) for p in range(PARTITIONS)}})
    with pytest.raises(PySparkException) as excinfo:
        read_recs(spark, broker.bootstrap, subscribe=name, startingOffsetsByTimestamp=late)
    assert "timestamp" in str(excinfo.value).lower()
    # ... and with startingOffsetsByTimestampStrategy=latest starts at the end: nothing to read.
    got = read_recs(
        spark,
        broker.bootstrap,
        subscribe=name,
        startingOffsetsByTimestamp=late,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert got == []


def test_min_partitions(spark: Any, broker: Any, topic: tuple[str, list[Rec]]) -> None:
    name, records = topic
    df = kafka_reader(
        spark, broker.bootstrap, subscribe=name, includeHeaders="true", minPartitions="6"
    ).load()
    assert df.rdd.getNumPartitions() == 6  # each 5-record partition cut in two
    assert spark_rows_to_recs(with_millis(df).collect()) == records
    # Each Spark partition reads one slice of one Kafka partition: the slices do not overlap.
    per_task = (
        with_millis(df)
        .withColumn("task", F.spark_partition_id())
        .groupBy("task")
        .agg(F.countDistinct("partition").alias("kafka_partitions"), F.count("*").alias("n"))
    )
    tasks = per_task.collect()
    assert all(t.kafka_partitions == 1 for t in tasks)
    assert sum(t.n for t in tasks) == len(records)


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def test_every_codec_byte_exact(spark: Any, broker: Any) -> None:
    """Partition 0 written by librdkafka, partition 1 by kafka-python, with each codec; values large
    and repetitive enough that every codec really compresses."""
    prefix = unique("codec")
    topics = {codec: f"{prefix}-{codec}" for codec in CODECS}
    create_topics(broker.bootstrap, 2, *topics.values())
    expected: list[Rec] = []
    for codec, name in topics.items():
        recs = [
            Rec(
                name,
                p,
                i,
                f"key-{i}".encode() if i % 3 else None,
                (f"{codec} value {i} ".encode() * 50) + bytes(range(i, 256)),
                BASE_TS + i,
                (("codec", codec.encode()), ("i", str(i).encode())),
            )
            for p in (0, 1)
            for i in range(20)
        ]
        produce(broker.bootstrap, [r for r in recs if r.partition == 0], compression=codec)
        produce_kafka_python(
            broker.bootstrap,
            [r for r in recs if r.partition == 1],
            compression=None if codec == "none" else codec,
        )
        expected += recs
    got = read_recs(spark, broker.bootstrap, subscribePattern=f"{prefix}-.*")
    for codec, name in topics.items():
        mine = [r for r in got if r.topic == name]
        assert mine == sorted(
            (r for r in expected if r.topic == name), key=lambda r: (r.partition, r.offset)
        ), codec
    # The clients really compressed: the broker stored each topic's batches with its codec.
    stored = {
        codec: {b.compression for b in stored_batches(broker.data_dir, name)}
        for codec, name in topics.items()
    }
    assert stored == {codec: {CODEC_IDS[codec]} for codec in CODECS}
