"""One broker, started fresh, through every workload of the plan; its figures as a flat dict.

    start (cold start) -> idle RSS -> warm-up (not measured) -> produce rows -> sync -> catch-up
    consume rows -> end-to-end latency -> transactional rows (benchmarks/txn.py) -> share-group
    rows (benchmarks/share.py) -> proxy rows (benchmarks/proxy.py) ->
    Kafka Streams rows (benchmarks/streams.py) -> small requests and the produce ceiling
    (benchmarks/small_requests.py) -> stop

CPU seconds per GB: the broker's CPU time (/proc/<pid>/stat, all threads) over one workload,
divided by the record bytes it moved. Peak RSS is sampled every 100 ms over all workloads.
A workload that fails is recorded as an error (its figures missing) and the suite goes on.
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import confluent_clients as cc
from benchmarks import fetch_path, java_tools, share, small_requests, streams, txn
from benchmarks import proxy as proxy_rows
from benchmarks.brokers import BrokerProcess
from benchmarks.plan import RAW_PARTITION_MAX, Plan, consume_key, produce_key
from benchmarks.proc_stats import PeakRss, cpu_seconds, rss_bytes

log = logging.getLogger("benchmarks")

IDLE_SETTLE_S = 1.0


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of `values`."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


class Suite:
    def __init__(self, broker: BrokerProcess, plan: Plan, profile_dir: Path | None = None) -> None:
        self.broker = broker
        self.plan = plan
        self.values: dict[str, float] = {}
        self.errors: dict[str, str] = {}
        self.notes: dict[str, Any] = {}
        self.profile_dir = profile_dir

    def _measure(self, key: str, nbytes_of: Callable[[Any], int], run: Callable[[], Any]) -> Any:
        """Run one workload; record its CPU s/GB; on failure record the error and return None."""
        cpu0 = cpu_seconds(self.broker.pid)
        t0 = time.perf_counter()
        try:
            result = run()
        except Exception as e:
            self.errors[key] = f"{type(e).__name__}: {e}"
            log.warning("%s %s failed: %s", self.broker.name, key, self.errors[key].splitlines()[0])
            if not self.broker.alive():
                raise RuntimeError(f"{self.broker.name} died during {key}:\n{self.broker.log_tail()}") from e
            return None
        cpu = cpu_seconds(self.broker.pid) - cpu0
        nbytes = nbytes_of(result)
        if nbytes:
            self.values[f"{key}/cpu_s_per_gb"] = cpu / (nbytes / 1e9)
        log.info("%-8s %-40s %6.1f s", self.broker.name, key, time.perf_counter() - t0)
        return result

    def run(self) -> None:
        b = self.broker
        self.values["start/cold_s"] = b.start()
        if b.format_s is not None:
            self.notes["format_s"] = b.format_s
        profiler = self._start_profiler()
        try:
            time.sleep(IDLE_SETTLE_S)
            self.values["memory/idle_rss_mb"] = rss_bytes(b.pid) / 1e6
            with PeakRss(b.pid) as peak:
                self._warm_up()
                if "produce" in self.plan.suites:
                    self._produce()
                if "consume" in self.plan.suites:
                    os.sync()  # the produce rows' dirty pages written back now, not during the reads
                    self._consume()
                if "latency" in self.plan.suites:
                    self._latency()
                if "txn" in self.plan.suites:
                    txn.run(self)  # benchmarks/txn.py: transactional produce, read_committed catch-up
                if "share" in self.plan.suites:
                    share.run(self)  # benchmarks/share.py: share-group consumption
                if "proxy" in self.plan.suites:
                    proxy_rows.run(self)  # benchmarks/proxy.py: direct vs through `kcompat proxy`
                if "streams" in self.plan.suites:
                    streams.run(self)  # benchmarks/streams.py: Kafka Streams on the streams protocol
                if "requests" in self.plan.suites:
                    small_requests.run(self)  # benchmarks/small_requests.py: Go load, cost per request
            self.values["memory/load_rss_mb"] = peak.peak / 1e6
            self.notes["cpu_s_total"] = cpu_seconds(b.pid)
        finally:
            if profiler is not None:
                profiler.send_signal(2)
                profiler.wait(30)
            b.stop()
            b.cleanup()

    def _start_profiler(self) -> subprocess.Popen[bytes] | None:
        if self.profile_dir is None or self.broker.name != "kcompat":
            return None
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        out = self.profile_dir / f"py-spy-{int(time.time())}.svg"
        self.notes["profile"] = str(out)
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        return subprocess.Popen([py_spy, "record", "-r", "250", "-o", str(out), "--pid", str(self.broker.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    def _warm_up(self) -> None:
        bootstrap = self.broker.bootstrap
        cc.create_topic(bootstrap, "warm-up")
        cc.produce(bootstrap, "warm-up", self.plan.warmup_records, 1024, "1", "none")
        cc.consume(bootstrap, "warm-up", self.plan.warmup_records)

    def _produce(self) -> None:
        plan, bootstrap = self.plan, self.broker.bootstrap
        timeout = plan.timeouts["run"]
        for client in plan.clients:
            for size in plan.sizes:
                count = (plan.records if client == "confluent" else plan.java_records)[size]
                for acks in plan.acks:
                    for comp in plan.compressions:
                        key = produce_key(client, size, acks, comp)
                        topic = key.replace("/", "-").replace("=", "")
                        try:
                            cc.create_topic(bootstrap, topic)
                        except Exception as e:
                            self.errors[key] = f"creating the topic: {e}"
                            continue
                        produce = cc.produce if client == "confluent" else java_tools.producer_perf
                        run = partial(produce, bootstrap, topic, count, size, acks, comp, timeout)
                        result = self._measure(key, lambda r, n=count * size: n, run)
                        if result is None:
                            continue
                        self.values[f"{key}/records_per_s"] = result.records_per_s
                        self.values[f"{key}/mb_per_s"] = result.mb_per_s
                        if client == "java":
                            self.notes[f"{key}/latency_ms"] = result.latency_ms

    def _consume(self) -> None:
        """Catch-up reads of the topics the confluent producer wrote with acks=1, uncompressed."""
        plan, b = self.plan, self.broker
        timeout = plan.timeouts["run"]
        for client in plan.consume_clients:
            for size in plan.sizes:
                key = consume_key(client, size)
                source = produce_key("confluent", size, "1", "none")
                if f"{source}/records_per_s" not in self.values:
                    self.errors[key] = f"no data: {source} did not run"
                    continue
                topic = source.replace("/", "-").replace("=", "")
                count = plan.records[size]
                run: Callable[[], Any]
                if client.startswith("confluent"):
                    run = partial(
                        cc.consume,
                        b.bootstrap,
                        topic,
                        count,
                        timeout,
                        defaults=client == "confluent-defaults",
                    )
                elif client == "java":
                    run = partial(java_tools.consumer_perf, b.bootstrap, topic, count, timeout)
                else:
                    run = partial(fetch_path.read_partition, b.host, b.port, topic, count, RAW_PARTITION_MAX[client],
                                  passes=plan.fetch_passes, timeout=timeout)  # fmt: skip
                result = self._measure(key, _bytes_of, run)
                if result is None:
                    continue
                self.values[f"{key}/records_per_s"] = result.records_per_s
                self.values[f"{key}/mb_per_s"] = result.mb_per_s
                if client == "java":
                    self.notes[f"{key}/rebalance_ms"] = result.rebalance_ms

    def _latency(self) -> None:
        plan, b = self.plan, self.broker
        try:
            cc.create_topic(b.bootstrap, "e2e")
        except Exception as e:
            self.errors["latency/e2e"] = f"creating the topic: {e}"
            return
        result = self._measure(
            "latency/e2e", lambda r: 0,
            lambda: cc.end_to_end(b.bootstrap, "e2e", plan.e2e_rate, plan.e2e_seconds, plan.e2e_size),
        )  # fmt: skip
        if result is None or not result.seconds_each:
            return
        ms = [s * 1000 for s in result.seconds_each]
        for p, q in (("p50", 50), ("p99", 99), ("p99.9", 99.9)):
            self.values[f"latency/e2e/{p}_ms"] = percentile(ms, q)
        self.notes["latency/e2e/samples"] = len(ms)
        self.notes["latency/e2e/mean_ms"] = statistics.fmean(ms)
        self.notes["latency/e2e/max_ms"] = max(ms)


def _bytes_of(result: Any) -> int:
    if hasattr(result, "bytes"):
        return int(result.bytes)
    return int(result.mb_per_s * 1e6 * result.records / result.records_per_s)
