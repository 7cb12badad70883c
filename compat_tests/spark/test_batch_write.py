"""Spark's batch Kafka sink (`df.write.format("kafka")`) against kcompat: key, value and headers;
the `topic` column and the `topic` option; an explicit `partition` column. Everything is read back
with librdkafka and compared byte for byte."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kafka.partitioner.default import murmur2
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from .kafka_io import consume_all, create_topics, stored_batches, unique

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
SINK_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", HEADERS),
    ]
)

Row = tuple[str | None, int | None, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]


def rows_for(topics: list[str], n: int) -> list[Row]:
    """Awkward values: null keys, an empty and a null value, every byte value, repeated header
    keys, a null header value, rows with no headers."""
    out: list[Row] = []
    for i in range(n):
        topic = topics[i % len(topics)]
        key = None if i % 4 == 0 else f"user-{i % 7}".encode()
        value = {1: b"", 2: None, 3: bytes(range(256)) * 3}.get(i, f'{{"i": {i}, "x": "\u00e9"}}'.encode())
        headers: list[tuple[str, bytes | None]] | None = {
            0: None,
            1: [("trace", b"\x00\x01\x02"), ("trace", b"again")],
            2: [("empty", b""), ("null", None)],
        }.get(i % 3)
        out.append((topic, None, key, value, headers))
    return out


def write(spark: Any, bootstrap: str, rows: list[Row], columns: list[str], **options: str) -> None:
    schema = StructType([f for f in SINK_SCHEMA.fields if f.name in columns])
    index = [SINK_SCHEMA.names.index(c) for c in schema.names]
    df = spark.createDataFrame([tuple(r[i] for i in index) for r in rows], schema)
    writer = df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def as_written(rows: list[Row]) -> Counter[tuple[Any, ...]]:
    """What a reader should find: (topic, key, value, headers); no headers reads back as none."""
    return Counter((t, k, v, tuple(h) if h else None) for t, _p, k, v, h in rows)


def as_read(bootstrap: str, topic: str, partitions: int, expect: int) -> list[Any]:
    return consume_all(bootstrap, topic, partitions, expect=expect)


def test_key_value_headers_by_topic_column(spark: Any, broker: Any) -> None:
    a, b = unique("write-a"), unique("write-b")
    create_topics(broker.bootstrap, 3, a, b)
    rows = rows_for([a, b], 60)
    write(spark, broker.bootstrap, rows, ["topic", "key", "value", "headers"])

    got = as_read(broker.bootstrap, a, 3, 30) + as_read(broker.bootstrap, b, 3, 30)
    assert Counter((r.topic, r.key, r.value, r.headers) for r in got) == as_written(rows)
    # Spark's producer is kafka-clients' default: keyed records go where murmur2 puts them (as
    # for any Java producer), and it is idempotent (a producer id on every stored batch).
    for r in got:
        if r.key is not None:
            assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % 3, r
    batches = stored_batches(broker.data_dir, a) + stored_batches(broker.data_dir, b)
    assert batches and all(batch.producer_id >= 0 for batch in batches)


def test_topic_option(spark: Any, broker: Any) -> None:
    column_topic, option_topic = unique("column"), unique("option")
    create_topics(broker.bootstrap, 1, column_topic, option_topic)
    rows = rows_for([column_topic], 10)
    # The option overrides the column (documented); and without a topic column the option is enough.
    write(spark, broker.bootstrap, rows, ["topic", "key", "value"], topic=option_topic)
    write(spark, broker.bootstrap, rows, ["key", "value"], topic=option_topic)
    got = as_read(broker.bootstrap, option_topic, 1, 20)
    assert Counter((r.key, r.value) for r in got) == Counter((k, v) for _t, _p, k, v, _h in rows * 2)
    assert consume_all(broker.bootstrap, column_topic, 1) == []


def test_explicit_partition_column(spark: Any, broker: Any) -> None:
    name = unique("partitioned")
    create_topics(broker.bootstrap, 4, name)
    rows = [
        (name, i % 4, b"same-key", f"value-{i}".encode(), [("p", str(i % 4).encode())]) for i in range(40)
    ]
    # One writer task, so each partition's records keep the DataFrame's order.
    schema = SINK_SCHEMA
    df = spark.createDataFrame(rows, schema).coalesce(1)
    df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).save()

    got = as_read(broker.bootstrap, name, 4, 40)
    for p in range(4):
        mine = [r for r in got if r.partition == p]
        assert [r.value for r in mine] == [f"value-{i}".encode() for i in range(p, 40, 4)]
        assert [r.offset for r in mine] == list(range(10))
        assert all(r.headers == (("p", str(p).encode()),) for r in mine)
