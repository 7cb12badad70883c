"""Fault injection on `kcompat serve` (issue 27): rules set through the admin listener's /faults,
the `kcompat fault` CLI and the kcompat_faults fixture, seen by real clients (kafka-python,
confluent-kafka, the Java 4.3.1 client) and by raw frames where a fault's exact shape is checked.

One broker (with an admin listener) for the module; each test clears its rules (the fixture does).
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from support import ROOT, java_classpath, java_executable

from compat_tests.groups_members import JVM, KAFKA_JARS, compile_java
from kcompat.fault_client import FaultApiError, Faults
from kcompat.testing import TEST_DEFAULTS, Broker, api_versions_ready, free_port, recv_exact
from kcompat.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("faults")
    b = Broker(
        base / "data", base / "broker.log", {**TEST_DEFAULTS, "admin.listener": f"127.0.0.1:{free_port()}"}
    )
    b.start()
    yield b
    b.stop()


@pytest.fixture
def faults(broker: Broker, kcompat_faults: Callable[..., Faults]) -> Faults:
    f = kcompat_faults(broker)
    f.clear()
    return f


def topic_name() -> str:
    return f"faults-{uuid.uuid4().hex[:8]}"


def consume_all(broker: Broker, topic: str, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000
    )
    consumer.assign([TopicPartition(topic, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(values) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values += [r.value for r in records]
    consumer.close()
    return values


# -- raw frames: the exact shape of each fault -------------------------------------------------------


class Raw:
    """One connection sending ApiVersions v3 (client id `client_id`) and reading the answers."""

    def __init__(self, broker: Broker, client_id: str) -> None:
        self.sock = socket.create_connection((broker.host, broker.port), timeout=5)
        self.client_id = client_id
        self.correlation = 0

    def send(self) -> int:
        self.correlation += 1
        body = {"client_software_name": "raw", "client_software_version": "1"}
        self.sock.sendall(encode_request(18, 3, self.correlation, body, client_id=self.client_id))
        return self.correlation

    def answer(self, timeout: float = 5.0) -> tuple[int, Any] | None:
        """(correlation id, body), or None when nothing came within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
        except TimeoutError:
            return None
        return decode_response(18, 3, recv_exact(self.sock, size))

    def close(self) -> None:
        self.sock.close()


def test_error_delay_duplicate_corrupt_blackhole_on_the_wire(broker: Broker, faults: Faults) -> None:
    raw = Raw(broker, "raw-shapes")
    faults.add(
        "error",
        api="ApiVersions",
        client_id="raw-shapes",
        error="CLUSTER_AUTHORIZATION_FAILED",
        trigger="once",
    )
    sent = raw.send()
    answer = raw.answer()
    assert answer is not None and answer[0] == sent and answer[1].error_code == 31

    faults.clear()
    faults.add("duplicate", api="ApiVersions", client_id="raw-shapes", trigger="once")
    sent = raw.send()
    first, second = raw.answer(), raw.answer()
    assert first is not None and second is not None and first[0] == second[0] == sent

    faults.add("corrupt", api="ApiVersions", client_id="raw-shapes", trigger="once")
    sent = raw.send()
    answer = raw.answer()
    assert answer is not None and answer[0] != sent and answer[1].error_code == 0  # only the id is wrong

    faults.add("delay", api="ApiVersions", client_id="raw-shapes", delay_ms=600, trigger="once")
    started = time.monotonic()
    raw.send()
    assert raw.answer() is not None
    assert time.monotonic() - started >= 0.6

    faults.add("throttle", api="ApiVersions", client_id="raw-shapes", bytes_per_second=1000, trigger="once")
    started = time.monotonic()
    raw.send()
    answer = raw.answer()
    assert answer is not None and time.monotonic() - started >= 0.2  # an ApiVersions answer is some 500 bytes

    rule = faults.add("blackhole", api="ApiVersions", client_id="raw-shapes", trigger="once")
    raw.send()
    assert raw.answer(timeout=1.0) is None
    assert faults.fired(rule) == 1
    raw.close()
    assert api_versions_ready(broker.host, broker.port)  # everyone else is served


def test_partition_cuts_one_client_only(broker: Broker, faults: Faults) -> None:
    faults.add("partition", client_id="cut-off", broker=1)
    cut, other = Raw(broker, "cut-off"), Raw(broker, "someone-else")
    cut.send()
    other.send()
    assert other.answer() is not None
    assert cut.answer(timeout=1.0) is None
    cut.close()
    other.close()


def test_drop_closes_the_connection(broker: Broker, faults: Faults) -> None:
    faults.add("drop", api="ApiVersions", client_id="raw-drop", trigger="once")
    raw = Raw(broker, "raw-drop")
    raw.send()
    raw.sock.settimeout(5)
    assert raw.sock.recv(1) == b""
    raw.close()


def pattern(broker: Broker, n: int = 40) -> list[bool]:
    raw = Raw(broker, "raw-p")
    out = []
    for _ in range(n):
        raw.send()
        answer = raw.answer()
        assert answer is not None
        out.append(answer[1].error_code != 0)
    raw.close()
    return out


def test_probability_is_reproducible_with_a_seed(broker: Broker, faults: Faults) -> None:
    def with_seed(seed: int) -> list[bool]:
        faults.clear()
        faults.add(
            "error", api="ApiVersions", client_id="raw-p", error=7, trigger={"probability": 0.4, "seed": seed}
        )
        return pattern(broker)

    first, again, other = with_seed(11), with_seed(11), with_seed(12)
    assert first == again
    assert first != other
    assert 0 < sum(first) < 40


# -- real clients ---------------------------------------------------------------------------------


def test_kafka_python_retries_not_leader_without_loss(broker: Broker, faults: Faults) -> None:
    topic = topic_name()
    rule = faults.add(
        "error", api="Produce", topic=topic, error="NOT_LEADER_OR_FOLLOWER", trigger={"times": 2}
    )
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=5, retry_backoff_ms=50)
    for i in range(20):
        producer.send(topic, f"v{i}".encode(), partition=0).get(timeout=30)
    producer.close()
    assert faults.fired(rule) == 2
    assert consume_all(broker, topic, 20) == [f"v{i}".encode() for i in range(20)]


@pytest.mark.parametrize("kind", ["corrupt", "duplicate"])
def test_kafka_python_detects_a_bad_answer_and_retries_once(
    broker: Broker, faults: Faults, kind: str
) -> None:
    """A wrong correlation id (corrupt) or an answer with none waiting (duplicate): kafka-python
    raises CorrelationIdError, reconnects and retries; idempotence keeps the records once."""
    topic = topic_name()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=5, retry_backoff_ms=50)
    producer.send(topic, b"v0", partition=0).get(timeout=30)
    rule = faults.add(kind, api="Produce", topic=topic, trigger="once")
    offsets = [
        producer.send(topic, f"v{i}".encode(), partition=0).get(timeout=30).offset for i in range(1, 6)
    ]
    producer.close()
    assert faults.fired(rule) == 1
    assert offsets == [1, 2, 3, 4, 5]
    assert consume_all(broker, topic, 6) == [f"v{i}".encode() for i in range(6)]


def test_confluent_retries_not_leader_without_loss(broker: Broker, faults: Faults) -> None:
    topic = topic_name()
    rule = faults.add("error", api="Produce", topic=topic, error=6, trigger={"times": 3})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    errors: list[Any] = []
    for i in range(20):
        producer.produce(topic, f"v{i}".encode(), partition=0, on_delivery=lambda e, m: errors.append(e))
        producer.flush(30)
    assert errors == [None] * 20
    assert faults.fired(rule) == 3
    assert consume_all(broker, topic, 20) == [f"v{i}".encode() for i in range(20)]


def test_a_dropped_fetch_connection_is_survived(broker: Broker, faults: Faults) -> None:
    topic = topic_name()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    producer.flush(30)
    rule = faults.add("drop", api="Fetch", topic=topic, trigger={"times": 2})
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    consumer.close()
    assert faults.fired(rule) == 2
    assert values == [f"v{i}".encode() for i in range(10)]


def test_a_delay_shows_in_produce_latency(broker: Broker, faults: Faults) -> None:
    topic = topic_name()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, b"warm", partition=0)
    producer.flush(30)

    def latency() -> float:
        started = time.monotonic()
        producer.produce(topic, b"x", partition=0)
        assert producer.flush(30) == 0
        return time.monotonic() - started

    plain = latency()
    faults.add("delay", api="Produce", topic=topic, delay_ms=700, trigger="once")
    delayed = latency()
    assert plain < 0.5 <= 0.7 <= delayed, (plain, delayed)


# -- Java 4.3.1 ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def java_faults(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., dict[str, Any]]:
    classes = compile_java(
        tmp_path_factory.mktemp("fault-classes"),
        KAFKA_JARS,
        ROOT / "compat_tests" / "java" / "FaultClients.java",
    )

    def run(*args: str) -> dict[str, Any]:
        cp = f"{classes}:{java_classpath(KAFKA_JARS)}"
        cmd = [
            java_executable(),
            *JVM,
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
            "-cp",
            cp,
            "FaultClients",
            *args,
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
        assert lines, out.stdout[-2000:] + out.stderr[-2000:]
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    return run


def test_java_retries_not_leader_without_loss(
    broker: Broker, faults: Faults, java_faults: Callable[..., dict[str, Any]]
) -> None:
    topic = topic_name()
    rule = faults.add(
        "error", api="Produce", topic=topic, error="NOT_LEADER_OR_FOLLOWER", trigger={"times": 2}
    )
    result = java_faults("produce", broker.bootstrap, topic, "10")
    assert result == {"acked": 10, "offsets": list(range(10))}
    assert faults.fired(rule) == 2
    assert consume_all(broker, topic, 10) == [f"v{i}".encode() for i in range(10)]


def test_java_reports_invalid_txn_state_on_end_txn(
    broker: Broker, faults: Faults, java_faults: Callable[..., dict[str, Any]]
) -> None:
    topic, txn = topic_name(), f"tx-{uuid.uuid4().hex[:6]}"
    rule = faults.add("error", api="EndTxn", transactional_id=txn, error="INVALID_TXN_STATE", trigger="once")
    result = java_faults("txn", broker.bootstrap, topic, txn)
    assert result["error"].endswith("InvalidTxnStateException"), result
    assert faults.fired(rule) == 1


# -- the HTTP API, the CLI, hostile rules ------------------------------------------------------------


def cli(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "kcompat", "fault", *args, "--admin", str(broker.admin_url)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_cli_and_http_round_trip(broker: Broker, faults: Faults) -> None:
    added = cli(
        broker,
        "add",
        "error",
        "--error",
        "NOT_LEADER_OR_FOLLOWER",
        "--api",
        "Produce",
        "--topic",
        "t1",
        "--trigger",
        "nth=3",
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("added rule ")
    listed = json.loads(cli(broker, "list", "--format", "json").stdout)
    [rule] = listed["rules"]
    assert rule["match"] == {"api": ["Produce"], "topic": ["t1"]}
    assert rule["action"] == {"kind": "error", "when": "before", "error": "NOT_LEADER_OR_FOLLOWER"}
    assert rule["trigger"] == {"nth": 3} and rule["state"] == "armed" and rule["fired"] == 0
    assert faults.list() == listed["rules"]
    faults.replace(rule["id"], "delay", api="Fetch", delay_ms=5)
    assert faults.get(rule["id"])["action"]["kind"] == "delay"
    table = cli(broker, "list")
    assert "delay 5 ms" in table.stdout
    with urllib.request.urlopen(f"{broker.admin_url}/metrics", timeout=10) as page:
        metrics = page.read().decode()
    assert 'kcompat_fault_rules{state="armed"} 1.0' in metrics
    assert "kcompat_fault_fired_total" in metrics
    assert cli(broker, "clear").stdout.strip() == "cleared 1 rule(s)"
    assert faults.list() == []
    bad = cli(broker, "add", "error", "--error", "NO_SUCH_ERROR")
    assert bad.returncode == 2 and "action.error: 'NO_SUCH_ERROR'" in bad.stderr


def post(
    broker: Broker, body: bytes, path: str = "/faults", method: str = "POST"
) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(f"{broker.admin_url}{path}", data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"{not json", 400, "the body is not JSON"),
        (b"\xff\xfe", 400, "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "too deep"),
        (b'{"action": "explode"}', 400, "action.kind: 'explode'"),
        (b'{"action": {"kind": "delay", "delay_ms": 1e999}}', 400, "action.delay_ms"),
        (b'{"match": {"api": ["Produce", {"x": 1}]}, "action": "drop"}', 400, "match.api"),
        (b'[{"action": "drop"}, {"action": "nope"}]', 400, "rule 1: action.kind"),
        (b"[]", 400, "no rule given"),
        (b"null", 400, "a rule is a JSON object"),
        (b"1" * 5000, 400, "too large"),
        (b'{"action": "drop"}' + b" " * (1 << 20), 413, "over 1 MiB"),
    ],
)
def test_hostile_rules_get_a_clear_400(
    broker: Broker, faults: Faults, body: bytes, status: int, says: str
) -> None:
    code, answer = post(broker, body)
    assert code == status and says in answer["error"], answer
    assert faults.list() == []  # nothing half-added
    assert api_versions_ready(broker.host, broker.port)


def test_unknown_ids_and_methods(broker: Broker, faults: Faults) -> None:
    assert post(broker, b"", "/faults/99", "DELETE")[0] == 404
    assert post(broker, b"", "/faults/abc", "GET")[0] == 404
    assert post(broker, b"{}", "/faults", "PATCH")[0] == 405
    with pytest.raises(FaultApiError, match="no rule 42"):
        faults.replace(42, "drop")
    assert not Path(broker.data_dir / "faults").exists()  # rules live in memory only
