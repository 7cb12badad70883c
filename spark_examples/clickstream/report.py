"""Batch report: reads everything the streaming job wrote to `clickstream.page-views` and
`clickstream.sessions` (Spark's batch Kafka source, earliest to latest) and prints what a
product team asks first: the most viewed pages, the busiest minutes, and how visits go (length,
bounce rate, conversion by traffic source and device, where visitors enter and leave).

    python spark_examples/clickstream/report.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PAGE_VIEWS, SESSIONS, add_bootstrap_arg, spark_session


def read_topic(spark: Any, bootstrap: str, topic: str, schema: str) -> Any:
    from pyspark.sql import functions as F

    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    return raw.select(F.from_json(F.col("value").cast("string"), schema).alias("r")).select("r.*")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_bootstrap_arg(parser)
    parser.add_argument("--top", type=int, default=10, help="rows per table (default 10)")
    parser.add_argument("--master", default=None, help="Spark master when run with python (default local[*])")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    spark = spark_session("clickstream-report", args.master)
    views = read_topic(
        spark, args.bootstrap, PAGE_VIEWS, "minute STRING, page STRING, views LONG, visitors LONG"
    )
    visits = read_topic(
        spark,
        args.bootstrap,
        SESSIONS,
        "user_id STRING, start STRING, duration_ms LONG, clicks LONG, entry_page STRING, exit_page STRING, "
        "source STRING, device STRING, country STRING, converted BOOLEAN",
    ).cache()

    n_windows, n_visits = views.count(), visits.count()
    print(f"\n{n_windows} page-minute counts in {PAGE_VIEWS}, {n_visits} finished visits in {SESSIONS}")
    if n_windows == 0 and n_visits == 0:
        print("nothing yet: run generate.py, then stream_job.py (see README.md)")
        spark.stop()
        return

    print("\nMost viewed pages")
    views.groupBy("page").agg(F.sum("views").alias("views")).orderBy(F.desc("views"), "page").show(
        args.top, False
    )

    print("Busiest minutes")
    views.groupBy("minute").agg(
        F.sum("views").alias("views"), F.countDistinct("page").alias("pages")
    ).orderBy(F.desc("views"), "minute").show(args.top, False)

    if n_visits:
        print("Visits")
        visits.agg(
            F.count("*").alias("visits"),
            F.countDistinct("user_id").alias("visitors"),
            F.round(F.avg("clicks"), 2).alias("avg_clicks"),
            F.round(F.avg("duration_ms") / 1000, 1).alias("avg_seconds"),
            F.round(F.avg((F.col("clicks") == 1).cast("int")) * 100, 1).alias("bounce_pct"),
            F.round(F.avg(F.col("converted").cast("int")) * 100, 1).alias("conversion_pct"),
        ).show(1, False)

        print("Conversion by source and device")
        visits.groupBy("source", "device").agg(
            F.count("*").alias("visits"),
            F.round(F.avg(F.col("converted").cast("int")) * 100, 1).alias("conversion_pct"),
        ).orderBy(F.desc("visits")).show(args.top, False)

        print("Where visits start and end")
        entries = visits.groupBy(F.col("entry_page").alias("page")).agg(F.count("*").alias("entries"))
        exits = visits.groupBy(F.col("exit_page").alias("page")).agg(F.count("*").alias("exits"))
        entries.join(exits, "page", "full_outer").na.fill(0).orderBy(F.desc("entries"), F.desc("exits")).show(
            args.top, False
        )
    spark.stop()


if __name__ == "__main__":
    main()
