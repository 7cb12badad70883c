"""Streaming job: reads `clickstream.clicks` with Spark's Kafka source and runs two stateful
Structured Streaming queries, each writing its final results to a Kafka topic with Spark's Kafka sink:

  * page views per page per 1-minute event-time window (tumbling, with a 2-minute watermark)
    -> `clickstream.page-views`
  * sessions: a user's clicks grouped into session windows that close after 5 minutes without a
    click (entry and exit page, clicks, duration, converted or not) -> `clickstream.sessions`

Both run in append mode: a window or session is written once, when the watermark says no more
clicks can belong to it. Offsets and aggregation state live in the checkpoint directory, so a
stopped job resumes where it stopped, without reprocessing or losing clicks.

    python spark_examples/clickstream/stream_job.py                  # runs until Ctrl-C, a micro-batch every 5 s
    python spark_examples/clickstream/stream_job.py --available-now  # processes what is there, prints the rate, exits
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    CLICKS,
    DEFAULT_CHECKPOINTS,
    PAGE_VIEWS,
    SESSION_GAP,
    SESSIONS,
    WATERMARK_DELAY,
    WINDOW,
    add_bootstrap_arg,
    event_schema,
    spark_session,
)


def read_clicks(spark: Any, bootstrap: str, max_offsets: int | None) -> Any:
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", CLICKS)
        .option("startingOffsets", "earliest")  # first run only; afterwards the checkpoint decides
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return (
        reader.load()
        .select(F.from_json(F.col("value").cast("string"), event_schema()).alias("click"))
        .select("click.*")
        .withColumn("event_time", F.timestamp_millis("ts"))
        .withWatermark("event_time", WATERMARK_DELAY)
    )


def page_views(clicks: Any) -> Any:
    from pyspark.sql import functions as F

    counts = clicks.groupBy(F.window("event_time", WINDOW), "page").agg(
        F.count("*").alias("views"), F.approx_count_distinct("user_id").alias("visitors")
    )
    return counts.select(
        F.col("page").alias("key"),
        F.to_json(
            F.struct(
                F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("minute"),
                "page",
                "views",
                "visitors",
            )
        ).alias("value"),
    )


def sessions(clicks: Any) -> Any:
    from pyspark.sql import functions as F

    per_session = clicks.groupBy(F.session_window("event_time", SESSION_GAP), "user_id").agg(
        F.count("*").alias("clicks"),
        F.min("event_time").alias("first_click"),
        F.max("event_time").alias("last_click"),
        F.min_by("page", "event_time").alias("entry_page"),
        F.max_by("page", "event_time").alias("exit_page"),
        F.min_by("referrer", "event_time").alias("source"),
        F.first("device").alias("device"),
        F.first("country").alias("country"),
        F.max(F.col("page") == "/checkout/complete").alias("converted"),
    )
    return per_session.select(
        F.col("user_id").alias("key"),
        F.to_json(
            F.struct(
                "user_id",
                F.date_format("first_click", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("start"),
                (F.unix_millis("last_click") - F.unix_millis("first_click")).alias("duration_ms"),
                "clicks",
                "entry_page",
                "exit_page",
                "source",
                "device",
                "country",
                "converted",
            )
        ).alias("value"),
    )


def to_topic(df: Any, name: str, bootstrap: str, topic: str, checkpoints: str, available_now: bool) -> Any:
    writer = (
        df.writeStream.queryName(name)
        .format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(Path(checkpoints) / name))
        .outputMode("append")
    )
    writer = (
        writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="5 seconds")
    )
    return writer.start()


def progress_listener_class() -> Any:
    from pyspark.sql.streaming import StreamingQueryListener

    class Progress(StreamingQueryListener):  # type: ignore[misc]
        """Prints each micro-batch and counts the clicks each query has read."""

        def __init__(self, verbose: bool) -> None:
            self.verbose = verbose
            self.totals: dict[str, int] = {}

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            self.totals[p.name] = self.totals.get(p.name, 0) + p.numInputRows
            if p.numInputRows or self.verbose:
                print(
                    f"[{p.name}] batch {p.batchId}: {p.numInputRows} clicks in, "
                    f"{p.processedRowsPerSecond:.0f} clicks/s, watermark {p.eventTime.get('watermark', '-')}",
                    flush=True,
                )

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return Progress


def stop_between_batches(queries: list[Any], timeout: float = 120) -> None:
    """Let a running micro-batch finish before stopping: Spark's Kafka sink is at-least-once, and
    a batch interrupted while writing is written again, whole, by the next run."""
    for q in queries:
        deadline = time.monotonic() + timeout
        while q.isActive and q.status["isTriggerActive"] and time.monotonic() < deadline:
            time.sleep(0.2)
        q.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_bootstrap_arg(parser)
    parser.add_argument(
        "--checkpoints",
        default=DEFAULT_CHECKPOINTS,
        help=f"checkpoint directory (default {DEFAULT_CHECKPOINTS}); any Hadoop path on a cluster",
    )
    parser.add_argument(
        "--available-now", action="store_true", help="process the clicks available now, then exit"
    )
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, default=None, help="cap on clicks per micro-batch"
    )
    parser.add_argument(
        "--reset",
        action="store_true",
        help="delete the checkpoints first: start over from the earliest click",
    )
    parser.add_argument("--master", default=None, help="Spark master when run with python (default local[*])")
    args = parser.parse_args()

    if args.reset and "://" not in args.checkpoints:
        shutil.rmtree(args.checkpoints, ignore_errors=True)
    spark = spark_session("clickstream-stream", args.master)
    progress = progress_listener_class()(verbose=not args.available_now)
    spark.streams.addListener(progress)
    clicks = read_clicks(spark, args.bootstrap, args.max_offsets_per_trigger)
    began = time.monotonic()
    queries = [
        to_topic(
            page_views(clicks), "page-views", args.bootstrap, PAGE_VIEWS, args.checkpoints, args.available_now
        ),
        to_topic(
            sessions(clicks), "sessions", args.bootstrap, SESSIONS, args.checkpoints, args.available_now
        ),
    ]
    print(f"reading {CLICKS} from {args.bootstrap}; checkpoints in {args.checkpoints}", flush=True)
    try:
        while any(q.isActive for q in queries):
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("stopping after the running micro-batches (the next run resumes from the checkpoints)")
        stop_between_batches(queries)
    finally:
        for q in queries:
            q.stop()
    elapsed = time.monotonic() - began
    for q in queries:
        if q.exception() is not None:
            raise SystemExit(f"query {q.name} failed: {q.exception()}")
    clicks_in = max(progress.totals.values(), default=0)
    if args.available_now:
        print(
            f"done: {clicks_in} clicks through both queries in {elapsed:.1f}s "
            f"({clicks_in / elapsed:.0f} clicks/s end to end, Spark start-up excluded)"
        )
    else:
        print(f"stopped: {clicks_in} clicks read in {elapsed:.0f}s")
    spark.stop()


if __name__ == "__main__":
    main()
