"""The per-request rows of the side-by-side run (the "requests" suite, issue 31), against each broker:

- small requests: CONNS connections, each sending Produce requests of one 16 KiB batch (16
  records of 1 KiB) to a partition of its own among PARTITIONS, IN_FLIGHT unanswered at most,
  acks=1 and acks=all: requests per second, and the broker's CPU per request in µs (utime +
  stime of the broker process from /proc/<pid>/stat, every thread: the JVM for Kafka) over the
  same span. Here a broker's cost per request, not per byte, decides;
- produce ceiling: CEILING_CONNS connections, each with CEILING_IN_FLIGHT pipelined Produce
  requests of one 256 KiB batch, acks=1, one partition each: the most one broker takes in,
  reported beside the page-cache write limit measured in the same round (machine_limits.py).

Both use benchmarks/loadgen (Go; wire_load.py builds it): the frames are encoded once by Python
and sent with sendfile, so the load costs the shared cores little. The batches carry no producer
id, so the same bytes can be appended again and again.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from benchmarks import confluent_clients as cc
from benchmarks import wire_load
from benchmarks.payloads import letter_values
from benchmarks.proc_stats import cpu_seconds
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.protocol import encode_request
from kcompat.wire.records import Record, build_batch

if TYPE_CHECKING:
    from benchmarks.plan import Plan
    from benchmarks.suite import Suite

ACKS = ("1", "all")
RECORD_SIZE = 1024
SMALL_BATCH_RECORDS = 16  # one 16 KiB batch per request: a producer's default batch.size
CONNS = 32
PARTITIONS = 16
IN_FLIGHT = 2
CEILING_BATCH_RECORDS = 256  # 256 KiB batches
CEILING_CONNS = 4
CEILING_IN_FLIGHT = 4
CEILING = "requests/ceiling"


def key(acks: str) -> str:
    return f"requests/small/acks={acks}"


def rows() -> list[tuple[str, str, str, bool]]:
    """(label, figure key, unit, higher is better) of every row, in report order."""
    out: list[tuple[str, str, str, bool]] = []
    for acks in ACKS:
        label = f"{CONNS} connections, one 16 KiB batch per Produce, acks={acks}"
        out += [
            (f"{label}: requests/s", f"{key(acks)}/requests_per_s", "requests/s", True),
            (f"{label}: broker CPU µs per request", f"{key(acks)}/cpu_us_per_request", "µs", False),
        ]
    out.append(
        (f"produce ceiling, {CEILING_CONNS} connections, 256 KiB batches, acks=1: MB/s",
         f"{CEILING}/mb_per_s", "MB/s", True)
    )  # fmt: skip
    return out


def _batch(records: int) -> bytes:
    values = letter_values(RECORD_SIZE)
    now = int(time.time() * 1000)
    return bytes(build_batch([Record(i, now, None, values[i % len(values)]) for i in range(records)]))


def produce_job(
    addr: str, topic: str, partitions: int, conns: int, requests: int, batch_records: int, acks: str
) -> list[dict[str, Any]]:
    """loadgen connections: connection i sends to partition i % partitions, `requests` in all
    spread evenly (at least one each)."""
    batch = _batch(batch_records)
    per_conn = max(1, requests // conns)
    out = []
    for i in range(conns):
        p = i % partitions
        frame = encode_request(PRODUCE.key, wire_load.PRODUCE_VERSION, i + 1, {
            "transactional_id": None, "acks": -1 if acks == "all" else int(acks), "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}],
        })  # fmt: skip
        out.append(
            {"addr": addr, "frames": [frame], "requests": per_conn, "records_per_frame": batch_records}
        )
    return out


def wait_for_leaders(addr: str, topic: str, partitions: int, timeout: float) -> None:
    """One small Produce to every partition until all are taken: Kafka may name a new partition's
    leader in Metadata a moment before that broker takes Produce for it (NOT_LEADER_OR_FOLLOWER).
    Also each broker's first appends to these partitions, outside the measured span."""
    deadline = time.monotonic() + timeout
    job = {"mode": "produce", "in_flight": 1,
           "conns": produce_job(addr, topic, partitions, partitions, partitions, 1, "1")}  # fmt: skip
    while True:
        try:
            wire_load._run(job, timeout)
            return
        except RuntimeError as e:
            if not re.search(r"\berror 6\b", str(e)) or time.monotonic() > deadline:  # NOT_LEADER_OR_FOLLOWER
                raise
            time.sleep(0.2)


def measured_produce(
    suite: Suite, name: str, conns: int, partitions: int, requests: int, batch_records: int, acks: str,
    in_flight: int,
) -> dict[str, float] | None:  # fmt: skip
    """One loadgen produce run on a topic of its own: requests, seconds, broker CPU s, records."""
    b, timeout = suite.broker, suite.plan.timeouts["run"]
    topic = name.replace("/", "-").replace("=", "")
    try:
        cc.create_topic(b.bootstrap, topic, partitions)
        wait_for_leaders(b.bootstrap, topic, partitions, timeout)
        job = {"mode": "produce", "in_flight": in_flight,
               "conns": produce_job(b.bootstrap, topic, partitions, conns, requests, batch_records, acks)}  # fmt: skip
        cpu0 = cpu_seconds(b.pid)
        r = wire_load._run(job, timeout)
        cpu = cpu_seconds(b.pid) - cpu0
    except Exception as e:
        suite.errors[name] = f"{type(e).__name__}: {e}"
        if not b.alive():
            raise RuntimeError(f"{b.name} died during {name}:\n{b.log_tail()}") from e
        return None
    expected = sum(c["requests"] for c in job["conns"])
    if r["requests"] != expected:
        suite.errors[name] = f"loadgen answered {r['requests']} of {expected} requests"
        return None
    suite.notes[f"{name}/loadgen_cpu_s"] = r["cpu_s"]
    return {"requests": r["requests"], "seconds": r["seconds"], "cpu_s": cpu, "records": r["records"]}


def run(suite: Suite) -> None:
    plan = suite.plan
    for acks in ACKS:
        r = measured_produce(suite, key(acks), CONNS, PARTITIONS, plan.small_requests, SMALL_BATCH_RECORDS,
                             acks, IN_FLIGHT)  # fmt: skip
        if r is not None:
            suite.values[f"{key(acks)}/requests_per_s"] = r["requests"] / r["seconds"]
            suite.values[f"{key(acks)}/cpu_us_per_request"] = r["cpu_s"] / r["requests"] * 1e6
    requests = max(CEILING_CONNS, plan.ceiling_records // CEILING_BATCH_RECORDS)
    r = measured_produce(suite, CEILING, CEILING_CONNS, CEILING_CONNS, requests, CEILING_BATCH_RECORDS, "1",
                         CEILING_IN_FLIGHT)  # fmt: skip
    if r is not None:
        suite.values[f"{CEILING}/mb_per_s"] = r["records"] * RECORD_SIZE / r["seconds"] / 1e6
        suite.values[f"{CEILING}/cpu_s_per_gb"] = r["cpu_s"] / (r["records"] * RECORD_SIZE / 1e9)


def section(agg: dict[str, dict[str, Any]], plan: Plan, table: Any) -> list[str]:
    """The report's table of these rows (`table` is report._table)."""
    head = (
        f"## Small requests and the produce ceiling (benchmarks/small_requests.py: Go load, 1 KiB records, "
        f"{plan.small_requests:,} small requests per row, {plan.ceiling_records:,} records at the ceiling)"
    )
    return [head, "", *table(agg, [(label, k, hib) for label, k, _u, hib in rows()], "workload"), ""]
