"""Helpers of the Spark tests (their fixtures are in conftest.py)."""

from __future__ import annotations

from typing import Any


def kafka_reader(spark: Any, bootstrap: str, **options: Any) -> Any:
    """spark.read.format("kafka") with kafka.bootstrap.servers and the source `options`."""
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def with_millis(df: Any) -> Any:
    """The Kafka source's columns with the timestamp as epoch milliseconds (`timestamp_ms`), which
    compares exactly with what other clients report."""
    from pyspark.sql import functions as F

    return df.withColumn("timestamp_ms", F.unix_millis("timestamp"))
