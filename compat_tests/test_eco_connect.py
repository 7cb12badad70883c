"""Kafka Connect 4.3.1 in distributed mode against `kcompat serve`, with exactly-once source
support (KIP-618), killed (kill -9) mid-stream and restarted.

One worker keeps its configs, offsets and status in topics on kcompat. A FileStreamSource reads a
file that a writer thread keeps appending to, into a one-partition topic; a FileStreamSink writes
the topic back out to a file. The worker is killed while lines flow and started again. Then:
- the topic, read with read_committed, holds every source line exactly once and in order: the
  source task's records and its file position commit in one transaction, so what the killed
  worker left open is aborted and re-read, never doubled;
- the sink file holds every line at least once, in order (the file sink is at-least-once: it may
  write again what it wrote before its last offset commit).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from eco_support import (
    JavaProcess,
    connect_classpath,
    http_json,
    module_broker,
    read_committed,
    wait_for,
    write_properties,
)

from kcompat.testing import Broker, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "eco-connect-lines"
LINES = 6000
CHUNK = 40  # lines the writer appends at once, every 40 ms: ~6 s of streaming
MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    # Prompt abort of what the killed worker's transactional producer left open.
    yield from module_broker(
        tmp_path_factory.mktemp("eco-connect"),
        **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"},
    )


def worker_properties(path: Path, bootstrap: str, rest_port: int) -> Path:
    return write_properties(
        path,
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eco-connect",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": "eco-connect-configs",
            "offset.storage.topic": "eco-connect-offsets",
            "status.storage.topic": "eco-connect-status",
            "config.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "offset.storage.partitions": 5,
            "status.storage.partitions": 1,
            "exactly.once.source.support": "enabled",
            "offset.flush.interval.ms": 1000,
            # Sink consumers see only committed records (the source writes transactions).
            "consumer.isolation.level": "read_committed",
            # The restarted sink's consumer joins its group without waiting out the killed one's
            # session (45 s by default).
            "consumer.session.timeout.ms": 6000,
            "consumer.heartbeat.interval.ms": 1000,
            "listeners": f"http://127.0.0.1:{rest_port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": rest_port,
            # The restarted worker gets the killed one's tasks without the default 5 minutes' wait.
            "scheduled.rebalance.max.delay.ms": 1000,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            # The file connectors have ServiceLoader manifests: no scan of the classpath.
            "plugin.discovery": "service_load",
        },
    )


def test_exactly_once_source_survives_worker_kill9(broker: Broker, tmp_path: Path) -> None:
    started = time.monotonic()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=30)

    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    source.write_text("")
    lines = [f"line-{i:05d}-{'x' * (i % 23)}" for i in range(LINES)]
    rest_port = free_port()
    url = f"http://127.0.0.1:{rest_port}"
    props = worker_properties(tmp_path / "worker.properties", broker.bootstrap, rest_port)
    worker = JavaProcess(MAIN, [str(props)], tmp_path / "worker.log", connect_classpath())
    worker.start()
    try:
        wait_for(
            "the worker's REST API", lambda: http_json("GET", f"{url}/connectors")[0] == 200, 90, worker.tail
        )
        for name, config in {
            "file-source": {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "tasks.max": "1",
                "file": str(source),
                "topic": TOPIC,
                "batch.size": "200",
                "exactly.once.support": "required",
                "transaction.boundary": "poll",
            },
            "file-sink": {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "tasks.max": "1",
                "file": str(sink),
                "topics": TOPIC,
            },
        }.items():
            status, body = http_json("PUT", f"{url}/connectors/{name}/config", config)
            assert status in (200, 201), f"PUT {name}: {status} {body}"

        def running(name: str) -> bool:
            status, body = http_json("GET", f"{url}/connectors/{name}/status")
            tasks = body.get("tasks", []) if status == 200 and isinstance(body, dict) else []
            return bool(tasks) and all(t.get("state") == "RUNNING" for t in tasks)

        for name in ("file-source", "file-sink"):
            wait_for(f"{name}'s task RUNNING", lambda n=name: running(n), 60, worker.tail)

        written = threading.Event()

        def write() -> None:
            with open(source, "a") as out:
                for i in range(0, LINES, CHUNK):
                    out.write("".join(f"{line}\n" for line in lines[i : i + CHUNK]))
                    out.flush()
                    time.sleep(0.04)
            written.set()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        # Kill once a good part of the file is in the topic and more is coming.
        wait_for(
            "a third of the lines in the sink",
            lambda: sink.exists() and _count(sink) >= LINES // 3,
            60,
            worker.tail,
        )
        assert not written.is_set(), "the writer finished before the kill: the kill would not be mid-stream"
        worker.kill()
        killed_at = _count(sink)
        worker.start()
        writer.join(timeout=60)
        assert written.is_set()

        wait_for(
            "every line in the sink file",
            lambda: _count(sink) >= LINES and _sink_complete(sink, lines),
            120,
            worker.tail,
        )
        records = read_committed(broker.bootstrap, TOPIC, 1, LINES, timeout=60)
        values = [value.decode() for _, _, value in records]
        assert len(values) == LINES, f"{len(values)} committed records for {LINES} lines"
        assert values == lines, _first_difference(values, lines)
        sink_lines = sink.read_text().splitlines()
        print(
            f"\neco-connect: {LINES} lines, killed with {killed_at} in the sink; topic exactly once; "
            f"sink {len(sink_lines)} lines ({len(sink_lines) - LINES} replayed); {time.monotonic() - started:.1f}s"
        )
    finally:
        worker.stop()


def _count(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _sink_complete(sink: Path, lines: list[str]) -> bool:
    """Every line at least once and in order: what the sink wrote again after the restart is a
    replay of a suffix it had written, so the first occurrences, in file order, are the source."""
    seen: set[str] = set()
    firsts = []
    for line in sink.read_text().splitlines():
        if line not in seen:
            seen.add(line)
            firsts.append(line)
    return firsts == lines


def _first_difference(got: list[str], want: list[str]) -> str:
    for i, (a, b) in enumerate(zip(got, want, strict=False)):
        if a != b:
            return f"record {i} is {a!r}, expected {b!r}"
    return f"{len(got)} records, expected {len(want)}"
