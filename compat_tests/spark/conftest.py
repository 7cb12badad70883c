"""Fixtures for the Spark tests: one local SparkSession for the whole session with Spark's Kafka
connector from .deps/spark/ (resolved by tools/setup-test-deps.sh; `spark.jars`, so no network at
test time), and one `kcompat serve` per test module.

Every test here is real PySpark in local mode and is marked slow: `pytest -m slow compat_tests/spark`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kcompat.testing import TEST_DEFAULTS, Broker, BrokerStartError

ROOT = Path(__file__).resolve().parents[2]
SPARK_JARS = ROOT / ".deps" / "spark"
SETUP_HINT = "run `bash tools/setup-test-deps.sh` (make test does) to install it"

_BROKER_LOG_TAIL = 150


def spark_jars() -> list[str]:
    jars = sorted(str(p) for p in SPARK_JARS.glob("*.jar"))
    if not any("spark-sql-kafka-0-10" in j for j in jars):
        pytest.fail(f"Spark's Kafka connector is not in {SPARK_JARS}: {SETUP_HINT}", pytrace=False)
    return jars


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession that can read and write format("kafka")."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        pytest.fail(f"pyspark is not installed: {SETUP_HINT}", pytrace=False)
    # Loopback only, and the Python workers use this interpreter.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warehouse = tempfile.mkdtemp(prefix="kcompat-spark-warehouse-")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kcompat-compat-tests")
        .config("spark.jars", ",".join(spark_jars()))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # Streaming state of tiny test queries: no need for 200 shuffle partitions or a slow
        # maintenance cadence.
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "5s")
        .config("spark.sql.streaming.minBatchesToRetain", "5")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One `kcompat serve` for the test module (topics get unique names)."""
    base = tmp_path_factory.mktemp("kcompat-spark")
    # The modules' records carry 2023 CreateTimes (event-time origins), past the default 7-day
    # retention.ms: a retention pass (every 5 min, so once a module's broker is that old) would
    # delete a log mid-read. These tests are not about retention: it is off.
    overrides = {**TEST_DEFAULTS, "log.retention.ms": "-1"}
    b = Broker(data_dir=base / "kcompat-data", log_path=base / "kcompat.log", overrides=overrides)
    try:
        b.start()
    except BrokerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield b
    b.stop()


@pytest.fixture
def checkpoint(tmp_path: Path) -> str:
    return str(tmp_path / "checkpoint")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if report.failed:
        b = getattr(item, "funcargs", {}).get("broker")
        if isinstance(b, Broker):
            tail = "\n".join(b.logs().splitlines()[-_BROKER_LOG_TAIL:])
            report.sections.append((f"kcompat broker {b.bootstrap} log (tail)", tail))
    return report
