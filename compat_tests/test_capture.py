"""Traffic capture on `kcompat serve` (issue 27): captures started through the admin listener's
/captures, the `kcompat capture` CLI and the kcompat_capture fixture, while real clients
(confluent-kafka, the Java 4.3.1 client) produce and consume; replay into a second broker.

One broker (with an admin listener) for the module; each test's captures are removed by the fixture.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support import ROOT, java_classpath, java_executable

from compat_tests.groups_members import JVM, KAFKA_JARS, compile_java
from kcompat.capture_client import Captures
from kcompat.testing import TEST_DEFAULTS, Broker, free_port, wait_until

pytestmark = pytest.mark.timeout(180)
Row = tuple[int, int, str, str]  # partition, offset, key, value


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("capture")
    b = Broker(
        base / "data", base / "broker.log", {**TEST_DEFAULTS, "admin.listener": f"127.0.0.1:{free_port()}"}
    )
    b.start()
    yield b
    b.stop()


@pytest.fixture
def captures(broker: Broker, kcompat_capture: Callable[..., Captures]) -> Captures:
    return kcompat_capture(broker)


def new_topic(broker: Broker, partitions: int = 2) -> str:
    name = f"cap-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=20)
    return name


def ck_produce(broker: Broker, topic: str, n: int, client_id: str, flush_every: int = 0) -> list[Row]:
    acked: list[Row] = []

    def done(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()))

    p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % 2, on_delivery=done)
        if flush_every and i % flush_every == flush_every - 1:
            p.flush(30)  # one Produce request (or two) per round
    assert p.flush(30) == 0
    return sorted(acked)


def ck_consume(broker: Broker, topic: str, n: int, client_id: str) -> list[Row]:
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap, "client.id": client_id, "group.id": f"g-{client_id}",
         "enable.auto.commit": False}
    )  # fmt: skip
    c.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    got: list[Row] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.partition(), m.offset(), m.key().decode(), m.value().decode()))
    c.close()
    return sorted(got)


def rows(records: list[dict[str, Any]]) -> list[Row]:
    return sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in records)


def test_confluent_kafka_produce_and_consume_are_captured_exactly(broker: Broker, captures: Captures) -> None:
    topic, other = new_topic(broker), new_topic(broker)
    everything = captures.start(topic=topic)
    producer_only = captures.start(topic=topic, client_id="ck-producer")
    other_topic = captures.start(topic=other)

    produced = ck_produce(broker, topic, 30, "ck-producer")
    consumed = ck_consume(broker, topic, 30, "ck-consumer")
    assert consumed == produced and len(produced) == 30

    wait_until(lambda: len(captures.records(everything)) >= 60, "60 records captured", timeout=10)
    assert rows(captures.produced(everything, client_id="ck-producer")) == produced
    assert rows(captures.consumed(everything, client_id="ck-consumer")) == consumed
    assert len(captures.records(everything)) == 60  # nothing twice, nothing else
    mine = captures.records(producer_only)
    assert {r["direction"] for r in mine} == {"produce"} and rows(mine) == produced
    assert captures.records(other_topic) == []
    head = captures.get(everything)
    assert head["running"] and head["dropped"] == 0 and head["match"] == {"topic": [topic]}

    with urllib.request.urlopen(f"{broker.admin_url}/metrics", timeout=10) as page:
        metrics = page.read().decode()
    assert f'kcompat_capture_kept{{capture="{everything}",kind="records"}} 60.0' in metrics

    captures.stop(everything)
    ck_produce(broker, topic, 2, "ck-producer")
    assert len(captures.records(everything)) == 60  # stopped: nothing more kept
    assert not captures.get(everything)["running"]


@pytest.fixture(scope="module")
def java_clients(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., list[Row]]:
    classes = compile_java(
        tmp_path_factory.mktemp("capture-classes"),
        KAFKA_JARS,
        ROOT / "compat_tests" / "java" / "CaptureClients.java",
    )

    def run(*args: str) -> list[Row]:
        cmd = [java_executable(), *JVM, "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
               "-cp", f"{classes}:{java_classpath(KAFKA_JARS)}", "CaptureClients", *args]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        lines = [line for line in out.stdout.splitlines() if line.startswith("[")]
        assert lines, out.stdout[-2000:] + out.stderr[-2000:]
        return sorted(tuple(r) for r in json.loads(lines[-1]))  # type: ignore[misc]

    return run


def test_java_produce_and_consume_are_captured_by_client_id(
    broker: Broker, captures: Captures, java_clients: Callable[..., list[Row]]
) -> None:
    topic = new_topic(broker)
    by_producer = captures.start(client_id="java-producer")
    by_consumer = captures.start(client_id="java-consumer", topic=topic)

    produced = java_clients("produce", broker.bootstrap, topic, "20", "java-producer")
    consumed = java_clients("consume", broker.bootstrap, topic, "20", "java-consumer")
    assert consumed == produced and len(produced) == 20

    assert rows(captures.produced(by_producer)) == produced
    assert captures.consumed(by_producer) == []
    assert rows(captures.consumed(by_consumer)) == consumed
    assert captures.produced(by_consumer) == []
    assert {r["topic"] for r in captures.records(by_consumer)} == {topic}


def kcompat_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kcompat", *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def test_cli_show_then_replay_into_a_second_broker_keeps_each_partitions_order(
    broker: Broker, captures: Captures, tmp_path: Path
) -> None:
    topic = new_topic(broker)
    admin = broker.admin_url
    assert admin is not None
    started = kcompat_cli("capture", "start", "--topic", topic, "--admin", admin)
    assert started.returncode == 0, started.stderr
    cid = int(started.stdout.strip())
    captures.started.append(cid)  # type: ignore[attr-defined]  # the fixture removes it
    produced = ck_produce(broker, topic, 40, "to-replay")

    listed = kcompat_cli("capture", "list", "--admin", admin)
    assert listed.returncode == 0 and topic in listed.stdout
    shown = kcompat_cli("capture", "show", str(cid), "--format", "json", "--admin", admin)
    assert shown.returncode == 0, shown.stderr
    saved = tmp_path / "capture.json"
    saved.write_text(shown.stdout)
    assert rows(json.loads(shown.stdout)["records"]) == produced
    assert kcompat_cli("capture", "stop", str(cid), "--admin", admin).returncode == 0

    target = Broker(tmp_path / "target", tmp_path / "target.log", dict(TEST_DEFAULTS))
    target.start()
    try:
        replayed = kcompat_cli("capture", "replay", str(saved), "--bootstrap", target.bootstrap)
        assert replayed.returncode == 0, replayed.stderr
        assert f"{topic}: 40 records replayed" in replayed.stdout
        again = ck_consume(target, topic, 40, "replay-check")
    finally:
        target.stop()
    # The same records, each partition in the same order (a fresh topic: the same offsets too).
    assert again == produced


def call(broker: Broker, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(f"{broker.admin_url}{path}", data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


HOSTILE = [
    b"not json",
    b"\xff\xfe",
    b"[" * 100_000,
    b"[]",
    b'"records"',
    b'{"kind": "everything"}',
    b'{"match": {"api": "NoSuchApi"}}',
    b'{"match": {"topic": []}}',
    b'{"match": {"partition": "zero"}}',
    b'{"match": {"nonsense": 1}}',
    b'{"max_records": 0}',
    b'{"max_records": 10000000000}',
    b'{"max_records": true}',
    b'{"kind": "log", "file": "../../etc/passwd"}',
    b'{"kind": "log", "file": "/tmp/x"}',
    b'{"kind": "log", "file": "a/b"}',
    b'{"kind": "log"}',
    b'{"kind": "log", "file": "x.jsonl", "max_bytes": 1}',
    b'{"kind": "log", "file": "x.jsonl", "full": "yes"}',
    b'{"file": "x.jsonl"}',
    b'{"surprise": 1}',
]


@pytest.mark.parametrize("body", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_capture_requests_get_a_400(broker: Broker, body: bytes) -> None:
    status, answer = call(broker, "POST", "/captures", body)
    assert status == 400, answer
    assert isinstance(answer["error"], str) and "Traceback" not in answer["error"]
    assert call(broker, "GET", "/captures")[1]["captures"] == []


def test_unknown_ids_and_routes(broker: Broker) -> None:
    assert call(broker, "GET", "/captures/abc")[0] == 404
    assert call(broker, "GET", "/captures/99999")[0] == 404
    assert call(broker, "DELETE", "/captures/99999")[0] == 404
    assert call(broker, "POST", "/captures/99999/stop")[0] == 404
    assert call(broker, "GET", "/captures/1/bogus")[0] == 404
    assert call(broker, "GET", "/captures/1?since=-3")[0] in (400, 404)
    assert call(broker, "PUT", "/captures")[0] == 405


def test_protocol_log_is_capped_and_rotated(broker: Broker, captures: Captures) -> None:
    topic = new_topic(broker)
    cid = captures.start(kind="log", file="rotate.jsonl", max_bytes=2048, files=2, topic=topic)
    full = captures.start(kind="log", file="full.jsonl", topic=topic, api="Produce", full=True)
    path = Path(captures.get(cid)["path"])
    assert path.parent == broker.data_dir / "captures"
    ck_produce(broker, topic, 200, "rotating", flush_every=10)
    ck_consume(broker, topic, 200, "rotating-reader")
    wait_until(lambda: captures.get(cid)["rotations"] >= 3, "three rotations", timeout=10)
    captures.stop(cid)  # the queue is written out
    captures.stop(full)
    files = sorted(p.name for p in path.parent.iterdir() if p.name.startswith("rotate.jsonl"))
    assert files == ["rotate.jsonl", "rotate.jsonl.1", "rotate.jsonl.2"]
    apis = set()
    for f in files:
        data = (path.parent / f).read_bytes()
        assert len(data) <= 2048 or data.count(b"\n") == 1  # a line over the cap: a file of its own
        for line in data.splitlines():
            entry = json.loads(line)
            apis.add(entry["api"])
            assert entry["client_id"] in ("rotating", "rotating-reader")
            assert {"correlation_id", "principal", "peer", "broker", "elapsed_ms", "request"} <= entry.keys()
            if entry["api"] == "Produce":
                batch = entry["request"]["topic_data"][0]["partition_data"][0]["records"][0]
                assert batch["count"] >= 1 and batch["compression"] == "none" and "records" not in batch
                assert {
                    "base_offset",
                    "bytes",
                    "producer_id",
                    "producer_epoch",
                    "base_sequence",
                } <= batch.keys()
    assert "Produce" in apis and "Fetch" in apis
    head = captures.get(cid)
    assert head["written"] > 0 and head["dropped"] == 0
    # In full, every produced record is in the log, decoded, and the answer's offsets with it.
    keys = []
    for line in (path.parent / "full.jsonl").read_bytes().splitlines():
        entry = json.loads(line)
        assert entry["api"] == "Produce"
        for t in entry["request"]["topic_data"]:
            for p in t["partition_data"]:
                keys += [r["key"] for b in p["records"] for r in b["records"]]
    assert sorted(keys) == sorted(f"k{i}" for i in range(200))
