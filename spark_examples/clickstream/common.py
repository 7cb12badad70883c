"""What the three clickstream programs share: topic names, the event schema, and a SparkSession
that can read and write format("kafka") both on this machine and on a cluster.

Run locally with plain `python`, the session is local[*] with the Kafka connector jars that
`tools/setup-test-deps.sh` put in .deps/spark/ (no network needed). Run through `spark-submit`,
nothing is overridden: the master and the connector come from spark-submit's own --master and
--packages/--jars.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

# Event topic and the two result topics of the streaming job.
CLICKS = "clickstream.clicks"
PAGE_VIEWS = "clickstream.page-views"
SESSIONS = "clickstream.sessions"

# Page views are counted per minute; a user's session ends after 5 minutes without a click.
WINDOW = "1 minute"
SESSION_GAP = "5 minutes"
SESSION_GAP_S = 300
# How late an event may arrive (by event time) and still count.
WATERMARK_DELAY = "2 minutes"

DEFAULT_BOOTSTRAP = os.environ.get("KCOMPAT_BOOTSTRAP", "127.0.0.1:9092")
DEFAULT_CHECKPOINTS = os.path.join(tempfile.gettempdir(), "kcompat-clickstream-checkpoints")

ROOT = Path(__file__).resolve().parents[2]
LOCAL_CONNECTOR_JARS = ROOT / ".deps" / "spark"

# The event every click produces; `ts` is the event time in epoch milliseconds.
EVENT_FIELDS = (
    ("event_id", "string"),
    ("user_id", "string"),
    ("page", "string"),
    ("referrer", "string"),
    ("device", "string"),
    ("country", "string"),
    ("ts", "long"),
)


def event_schema() -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    types = {"string": StringType(), "long": LongType()}
    return StructType([StructField(name, types[kind]) for name, kind in EVENT_FIELDS])


def add_bootstrap_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        default=DEFAULT_BOOTSTRAP,
        help="Kafka bootstrap servers (default: $KCOMPAT_BOOTSTRAP or 127.0.0.1:9092, where `make run` listens)",
    )


def under_spark_submit() -> bool:
    # spark-submit starts the Python driver with the address of the JVM it already launched.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(app_name: str, master: str | None = None, shuffle_partitions: int = 4) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if not under_spark_submit():
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        jars = sorted(str(p) for p in LOCAL_CONNECTOR_JARS.glob("*.jar"))
        if not any("spark-sql-kafka-0-10" in j for j in jars):
            raise SystemExit(
                f"Spark's Kafka connector is not in {LOCAL_CONNECTOR_JARS}; run `bash tools/setup-test-deps.sh` "
                "(or `make install-test`) once, or start this script with spark-submit --packages "
                "org.apache.spark:spark-sql-kafka-0-10_2.13:<your Spark version>"
            )
        builder = (
            builder.master(master or "local[*]")
            .config("spark.jars", ",".join(jars))
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
            .config("spark.sql.session.timeZone", "UTC")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
