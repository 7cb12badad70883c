"""The scale suite: many partitions on one broker, kcompat and Kafka 4.3.1 in the same run.

    python -m benchmarks.scale [--brokers kcompat,kafka] [--topics 100] [--partitions 50]
                               [--hot 1000] [--workdir DIR]
    (or `python -m benchmarks --suites scale`, opt-in: it takes a few minutes per broker)

Per broker, started fresh on its own log dir:
  create_s        CreateTopics for TOPICS x PARTITIONS partitions (requests of at most 5,000 partitions,
                  within Kafka's limits, one after the other), until every topic answered
                  (create_cpu_s: the broker's CPU seconds meanwhile)
  ready_s         then until the broker's Metadata names every partition with a leader (Kafka's
                  broker makes the logs as it applies the controller's records)
  fill_s          one 100-byte record produced to every partition (acks=all)
  fds, rss_mb     open descriptors (/proc/<pid>/fd) and resident memory once idle after the fill
  metadata_ms     median of 5 Metadata requests for all topics (a fresh client each time)
  produce_hot_s   HOT partitions x 20 records of 100 bytes, one producer
  consume_hot_s   catch-up consume of those HOT partitions from the start, one consumer
  stop_clean_s    SIGTERM to exit, after the fill and the hot rounds
  restart_clean_s then the time from spawn to the first answered Metadata (and *_cpu_s: the CPU
                  seconds the new process used until then: steadier than wall time on a busy machine)
  restart_kill_s  SIGKILL (data in the page cache, unflushed), then the same
  stop_s          SIGTERM to exit (the last stop)
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.brokers import BrokerProcess, KafkaBroker, KcompatBroker
from benchmarks.metadata_probe import wait_for_metadata
from benchmarks.proc_stats import cpu_seconds, rss_bytes

log = logging.getLogger("benchmarks")

RESTART_TIMEOUT_S = 300.0
RECORD = b"x" * 100
# Kafka refuses a CreateTopics of more than 10,000 partitions (KAFKA-17870), and its controller one
# that makes more than 10,000 records (a record per partition, per topic, per config).
MAX_PARTITIONS_PER_REQUEST = 5_000


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _respawn(broker: BrokerProcess) -> float:
    """Start the broker again on its existing data (BrokerProcess.start() wipes the dir)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    with open(broker.log_path, "ab") as out:
        started = time.perf_counter()
        broker.process = subprocess.Popen(
            broker.command(broker.workdir / "server.properties"), stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, env=env, cwd=broker.workdir,
        )  # fmt: skip
    return wait_for_metadata(broker.host, broker.port, started, RESTART_TIMEOUT_S, broker.alive)


def _kill(broker: BrokerProcess) -> None:
    assert broker.process is not None
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait()
    broker.process = None


def _stop(broker: BrokerProcess) -> float:
    assert broker.process is not None
    t0 = time.perf_counter()
    broker.process.send_signal(signal.SIGTERM)
    broker.process.wait(120)
    broker.process = None
    return time.perf_counter() - t0


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """ "100x50,200x100" -> [(100, 50), (200, 100)] (topics x partitions each); a plain count of
    partitions is topics of 50: "20000" -> [(400, 50)]."""
    try:
        sizes = [
            tuple(int(n) for n in part.lower().split("x")) if "x" in part.lower() else _of_50(int(part))
            for part in text.split(",")
            if part.strip()
        ]
    except ValueError:
        sizes = []
    if not sizes or any(len(s) != 2 or min(s) < 1 for s in sizes):
        raise argparse.ArgumentTypeError(f"sizes are TOPICSxPARTITIONS or PARTITIONS[,...], not {text!r}")
    return [(s[0], s[1]) for s in sizes]


def _of_50(partitions: int) -> tuple[int, int]:
    return (partitions // 50, 50) if partitions % 50 == 0 else (partitions, 1)


class BrokerDied(RuntimeError):
    """The broker process exited during a step (Kafka out of descriptors, for one)."""


def _check(alive: Callable[[], bool]) -> None:
    if not alive():
        raise BrokerDied("the broker process exited")


def topic_names(topics: int) -> list[str]:
    return [f"scale-{i:04d}" for i in range(topics)]


def _always() -> bool:
    return True


def create(bootstrap: str, topics: int, partitions: int, alive: Callable[[], bool] = _always) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=30)  # connected before the clock starts
    names = topic_names(topics)
    per_request = max(1, MAX_PARTITIONS_PER_REQUEST // partitions)
    t0 = time.perf_counter()
    for i in range(0, len(names), per_request):
        futures = admin.create_topics(
            [NewTopic(n, partitions, 1) for n in names[i : i + per_request]],
            request_timeout=120,
            operation_timeout=120,
        )
        for f in futures.values():
            while not f.done():
                _check(alive)
                time.sleep(0.2)
            f.result()
    return time.perf_counter() - t0


def produce(
    bootstrap: str, targets: list[tuple[str, int]], per_partition: int, alive: Callable[[], bool] = _always
) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": False})
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    t0 = time.perf_counter()
    for _ in range(per_partition):
        for topic, part in targets:
            while True:
                try:
                    p.produce(topic, RECORD, partition=part, on_delivery=on_delivery)
                    break
                except BufferError:
                    _check(alive)
                    p.poll(0.05)
        p.poll(0)
    deadline = time.perf_counter() + 300
    while (left := p.flush(2)) and time.perf_counter() < deadline:
        _check(alive)
    took = time.perf_counter() - t0
    if left or failed:
        raise RuntimeError(f"{left} records not delivered, {len(failed)} failed: {failed[:1]}")
    return took


def consume(bootstrap: str, targets: list[tuple[str, int]], expected: int) -> float:
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "scale-bench", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
    })  # fmt: skip
    c.assign([TopicPartition(t, p, 0) for t, p in targets])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < expected and time.perf_counter() < deadline:
        for m in c.consume(1000, timeout=1.0):
            if m.error() is None:
                got += 1
    took = time.perf_counter() - t0
    c.close()
    if got < expected:
        raise RuntimeError(f"consumed {got} of {expected}")
    return took


def wait_ready(bootstrap: str, expected: int, alive: Callable[[], bool], timeout_s: float = 300) -> float:
    """Seconds until the broker's Metadata names every partition with a leader (Kafka's broker
    creates the logs as it applies the controller's records, after CreateTopics answered)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    t0 = time.perf_counter()
    while True:
        _check(alive)
        md = admin.list_topics(timeout=60)
        n = sum(
            1
            for name, t in md.topics.items()
            if name.startswith("scale-") and t.error is None
            for p in t.partitions.values()
            if p.leader >= 0
        )
        if n >= expected:
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > timeout_s:
            raise RuntimeError(f"{n} of {expected} partitions served {timeout_s:.0f} s after CreateTopics")
        time.sleep(1)


def metadata_ms(bootstrap: str, expected: int) -> float:
    times = []
    for _ in range(5):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.list_topics(topic="scale-0000", timeout=30)  # connected, small answer
        t0 = time.perf_counter()
        md = admin.list_topics(timeout=60)
        times.append((time.perf_counter() - t0) * 1000)
        n = sum(len(t.partitions) for name, t in md.topics.items() if name.startswith("scale-"))
        if n != expected:
            raise RuntimeError(f"Metadata named {n} partitions, not {expected}")
    return statistics.median(times)


def run_one(broker: BrokerProcess, topics: int, partitions: int, hot: int, out: dict[str, Any]) -> None:
    """The figures into `out` as they are measured (those of the steps before a failure stay)."""
    out["start_s"] = broker.start()
    try:
        bootstrap = broker.bootstrap
        alive = broker.alive
        cpu0 = cpu_seconds(broker.pid)
        out["create_s"] = create(bootstrap, topics, partitions, alive)
        out["create_cpu_s"] = cpu_seconds(broker.pid) - cpu0
        every = [(t, p) for t in topic_names(topics) for p in range(partitions)]
        out["ready_s"] = wait_ready(bootstrap, len(every), alive)
        out["fill_s"] = produce(bootstrap, every, 1, alive)
        time.sleep(2)  # idle: background work after the burst settles
        _check(alive)
        out["fds"] = open_fds(broker.pid)
        out["fds_per_partition"] = out["fds"] / len(every)
        out["rss_mb"] = rss_bytes(broker.pid) / 1e6
        out["metadata_ms"] = metadata_ms(bootstrap, len(every))
        hot_targets = every[:hot]
        out["produce_hot_s"] = produce(bootstrap, hot_targets, 20, alive)
        out["consume_hot_s"] = consume(bootstrap, hot_targets, len(hot_targets) * 21)
        out["stop_clean_s"] = _stop(broker)
        out["restart_clean_s"] = _respawn(broker)
        out["restart_clean_cpu_s"] = cpu_seconds(broker.pid)
        _kill(broker)
        out["restart_kill_s"] = _respawn(broker)
        out["restart_kill_cpu_s"] = cpu_seconds(broker.pid)
        out["stop_s"] = _stop(broker)
    except Exception:
        proc = broker.process
        if proc is not None and proc.poll() is not None:
            out["exit_code"] = proc.returncode  # it died: say so beside the step that failed
        elif proc is not None:
            out["fds_at_failure"] = open_fds(proc.pid)
        raise
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="kafka,kcompat")
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument(
        "--sizes", type=parse_sizes, help="TOPICSxPARTITIONS[,...]: instead of --topics/--partitions"
    )
    ap.add_argument("--hot", type=int, default=1000)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for topics, partitions in args.sizes or [(args.topics, args.partitions)]:
        print(f"{topics} topics x {partitions} partitions")
        print(table(run(args.brokers.split(","), topics, partitions, args.hot, args.workdir)))


def run(
    brokers: list[str], topics: int, partitions: int, hot: int, workdir: Path | None = None
) -> dict[str, dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="kcompat-scale-", dir=workdir))
    results: dict[str, dict[str, Any]] = {}
    for name in brokers:
        broker: BrokerProcess = KafkaBroker(base / name) if name == "kafka" else KcompatBroker(base / name)
        if name == "kafka" and (why := KafkaBroker.available()) is not None:
            results[name] = {"error": why}
            continue
        out: dict[str, Any] = {}
        results[name] = out
        try:
            run_one(broker, topics, partitions, hot, out)
        except Exception as e:
            # Reported as this broker's result, beside the figures measured before (Kafka keeps a
            # descriptor or more per segment: past the open file limit it stops).
            emfile = "Too many open files" in broker.log_tail(400)
            why = f"{type(e).__name__}: {e}"[:300]
            log.warning("%s scale suite failed: %s", name, why)
            if "exit_code" in out:
                why += f" (the broker process had exited, code {out['exit_code']})"
            if "fds_at_failure" in out:
                why += f" (it held {out['fds_at_failure']} descriptors then)"
            out["error"] = why + (" (its log says: Too many open files)" if emfile else "")
        finally:
            broker.cleanup()
        log.info("%s: %s", name, results[name])
    return results


FIGURES = [
    "create_s",
    "create_cpu_s",
    "ready_s",
    "fill_s",
    "fds",
    "fds_per_partition",
    "rss_mb",
    "metadata_ms",
    "produce_hot_s",
    "consume_hot_s",
    "stop_clean_s",
    "restart_clean_s",
    "restart_clean_cpu_s",
    "restart_kill_s",
    "restart_kill_cpu_s",
    "stop_s",
]


def table(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    lines = ["| figure | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for f in FIGURES:
        cells = []
        for n in names:
            v = results[n].get(f)
            cells.append("—" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v))
        lines.append(f"| {f} | " + " | ".join(cells) + " |")
    lines.extend(f"\n{n}: {results[n]['error']}" for n in names if "error" in results[n])
    return "\n".join(lines)


if __name__ == "__main__":
    main()
