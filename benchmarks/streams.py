"""The Kafka Streams rows of the side-by-side run (the "streams" suite, KIP-1071), against each broker:
Kafka Streams 4.3.1 running compat_tests/java/StreamsGroupApp.java (a repartition topic, a
changelog-backed count store, a KStream-KTable join, exactly_once_v2, commit.interval.ms 100) with
`group.protocol=streams`, on 4-partition topics.

- throughput: with one instance RUNNING and warm, LINES lines of 4 words are produced; the clock
              runs from the first produce to the last of the 4 x LINES output records committed
              (read_committed): input lines per second through the whole app, end to end;
- scale-out:  a second instance started; the clock runs until both are RUNNING and the broker's
              StreamsGroupDescribe shows two members, each owning active tasks, together all of them.

Streams needs Java, so `--no-java` drops the suite; it runs in the first round only (JVM starts and
rebalances are most of its time). The broker's heartbeat interval is each broker's default.
"""

from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks import confluent_clients as cc
from kcompat.wire.protocol import decode_response, encode_request

if TYPE_CHECKING:
    from benchmarks.plan import Plan
    from benchmarks.suite import Suite

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "compat_tests" / "java" / "StreamsGroupApp.java"
STREAMS_JARS = ROOT / ".deps" / "kafka-streams"
JVM = ["-Xms64m", "-Xmx512m", "-XX:+UseSerialGC"]
PARTITIONS = 4
TASKS = 2 * PARTITIONS  # two subtopologies: lines -> repartition, repartition + labels -> output
WORDS = [f"w{i:02d}" for i in range(50)]
FULL_LINES = 20_000
STREAMS_GROUP_DESCRIBE = 89
THROUGHPUT, SCALE_OUT = "streams/throughput", "streams/scale_out"


def rows() -> list[tuple[str, str, str, bool]]:
    """(label, key, unit, higher is better) of every figure, in report order."""
    return [
        ("stateful app, input lines/s end to end", f"{THROUGHPUT}/records_per_s", "records/s", True),
        ("second instance started to both RUNNING with tasks moved, s", f"{SCALE_OUT}/s", "s", False),
    ]


def lines(plan: Plan) -> int:
    """Lines per throughput row: FULL_LINES, fewer in --quick."""
    return min(FULL_LINES, plan.records[min(plan.sizes)] // 20)


def compile_app(out: Path) -> Path:
    if not (out / "StreamsGroupApp.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-cp", str(STREAMS_JARS / "*"), "-d", str(out), str(SOURCE)],
                       check=True, capture_output=True, text=True, timeout=180)  # fmt: skip
    return out


class App:
    """One StreamsGroupApp process; its state changes kept by a thread."""

    def __init__(self, classes: Path, args: list[str]) -> None:
        java = shutil.which("java") or "java"
        self.proc = subprocess.Popen(
            [java, *JVM, "-cp", f"{classes}:{STREAMS_JARS / '*'}", "StreamsGroupApp", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.states: list[str] = []
        self.errors: list[str] = []
        self.tail: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.tail = [*self.tail[-20:], line.rstrip()]
            if line.startswith("{"):
                event = json.loads(line)
                if "state" in event:
                    self.states.append(event["state"])
                if "error" in event:
                    self.errors.append(event["error"])

    def running(self) -> bool:
        if self.errors or self.proc.poll() is not None:
            raise RuntimeError(f"the Streams app failed: {self.errors[:1] or self.tail[-5:]}")
        return bool(self.states) and self.states[-1] == "RUNNING"

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)


class OutputCount:
    """How many committed records the output topic holds (read_committed, from the start)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.count = 0
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-count",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.count += sum(1 for m in self.consumer.consume(10_000, 0.1) if m.error() is None)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def wait(what: str, done: Any, timeout: float, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not in {timeout:.0f} s")
        time.sleep(step)


def produce_lines(bootstrap: str, topic: str, n: int, first: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(first, first + n):
        producer.produce(
            topic, key=str(i).encode(), value=" ".join(WORDS[(i + k * 7) % len(WORDS)] for k in range(4))
        )
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError("lines not all produced")


def active_tasks(host: str, port: int, group: str) -> list[set[tuple[str, int]]]:
    """Each member's active tasks, as the broker's StreamsGroupDescribe v0 says (single node: the
    broker is the coordinator)."""
    body = {"group_ids": [group], "include_authorized_operations": False}
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(encode_request(STREAMS_GROUP_DESCRIBE, 0, 1, body, "bench-streams"))
        (size,) = struct.unpack(">i", _recv(sock, 4))
        _correlation, response = decode_response(STREAMS_GROUP_DESCRIBE, 0, _recv(sock, size))
    (g,) = response.groups
    if g.error_code != 0:
        return []
    return [
        {(t.subtopology_id, p) for t in m.assignment.active_tasks for p in t.partitions} for m in g.members
    ]


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    return buf


def split(tasks: list[set[tuple[str, int]]]) -> bool:
    return len(tasks) == 2 and all(tasks) and not tasks[0] & tasks[1] and len(tasks[0] | tasks[1]) == TASKS


def run(suite: Suite) -> None:
    b, plan = suite.broker, suite.plan
    timeout = max(plan.timeouts["run"], 120.0)
    app_id, topics = "bench-streams", ("bench-lines", "bench-labels", "bench-out")
    for t in topics:
        cc.create_topic(b.bootstrap, t, PARTITIONS)
    labels = Producer({"bootstrap.servers": b.bootstrap, "partitioner": "murmur2_random"})  # Java's
    for w in WORDS:
        labels.produce(topics[1], key=w.encode(), value=f"L{w}".encode())
    labels.flush(30)
    classes = compile_app(b.workdir / "streams-classes")
    args = [b.bootstrap, app_id, *topics]
    output = OutputCount(b.bootstrap, topics[2])
    apps = [App(classes, [*args, str(b.workdir / "streams-state-1")])]
    try:
        wait("the first instance RUNNING", apps[0].running, timeout, 0.1)
        produce_lines(b.bootstrap, topics[0], 200, 0)  # warm-up: the internal topics and the JIT
        wait("the warm-up output", lambda: output.count >= 800, timeout)
        n = lines(plan)

        def throughput() -> float:
            base, t0 = output.count, time.perf_counter()
            produce_lines(b.bootstrap, topics[0], n, 200)
            wait("the output of every line", lambda: output.count >= base + 4 * n, timeout, 0.005)
            return n / (time.perf_counter() - t0)

        rate = suite._measure(THROUGHPUT, lambda _r: 0, throughput)
        if rate is not None:
            suite.values[f"{THROUGHPUT}/records_per_s"] = rate

        def scale_out() -> float:
            t0 = time.perf_counter()
            apps.append(App(classes, [*args, str(b.workdir / "streams-state-2")]))
            wait(
                "both instances RUNNING with the tasks split",
                lambda: all(a.running() for a in apps) and split(active_tasks(b.host, b.port, app_id)),
                timeout,
                0.05,
            )
            return time.perf_counter() - t0

        seconds = suite._measure(SCALE_OUT, lambda _r: 0, scale_out)
        if seconds is not None:
            suite.values[f"{SCALE_OUT}/s"] = seconds
    finally:
        output.close()
        for a in apps:
            a.stop()
