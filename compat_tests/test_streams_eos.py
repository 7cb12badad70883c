"""Kafka Streams 4.3.1 with processing.guarantee=exactly_once_v2 against `kcompat serve`, the broker
killed (kill -9) and restarted mid-stream: a word count (compat_tests/java/WordCountEos.java: a
repartition topic, an in-memory store restored from its changelog, no record cache) whose output,
read with read_committed, holds for every word exactly its running counts 1, 2, ..., n once each and
in order: no duplicate from a re-processed batch, no loss, and a final count equal to the input's."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support import DEPS, ROOT, ReportFigure, java_classpath, java_executable

from compat_tests.groups_members import JVM, compile_java
from kcompat.testing import BrokerFactory

pytestmark = pytest.mark.timeout(180)

STREAMS_JARS = DEPS / "kafka-streams"  # tools/deps/kafka-streams/pom.xml: Streams without RocksDB
WORDS = [f"w{i:02d}" for i in range(16)]
LINES = 600
WORDS_PER_LINE = 5
MILLIS_PER_WORD = 2  # ~6 s of counting: the kill lands while Streams is busy
# The transaction coordinator aborts what a killed broker left open promptly after the restart.
OVERRIDES = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


def input_lines() -> list[str]:
    rng = random.Random(15)
    # Skewed on purpose: some words reach counts in the hundreds, some stay small.
    weights = [1 + i for i in range(len(WORDS))]
    return [" ".join(rng.choices(WORDS, weights, k=WORDS_PER_LINE)) for _ in range(LINES)]


class Updates:
    """Every committed (word, count) of the output topic, in offset order, read by one
    read_committed consumer that stays up across the broker's restart (assigned, not subscribed: a
    group's rebalance after the restart could send it back to the start)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.by_word: dict[str, list[int]] = defaultdict(list)
        self.total = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            m = self.consumer.poll(0.2)
            if m is None or m.error():
                continue
            (count,) = struct.unpack(">q", m.value())
            with self.lock:
                self.by_word[m.key().decode()].append(count)
                self.total += 1

    def wait(self, what: str, ok: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if ok():
                    return
            time.sleep(0.05)
        with self.lock:
            finals = {w: c[-1] for w, c in self.by_word.items()}
        pytest.fail(f"{what} not reached in {timeout:.0f}s: {self.total} updates, last counts {finals}")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


class WordCountApp:
    """WordCountEos.java (Kafka Streams 4.3.1) as a process, its output lines kept by a thread."""

    def __init__(self, workdir: Path, args: list[str]) -> None:
        classes = compile_java(
            workdir / "classes", STREAMS_JARS, ROOT / "compat_tests" / "java" / "WordCountEos.java"
        )
        self.proc = subprocess.Popen(
            [java_executable(), *JVM, "-cp", f"{classes}:{java_classpath(STREAMS_JARS)}", "WordCountEos", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.out: list[str] = []
        stdout = self.proc.stdout
        assert stdout is not None
        self._reader = threading.Thread(
            target=lambda: self.out.extend(iter(stdout.readline, "")), daemon=True
        )
        self._reader.start()

    def stop(self) -> None:
        """Closing stdin asks the app to close its Streams instance; killed if it does not in 30 s."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        self.proc.stdout.close()


def test_word_count_exactly_once_v2_survives_kill9(
    kcompat_broker_factory: BrokerFactory, tmp_path: Path, report_figure: ReportFigure
) -> None:
    started = time.monotonic()
    broker = kcompat_broker_factory(OVERRIDES)
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("lines", 2, 1), NewTopic("counts", 2, 1)]).values():
        f.result(20)
    lines = input_lines()
    expected = Counter(w for line in lines for w in line.split())
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i, line in enumerate(lines):
        producer.produce("lines", key=b"%d" % i, value=line.encode())
    assert producer.flush(20) == 0

    app = WordCountApp(
        tmp_path, [bs, "wc-eos", "lines", "counts", str(tmp_path / "streams-state"), str(MILLIS_PER_WORD)]
    )
    updates = Updates(bs, "counts", 2)
    try:
        total = sum(expected.values())
        # Kill once a good part, but not all, of the output is committed.
        updates.wait("a quarter of the output", lambda: updates.total >= total // 4, 60)
        with updates.lock:
            at_kill = updates.total
        broker.kill()
        broker.restart(clean=False)
        updates.wait("the final counts",
                     lambda: all(updates.by_word.get(w, [0])[-1] >= n for w, n in expected.items()), 90)  # fmt: skip
        # Streams has committed the end of its input: nothing is left to re-process, so no update
        # can come after this one.
        check = Consumer({"bootstrap.servers": bs, "group.id": "wc-eos"})
        try:
            deadline = time.monotonic() + 30
            parts = [TopicPartition("lines", p) for p in (0, 1)]
            input_ends = [check.get_watermark_offsets(tp, 10)[1] for tp in parts]
            while [t.offset for t in check.committed(parts, 10)] != input_ends:
                assert time.monotonic() < deadline, "Streams never committed the end of its input"
                time.sleep(0.1)
        finally:
            check.close()
    finally:
        updates.close()
        app.stop()
    events = [json.loads(x) for x in app.out if x.startswith("{")]
    assert at_kill < total * 0.9, (
        f"the kill came as Streams was finishing ({at_kill} of {total}): too little tested"
    )
    for word, n in expected.items():
        assert updates.by_word[word] == list(range(1, n + 1)), (word, updates.by_word[word][:50], events)
    assert set(updates.by_word) == set(expected)
    assert {"state": "RUNNING", "from": "REBALANCING"} in events, app.out[-20:]
    ends = Consumer({"bootstrap.servers": bs, "group.id": "ends"})
    log_end = sum(ends.get_watermark_offsets(TopicPartition("counts", p), 10)[1] for p in (0, 1))
    ends.close()
    errors = [e["error"] for e in events if "error" in e]
    report_figure("streams eos kill -9", f"{total} updates committed (log end {log_end}: with markers and "
                  f"aborted records), killed after {at_kill}, app errors {errors}, {time.monotonic() - started:.1f}s")  # fmt: skip
