"""Kafka's own load generators, from the jars: kafka-producer-perf-test (ProducerPerformance) and
kafka-consumer-perf-test (ConsumerPerformance), run as the scripts run them but with `java -cp`.

Their summaries, parsed:

    ProducerPerformance, last line:
      200000 records sent, 40535.06 records/sec (3.87 MB/sec), 2011.07 ms avg latency, 2694.00 ms
      max latency, 2224 ms 50th, 2670 ms 95th, 2690 ms 99th, 2694 ms 99.9th.
    ConsumerPerformance, a CSV header and one row:
      start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
      rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

MB in both is 2^20 bytes; the harness converts to 10^6. ConsumerPerformance's fetch.* figures
exclude the consumer group's join (rebalance.time.ms), which is measured separately.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.brokers import KAFKA_JARS

PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
TOOL_JVM = ["-Xms256m", "-Xmx1g", "-Djava.awt.headless=true"]
MIB = 1 << 20

_PRODUCER_SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th"
)


class ToolError(RuntimeError):
    pass


def _run(main: str, args: list[str], timeout: float) -> str:
    java = shutil.which("java") or "java"
    cmd = [java, *TOOL_JVM, "-cp", str(KAFKA_JARS / "*"), main, *args]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ToolError(f"{main.rsplit('.', 1)[1]} did not finish within {timeout:.0f} s") from None
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise ToolError(f"{main.rsplit('.', 1)[1]} exited with {result.returncode}:\n{tail}")
    return result.stdout


@dataclass
class ProducerPerf:
    records: int
    records_per_s: float
    mb_per_s: float  # 10^6 bytes
    latency_ms: dict[str, float]  # send to acknowledgement, at saturation


def producer_perf(bootstrap: str, topic: str, count: int, size: int, acks: str, compression: str,
                  timeout: float = 180.0, extra: Sequence[str] = ()) -> ProducerPerf:  # fmt: skip
    """`extra`: more ProducerPerformance options, e.g. --transactional-id (benchmarks/txn.py)."""
    out = _run(PRODUCER_PERF, [
        "--topic", topic, "--num-records", str(count), "--record-size", str(size), "--throughput", "-1", *extra,
        "--command-property", f"bootstrap.servers={bootstrap}", f"acks={acks}", f"compression.type={compression}",
    ], timeout)  # fmt: skip
    matches = _PRODUCER_SUMMARY.findall(out)
    if not matches:
        raise ToolError(f"no summary in ProducerPerformance output:\n{out[-2000:]}")
    n, rps, mibs, avg, mx, p50, p95, p99, p999 = matches[-1]
    return ProducerPerf(
        int(n), float(rps), float(mibs) * MIB / 1e6,
        {"avg": float(avg), "max": float(mx), "p50": float(p50), "p95": float(p95), "p99": float(p99), "p99.9": float(p999)},
    )  # fmt: skip


@dataclass
class ConsumerPerf:
    records: int
    records_per_s: float  # fetch.nMsg.sec
    mb_per_s: float  # fetch.MB.sec, in 10^6 bytes
    rebalance_ms: float


def consumer_perf(
    bootstrap: str, topic: str, count: int, timeout: float = 180.0, properties: Sequence[str] = ()
) -> ConsumerPerf:
    """`properties`: consumer settings (key=value), e.g. isolation.level=read_committed."""
    props = [arg for prop in properties for arg in ("--command-property", prop)]
    out = _run(CONSUMER_PERF, [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(count), "--timeout", "30000", *props,
    ], timeout)  # fmt: skip
    lines = [line for line in out.splitlines() if line.strip()]
    header_at = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if header_at is None or header_at + 1 >= len(lines):
        raise ToolError(f"no summary in ConsumerPerformance output:\n{out[-2000:]}")
    names = [c.strip() for c in lines[header_at].split(",")]
    row = dict(zip(names, (c.strip() for c in lines[header_at + 1].split(",")), strict=False))
    records = int(row["data.consumed.in.nMsg"])
    if records < count:
        raise ToolError(f"ConsumerPerformance read {records} of {count} records")
    return ConsumerPerf(records, float(row["fetch.nMsg.sec"]), float(row["fetch.MB.sec"]) * MIB / 1e6,
                        float(row["rebalance.time.ms"]))  # fmt: skip


SHARE_CONSUMER_PERF = "org.apache.kafka.tools.ShareConsumerPerformance"


def share_consumer_perf(
    bootstrap: str, topic: str, group: str, count: int, threads: int, timeout: float = 180.0
) -> ConsumerPerf:
    """ShareConsumerPerformance (implicit acknowledgement; --threads members of `group`). Its last
    line: start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg,
    fetch.time.ms; its rates are over the whole run, the members' join included."""
    out = _run(SHARE_CONSUMER_PERF, [
        "--bootstrap-server", bootstrap, "--topic", topic, "--group", group, "--num-records", str(count),
        "--threads", str(threads), "--timeout", "30000",
    ], timeout)  # fmt: skip
    rows = [line.split(",") for line in out.splitlines() if line.count(",") == 6 and line[:1].isdigit()]
    if not rows:
        raise ToolError(f"no summary in ShareConsumerPerformance output:\n{out[-2000:]}")
    _start, _end, _mib, mibs, rps, n, _fetch_ms = (c.strip() for c in rows[-1])
    if int(n) < count:
        raise ToolError(f"ShareConsumerPerformance read {n} of {count} records")
    return ConsumerPerf(int(n), float(rps), float(mibs) * MIB / 1e6, 0.0)
