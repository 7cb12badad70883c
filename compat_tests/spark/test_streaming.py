"""Spark Structured Streaming against kcompat: Kafka source → windowed aggregation with a watermark →
Kafka sink with a checkpoint, stopped and restarted without gap or duplicate; trigger(availableNow);
maxOffsetsPerTrigger; startingOffsets latest; failOnDataLoss after DeleteRecords removed data."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from .kafka_io import Rec, consume_all, create_topics, delete_records_before, produce, unique

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

EVENT_SCHEMA = StructType(
    [StructField("user", StringType()), StructField("page", StringType()), StructField("ts", LongType())]
)
T0 = 1_700_000_000_000  # event time origin (ms), a multiple of 10 s
WINDOW_S = 10
DELAY_S = 10


def stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def to_kafka(df: Any, bootstrap: str, topic: str, checkpoint: str) -> Any:
    return (
        df.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
    )


def run_available_now(writer: Any, timeout: float = 120) -> Any:
    query = writer.trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(timeout), f"availableNow query still running after {timeout}s"
    finally:
        query.stop()
    return query


# --- windowed counts with a watermark, across a restart -------------------------------------------


def event(topic: str, partition: int, second: int, page: str, user: str) -> Rec:
    value = json.dumps({"user": user, "page": page, "ts": T0 + second * 1000}).encode()
    return Rec(topic, partition, -1, user.encode(), value, T0 + second * 1000, None)


def windowed_counts(spark: Any, bootstrap: str, source: str) -> Any:
    """Page views per page per 10 s event-time window; a window is final (and written, once) when
    the watermark, max event time - 10 s, passes its end."""
    events = (
        stream(spark, bootstrap, source)
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.page", F.timestamp_millis("e.ts").alias("event_time"))
    )
    counts = (
        events.withWatermark("event_time", f"{DELAY_S} seconds")
        .groupBy(F.window("event_time", f"{WINDOW_S} seconds"), "page")
        .count()
    )
    return counts.select(
        F.col("page").cast("binary").alias("key"),
        F.to_json(
            F.struct(
                F.unix_millis("window.start").alias("start"),
                F.unix_millis("window.end").alias("end"),
                "page",
                "count",
            )
        ).alias("value"),
    )


def expected_windows(events: list[Rec], watermark_ms: int) -> Counter[tuple[int, int, str, int]]:
    per: Counter[tuple[int, str]] = Counter()
    for e in events:
        body = json.loads(e.value or b"")
        per[(body["ts"] - (body["ts"] - T0) % (WINDOW_S * 1000), body["page"])] += 1
    return Counter(
        (start, start + WINDOW_S * 1000, page, n)
        for (start, page), n in per.items()
        if start + WINDOW_S * 1000 <= watermark_ms
    )


def output_windows(
    bootstrap: str, topic: str, expect: int | None = None
) -> Counter[tuple[int, int, str, int]]:
    got = consume_all(bootstrap, topic, 1, expect=expect, timeout=90)
    return Counter(
        (b["start"], b["end"], b["page"], b["count"]) for b in (json.loads(r.value or b"") for r in got)
    )


def stop_when_idle(query: Any, checkpoint: str, timeout: float = 60) -> None:
    """Stop between micro-batches, once every planned batch is committed. The Kafka sink is
    at-least-once: stopping a query while a batch is writing aborts that batch, and the restart
    writes it again (Spark's documented behaviour, whatever the broker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        offsets = {p.name for p in Path(checkpoint, "offsets").glob("[0-9]*")}
        commits = {p.name for p in Path(checkpoint, "commits").glob("[0-9]*")}
        if offsets and offsets == commits and not query.status["isTriggerActive"]:
            break
        time.sleep(0.1)
    query.stop()
    assert query.exception() is None


def run_until(writer: Any, bootstrap: str, topic: str, want: Counter[Any], checkpoint: str) -> None:
    """Run the query with a 0.5 s trigger until the output topic holds `want` windows (so the no-data
    batch that moves the watermark has run), then stop it between batches."""
    query = writer.outputMode("append").trigger(processingTime="500 milliseconds").start()
    try:
        output_windows(bootstrap, topic, expect=sum(want.values()))
    except BaseException:
        query.stop()
        raise
    stop_when_idle(query, checkpoint)


def test_windowed_counts_restart_no_gap_no_duplicate(spark: Any, broker: Any, checkpoint: str) -> None:
    source, sink = unique("clicks"), unique("page-counts")
    create_topics(broker.bootstrap, 3, source)
    create_topics(broker.bootstrap, 1, sink)
    pages = ["/", "/cart", "/item"]
    # Seconds since T0; each partition's events in event-time order.
    first_seconds = [1, 2, 4, 7, 9, 11, 12, 15, 18, 21, 24, 35]
    first = [event(source, i % 3, s, pages[i % 3], f"u{i % 5}") for i, s in enumerate(first_seconds)]
    produce(broker.bootstrap, first)
    query = to_kafka(windowed_counts(spark, broker.bootstrap, source), broker.bootstrap, sink, checkpoint)

    # Watermark 35 - 10 = 25 s: windows [0,10) and [10,20) are final; [20,30) stays in state.
    want_first = expected_windows(first, T0 + 25_000)
    run_until(query, broker.bootstrap, sink, want_first, checkpoint)
    assert output_windows(broker.bootstrap, sink) == want_first

    # After the restart [20,30) gets more events: its count must include both runs' events, so the
    # aggregation state came back from the checkpoint, and the input offsets resume exactly.
    second_seconds = [26, 28, 31, 33, 38, 41, 44, 47, 65]
    second = [event(source, i % 3, s, pages[(i + 1) % 3], f"u{i % 4}") for i, s in enumerate(second_seconds)]
    produce(broker.bootstrap, second)
    want_all = expected_windows(first + second, T0 + 55_000)  # watermark 65 - 10
    query = to_kafka(windowed_counts(spark, broker.bootstrap, source), broker.bootstrap, sink, checkpoint)
    run_until(query, broker.bootstrap, sink, want_all, checkpoint)
    got = output_windows(broker.bootstrap, sink)
    assert got == want_all, f"missing {want_all - got}, unexpected {got - want_all}"
    assert max(got.values()) == 1  # every window written once
    # "/cart" in [20,30): one event before the restart (24 s), one after (26 s).
    assert got[(T0 + 20_000, T0 + 30_000, "/cart", 2)] == 1


# --- availableNow, maxOffsetsPerTrigger, startingOffsets latest -----------------------------------


def passthrough(spark: Any, bootstrap: str, source: str, **options: str) -> Any:
    """key, value and the source position as a header, to check exactly-once delivery to the sink."""
    src = stream(spark, bootstrap, source, **options)
    position = F.concat_ws(":", F.col("partition").cast("string"), F.col("offset").cast("string"))
    return src.select(
        "key",
        "value",
        F.array(F.struct(F.lit("src").alias("key"), position.cast("binary").alias("value"))).alias("headers"),
    )


def positions(bootstrap: str, topic: str) -> list[str]:
    return [dict(r.headers or ())["src"].decode() for r in consume_all(bootstrap, topic, 1)]


def test_available_now_with_max_offsets_per_trigger(spark: Any, broker: Any, checkpoint: str) -> None:
    source, sink = unique("bulk"), unique("bulk-copy")
    create_topics(broker.bootstrap, 3, source)
    create_topics(broker.bootstrap, 1, sink)
    produce(
        broker.bootstrap,
        [Rec(source, p, -1, None, f"{p}-{i}".encode(), T0 + i, None) for p in range(3) for i in range(10)],
    )

    query = run_available_now(
        to_kafka(
            passthrough(spark, broker.bootstrap, source, maxOffsetsPerTrigger="7"),
            broker.bootstrap,
            sink,
            checkpoint,
        )
    )
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 30 and max(sizes) <= 7 and len(sizes) >= 5, sizes
    assert sorted(positions(broker.bootstrap, sink)) == sorted(
        f"{p}:{i}" for p in range(3) for i in range(10)
    )

    # Run again from the checkpoint: only the new records, nothing twice.
    produce(broker.bootstrap, [Rec(source, p, -1, None, f"{p}-10".encode(), T0 + 10, None) for p in range(3)])
    run_available_now(
        to_kafka(
            passthrough(spark, broker.bootstrap, source, maxOffsetsPerTrigger="7"),
            broker.bootstrap,
            sink,
            checkpoint,
        )
    )
    assert sorted(positions(broker.bootstrap, sink)) == sorted(
        f"{p}:{i}" for p in range(3) for i in range(11)
    )


def test_starting_offsets_latest(spark: Any, broker: Any, checkpoint: str) -> None:
    source, sink = unique("fromlatest"), unique("fromlatest-copy")
    create_topics(broker.bootstrap, 2, source)
    create_topics(broker.bootstrap, 1, sink)
    produce(broker.bootstrap, [Rec(source, p, -1, None, b"old", T0, None) for p in range(2)])
    # The first run fixes its start at the end of the log: the old records are never read.
    run_available_now(
        to_kafka(
            passthrough(spark, broker.bootstrap, source, startingOffsets="latest"),
            broker.bootstrap,
            sink,
            checkpoint,
        )
    )
    assert positions(broker.bootstrap, sink) == []
    produce(broker.bootstrap, [Rec(source, p, -1, None, b"new", T0, None) for p in range(2)])
    run_available_now(
        to_kafka(
            passthrough(spark, broker.bootstrap, source, startingOffsets="latest"),
            broker.bootstrap,
            sink,
            checkpoint,
        )
    )
    assert sorted(positions(broker.bootstrap, sink)) == ["0:1", "1:1"]


# --- failOnDataLoss --------------------------------------------------------------------------------


def test_fail_on_data_loss_after_delete_records(spark: Any, broker: Any, checkpoint: str) -> None:
    source, sink = unique("lossy"), unique("lossy-copy")
    create_topics(broker.bootstrap, 1, source)
    create_topics(broker.bootstrap, 1, sink)
    produce(broker.bootstrap, [Rec(source, 0, -1, None, f"v{i}".encode(), T0 + i, None) for i in range(10)])

    def copy(fail_on_data_loss: str) -> Any:
        df = passthrough(spark, broker.bootstrap, source, failOnDataLoss=fail_on_data_loss)
        return to_kafka(df, broker.bootstrap, sink, checkpoint)

    run_available_now(copy("true"))
    assert positions(broker.bootstrap, sink) == [f"0:{i}" for i in range(10)]

    # Offsets 10..19 arrive, then 10..14 are deleted before the query runs again.
    produce(
        broker.bootstrap, [Rec(source, 0, -1, None, f"v{i}".encode(), T0 + i, None) for i in range(10, 20)]
    )
    assert delete_records_before(broker.bootstrap, source, 0, 15) == 15

    # failOnDataLoss=true (the default): the query stops with an error naming the lost offsets.
    with pytest.raises(PySparkException) as excinfo:
        run_available_now(copy("true"))
    assert "failOnDataLoss" in str(excinfo.value), str(excinfo.value)[:2000]
    assert positions(broker.bootstrap, sink) == [f"0:{i}" for i in range(10)]

    # failOnDataLoss=false: it goes on from the earliest offset still there.
    run_available_now(copy("false"))
    assert positions(broker.bootstrap, sink) == [f"0:{i}" for i in (*range(10), *range(15, 20))]

    # The batch source does the same with a starting offset below the log start.
    def batch(fail_on_data_loss: str) -> list[bytes]:
        df = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", json.dumps({source: {"0": 12}}))
            .option("failOnDataLoss", fail_on_data_loss)
            .load()
        )
        return [bytes(r.value) for r in df.orderBy("offset").collect()]

    # (Spark raises the connector's own exception here, which PySpark does not translate.)
    with pytest.raises((PySparkException, Py4JJavaError)) as excinfo:
        batch("true")
    assert "failOnDataLoss" in str(excinfo.value) and "[12, 20)" in str(excinfo.value), str(excinfo.value)[
        :2000
    ]
    assert batch("false") == [f"v{i}".encode() for i in range(15, 20)]


def test_streaming_progress_reports_kafka_offsets(spark: Any, broker: Any, checkpoint: str) -> None:
    """The source's offsets in the query progress are Kafka's (what monitoring reads)."""
    source, sink = unique("progress"), unique("progress-copy")
    create_topics(broker.bootstrap, 2, source)
    create_topics(broker.bootstrap, 1, sink)
    produce(
        broker.bootstrap, [Rec(source, p, -1, None, b"x", T0, None) for p in range(2) for _ in range(3 + p)]
    )
    start = time.monotonic()
    query = run_available_now(
        to_kafka(passthrough(spark, broker.bootstrap, source), broker.bootstrap, sink, checkpoint)
    )
    assert time.monotonic() - start < 60
    last = [p for p in query.recentProgress if p["numInputRows"]][-1]
    (src,) = last["sources"]
    assert json.loads(src["endOffset"]) == {source: {"0": 3, "1": 4}}
    assert json.loads(src["latestOffset"]) == {source: {"0": 3, "1": 4}}
