"""The Java client, kafka-clients 3.9 (the line Spark 4 uses) and 4.x, against `kcompat serve`:
produce/consume with every codec, offsets by time, idempotence across a restart, admin (topics,
configs, delete records), error cases.

The client side is compat_tests/java/ClientScenarios.java, compiled once per jar set and run as one
long-lived JVM per jar set that takes one command per stdin line (a JVM start costs about a second
on the 2 shared cores); a producer can stay open between commands, across a broker restart.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, java_classpath, java_executable

from compat_tests.client_data import BASE_TS, CODEC_IDS, CODECS, RECORDS, Rec, stored_codecs, unique
from compat_tests.fetch_log import DebugBroker, assert_incremental_session, fetch_lines
from compat_tests.groups_members import JVM, KAFKA_CLIENTS_39_JARS, KAFKA_JARS, compile_java
from kcompat.log.log_files import LOG_SUFFIX
from kcompat.testing import TEST_DEFAULTS
from kcompat.wire.record_batch import read_header, split_batches

pytestmark = pytest.mark.timeout(180)

SOURCE = ROOT / "compat_tests" / "java" / "ClientScenarios.java"
JAR_SETS = {"3.9": KAFKA_CLIENTS_39_JARS, "4.x": KAFKA_JARS}
QUIET = {"3.9": ["-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"], "4.x": []}


class JavaError(Exception):
    """A command the Java client failed: `type` is the exception's class, `message` its text."""

    def __init__(self, type_: str, message: str) -> None:
        super().__init__(f"{type_}: {message}")
        self.type = type_
        self.message = message


class JavaClient:
    """One ClientScenarios JVM in `repl` mode: call(cmd, **args) sends a command and returns its answer."""

    def __init__(self, classes: Path, jars: Path, log_path: Path, extra_jvm: list[str]) -> None:
        self.log_path = log_path
        self._log = log_path.open("w")
        cp = f"{classes}{os.pathsep}{java_classpath(jars)}"
        self.proc = subprocess.Popen([java_executable(), *JVM, *extra_jvm, "-cp", cp, "ClientScenarios", "repl"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True)  # fmt: skip
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.other: list[str] = []  # what the client's logger printed on stdout
        self.next_id = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            if isinstance(msg, dict) and "id" in msg:
                self.answers.put(msg)
            else:
                self.other.append(line.rstrip())

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, cmd: str, **args: Any) -> int:
        """Start a command without waiting for it (the JVM runs commands one at a time)."""
        assert self.proc.stdin is not None
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"id": self.next_id, "cmd": cmd, "args": args}) + "\n")
        self.proc.stdin.flush()
        return self.next_id

    def wait(self, request_id: int, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self.answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.proc.kill()  # the next test gets a fresh JVM
                raise AssertionError(
                    f"no answer from the Java client within {timeout}s\n{self.logs()}"
                ) from None
            if msg["id"] != request_id:
                continue  # the answer to a command an earlier failed test gave up on
            if "error" in msg:
                raise JavaError(msg["error"]["type"], msg["error"]["message"])
            return msg["ok"]

    def call(self, cmd: str, timeout: float = 60, **args: Any) -> Any:
        return self.wait(self.send(cmd, **args), timeout)

    def logs(self, lines: int = 40) -> str:
        self._log.flush()
        err = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return "--- stdout\n" + "\n".join(self.other[-lines:]) + "\n--- stderr\n" + "\n".join(err)

    def close(self) -> None:
        if self.alive:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            self.proc.wait()
        # The pipes are ours to close (the reader ends at EOF once the JVM has gone), not the GC's.
        self._reader.join(15)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not (pipe is self.proc.stdout and self._reader.is_alive()):
                pipe.close()
        self._log.close()


@pytest.fixture(scope="module")
def java_clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], JavaClient]]:
    """The JVM for a jar set, started on first use (and again if an earlier test had to kill it)."""
    base = tmp_path_factory.mktemp("java-clients")
    clients: dict[str, JavaClient] = {}

    def get(jars: str) -> JavaClient:
        client = clients.get(jars)
        if client is not None and not client.alive:
            client.close()  # killed by a test that gave up on it: release its pipes before the new JVM
        if client is None or not client.alive:
            classes = compile_java(base / jars, JAR_SETS[jars], SOURCE)
            client = clients[jars] = JavaClient(classes, JAR_SETS[jars], base / f"{jars}-{time.monotonic_ns()}.log",
                                                QUIET[jars])  # fmt: skip
        return client

    yield get
    for client in clients.values():
        client.close()


@pytest.fixture(params=list(JAR_SETS))
def java(request: pytest.FixtureRequest, java_clients: Callable[[str], JavaClient]) -> JavaClient:
    """The Java client at each version: "3.9" (kafka-clients 3.9.2) and "4.x" (4.3.1)."""
    return java_clients(request.param)


def as_json(r: Rec) -> dict[str, Any]:
    return {"key": None if r.key is None else r.key.hex(), "value": r.value.hex(),
            "headers": [[k, v.hex()] for k, v in r.headers], "timestamp": r.timestamp}  # fmt: skip


def as_rec(m: dict[str, Any]) -> Rec:
    return Rec(None if m["key"] is None else bytes.fromhex(m["key"]), bytes.fromhex(m["value"]),
               tuple((k, bytes.fromhex(v)) for k, v in m["headers"]), m["timestamp"])  # fmt: skip


def batch_headers(data_dir: Path, topic: str, partition: int = 0) -> list[Any]:
    found = []
    for seg in sorted((data_dir / f"{topic}-{partition}").glob("*" + LOG_SUFFIX)):
        data = seg.read_bytes()
        found += [read_header(data, pos) for pos, _ in split_batches(data)]
    return found


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(kcompat_session_broker: Any, java: JavaClient, codec: str) -> None:
    b = kcompat_session_broker
    topic = unique(f"java-{codec}")
    produced = java.call("produce", bootstrap=b.bootstrap, topic=topic, partition=0,
                         records=[as_json(r) for r in RECORDS],
                         config={"compression.type": codec, "linger.ms": 20, "acks": "all"})  # fmt: skip
    assert produced["results"] == [
        {"partition": 0, "offset": i, "timestamp": r.timestamp} for i, r in enumerate(RECORDS)
    ]
    got = java.call("consume", bootstrap=b.bootstrap, topic=topic, partition=0, **{"from": "earliest"},
                    max=len(RECORDS), timeout_ms=15_000, config={"check.crcs": True})  # fmt: skip
    assert got["start"] == 0
    assert [(m["offset"], as_rec(m), m["timestamp_type"]) for m in got["records"]] == [
        (i, r, "CREATE_TIME") for i, r in enumerate(RECORDS)
    ]
    # The Java producer compresses every batch when asked to, whatever the ratio.
    assert stored_codecs(b.data_dir, topic) == {CODEC_IDS[codec]}


def test_consume_from_earliest_latest_and_timestamp(kcompat_session_broker: Any, java: JavaClient) -> None:
    bs = kcompat_session_broker.bootstrap
    topic = unique("java-offsets")
    records = [{"key": None, "value": (b"%d" % i).hex(), "timestamp": BASE_TS + i * 1000} for i in range(10)]
    produced = java.call("produce", bootstrap=bs, topic=topic, partition=0, records=records)
    assert [r["offset"] for r in produced["results"]] == list(range(10))
    offsets = java.call(
        "offsets",
        bootstrap=bs,
        topic=topic,
        partition=0,
        timestamps=[BASE_TS + 4_500, BASE_TS, BASE_TS + 60_000],
    )
    assert offsets == {"beginning": 0, "end": 10, "for_times": [[5, BASE_TS + 5_000], [0, BASE_TS], None]}

    def consume(start: Any, n: int, timeout_ms: int = 15_000) -> tuple[int, list[bytes]]:
        got = java.call("consume", bootstrap=bs, topic=topic, partition=0, max=n, timeout_ms=timeout_ms,
                        **{"from": start})  # fmt: skip
        return got["start"], [bytes.fromhex(m["value"]) for m in got["records"]]

    assert consume("earliest", 10) == (0, [b"%d" % i for i in range(10)])
    assert consume({"timestamp": BASE_TS + 4_500}, 5) == (5, [b"%d" % i for i in range(5, 10)])
    assert consume(7, 3) == (7, [b"7", b"8", b"9"])
    assert consume("latest", 1, timeout_ms=1500) == (10, [])


def test_idempotent_producer_across_a_restart(kcompat_broker_factory: Any, java: JavaClient) -> None:
    """One producer instance: a send before the restart, one while the broker is down (the producer
    must retry it against the restarted broker), one after; each record is stored exactly once."""
    b = kcompat_broker_factory()
    topic = unique("java-idem")
    conf = {"enable.idempotence": True, "acks": "all", "linger.ms": 0, "retry.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500, "delivery.timeout.ms": 60_000, "request.timeout.ms": 10_000}  # fmt: skip

    def send(value: bytes) -> int:
        return java.send("produce", bootstrap=b.bootstrap, topic=topic, partition=0, producer="idem", keep=True,
                         records=[{"key": None, "value": value.hex()}], config=conf)  # fmt: skip

    assert [r["offset"] for r in java.wait(send(b"one"))["results"]] == [0]
    b.stop()
    pending = send(b"two")
    time.sleep(0.5)  # the producer tries the stopped broker before it comes back
    b.start()
    assert [r["offset"] for r in java.wait(pending)["results"]] == [1]
    b.restart()
    assert [r["offset"] for r in java.wait(send(b"three"))["results"]] == [2]
    java.call("close_producer", producer="idem")

    got = java.call("consume", bootstrap=b.bootstrap, topic=topic, partition=0, max=4, timeout_ms=3000,
                    **{"from": "earliest"})  # fmt: skip
    assert [(m["offset"], bytes.fromhex(m["value"])) for m in got["records"]] == [
        (0, b"one"),
        (1, b"two"),
        (2, b"three"),
    ]
    batches = batch_headers(b.data_dir, topic)
    assert [(h.base_offset, h.base_sequence) for h in batches] == [(0, 0), (1, 1), (2, 2)]
    assert len({(h.producer_id, h.producer_epoch) for h in batches}) == 1 and batches[0].producer_id >= 0


def test_admin_topics_configs_and_delete_records(kcompat_session_broker: Any, java: JavaClient) -> None:
    bs = kcompat_session_broker.bootstrap
    topic = unique("java-admin")
    java.call("create_topic", bootstrap=bs, topic=topic, partitions=2, configs={"retention.ms": "3600000"})
    with pytest.raises(JavaError) as exc:
        java.call("create_topic", bootstrap=bs, topic=topic, partitions=1)
    assert exc.value.type == "TopicExistsException"
    described = java.call("describe_topic", bootstrap=bs, topic=topic)
    assert described["name"] == topic and not described["internal"]
    assert [(p["partition"], p["replicas"]) for p in described["partitions"]] == [(0, 1), (1, 1)]
    assert topic in java.call("list_topics", bootstrap=bs)["topics"]

    java.call("alter_configs", bootstrap=bs, topic=topic,
              ops=[["SET", "retention.ms", "7200000"], ["APPEND", "cleanup.policy", "compact"]])  # fmt: skip
    cfg = java.call("describe_configs", bootstrap=bs, type="TOPIC", name=topic)
    assert cfg["retention.ms"] == {
        "value": "7200000",
        "default": False,
        "source": "DYNAMIC_TOPIC_CONFIG",
        "read_only": False,
    }
    assert cfg["cleanup.policy"]["value"] == "delete,compact"
    assert cfg["segment.bytes"]["default"] and cfg["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    java.call("alter_configs", bootstrap=bs, topic=topic, ops=[["DELETE", "retention.ms", ""]])
    assert (
        java.call("describe_configs", bootstrap=bs, type="TOPIC", name=topic)["retention.ms"]["value"]
        == "604800000"
    )
    broker_cfg = java.call("describe_configs", bootstrap=bs, type="BROKER", name="1")
    assert broker_cfg["num.partitions"]["value"] == "1"

    java.call("create_partitions", bootstrap=bs, topic=topic, total=3)
    assert len(java.call("describe_topic", bootstrap=bs, topic=topic)["partitions"]) == 3

    # Keyed: the topic is compacted now, and a compacted topic refuses records without a key.
    records = [{"key": (b"k%d" % i).hex(), "value": (b"%d" % i).hex()} for i in range(6)]
    assert [
        r["offset"]
        for r in java.call("produce", bootstrap=bs, topic=topic, partition=0, records=records)["results"]
    ] == list(range(6))
    assert java.call("delete_records", bootstrap=bs, topic=topic, partition=0, before=4) == {
        "low_watermark": 4
    }
    offsets = java.call("offsets", bootstrap=bs, topic=topic, partition=0)
    assert (offsets["beginning"], offsets["end"]) == (4, 6)
    got = java.call(
        "consume", bootstrap=bs, topic=topic, partition=0, max=2, timeout_ms=15_000, **{"from": "earliest"}
    )
    assert (got["start"], [(m["offset"], m["value"]) for m in got["records"]]) == (
        4,
        [(4, b"4".hex()), (5, b"5".hex())],
    )

    java.call("delete_topic", bootstrap=bs, topic=topic)
    assert topic not in java.call("list_topics", bootstrap=bs)["topics"]
    with pytest.raises(JavaError) as exc:
        java.call("describe_topic", bootstrap=bs, topic=topic)
    assert exc.value.type == "UnknownTopicOrPartitionException"


def test_unknown_topic_with_auto_create_off(kcompat_broker_factory: Any, java: JavaClient) -> None:
    b = kcompat_broker_factory(auto_create_topics_enable=False)
    topic = unique("java-missing")
    produced = java.call("produce", bootstrap=b.bootstrap, topic=topic, records=[{"key": None, "value": "78"}],
                         config={"max.block.ms": 2000})  # fmt: skip
    # Kafka's producer waits for the topic in metadata, then gives up: the broker said it does not exist.
    (result,) = produced["results"]
    assert result["error"]["type"] == "TimeoutException"
    assert f"Topic {topic} not present in metadata after 2000 ms" in result["error"]["message"]
    # The consumer answers an empty list for a topic the broker does not know (Kafka 3.0 and later).
    assert java.call("partitions_for", bootstrap=b.bootstrap, topic=topic, timeout_ms=5000) == {
        "partitions": []
    }
    with pytest.raises(JavaError) as exc:
        java.call("describe_topic", bootstrap=b.bootstrap, topic=topic)
    assert exc.value.type == "UnknownTopicOrPartitionException"
    assert topic not in java.call("list_topics", bootstrap=b.bootstrap)["topics"]


def test_record_over_message_max_bytes(kcompat_broker_factory: Any, java: JavaClient) -> None:
    b = kcompat_broker_factory(message_max_bytes=2000)
    topic = unique("java-big")
    java.call("create_topic", bootstrap=b.bootstrap, topic=topic, partitions=1)
    # "each": the small record gets its own batch, so it is not refused along with the big one.
    produced = java.call("produce", bootstrap=b.bootstrap, topic=topic, partition=0, each=True,
                         records=[{"key": None, "value": (b"x" * 10_000).hex()}, {"key": None, "value": b"small".hex()}],
                         config={"max.request.size": 1_000_000, "retries": 0})  # fmt: skip
    big, small = produced["results"]
    assert big["error"]["type"] == "RecordTooLargeException", big
    assert small == {"partition": 0, "offset": 0, "timestamp": small["timestamp"]}
    got = java.call(
        "consume",
        bootstrap=b.bootstrap,
        topic=topic,
        partition=0,
        max=2,
        timeout_ms=2000,
        **{"from": "earliest"},
    )
    assert [bytes.fromhex(m["value"]) for m in got["records"]] == [b"small"]


def test_consumer_uses_incremental_fetch_sessions(tmp_path: Path, java: JavaClient) -> None:
    """The Java consumer reading 4 partitions opens a fetch session with one full fetch and then
    sends incremental fetches naming fewer partitions, answered with only what changed; every
    record is read. The broker's DEBUG line per Fetch gives the counts."""
    broker = DebugBroker(tmp_path / "data", tmp_path / "kcompat.log", dict(TEST_DEFAULTS))
    broker.start()
    try:
        topic, n = unique("sessions"), 4
        java.call("create_topic", bootstrap=broker.bootstrap, topic=topic, partitions=n)
        sent = {(p, i): f"p{p}-{i}".encode().hex() for p in range(n) for i in range(25)}
        for p in range(n):
            out = java.call("produce", bootstrap=broker.bootstrap, topic=topic, partition=p,
                            records=[{"key": None, "value": sent[(p, i)]} for i in range(25)])  # fmt: skip
            assert all("error" not in r for r in out["results"])
        got = java.call("consume_partitions", bootstrap=broker.bootstrap, topic=topic, partitions=list(range(n)),
                        max=len(sent), timeout_ms=30_000, linger_ms=2_000)["records"]  # fmt: skip
        assert sorted((p, off, v) for p, off, v in got) == sorted((p, i, v) for (p, i), v in sent.items())
        assert_incremental_session(fetch_lines(broker), n)
    finally:
        broker.stop()


def test_record_errors_name_the_bad_records(kcompat_broker_factory: Any, java: JavaClient) -> None:
    """KIP-467: a keyless record sent to a compacted topic fails its batch; the Java producer reports
    Kafka's message on the bad record and a batch-mate error on the others. A timestamp two hours
    ahead is INVALID_TIMESTAMP."""
    b = kcompat_broker_factory()
    topic = unique("java-compacted")
    java.call(
        "create_topic",
        bootstrap=b.bootstrap,
        topic=topic,
        partitions=1,
        configs={"cleanup.policy": "compact"},
    )
    records = [{"key": k, "value": b"v".hex()} for k in (b"a".hex(), None, b"b".hex())]
    produced = java.call("produce", bootstrap=b.bootstrap, topic=topic, partition=0, records=records,
                         config={"linger.ms": 200, "retries": 0})  # fmt: skip
    first, bad, last = produced["results"]
    assert bad["error"] == {
        "type": "InvalidRecordException",
        "message": f"Compacted topic cannot accept message without key in topic partition {topic}-0",
    }
    for mate in (first, last):
        assert mate["error"] == {  # (sic: the client's wording)
            "type": "KafkaException",
            "message": "Failed to append record because it was part of a batch which had one more more invalid records",
        }
    future = int(time.time() * 1000) + 2 * 3_600_000
    produced = java.call("produce", bootstrap=b.bootstrap, topic=topic, partition=0, config={"retries": 0},
                         records=[{"key": b"k".hex(), "value": b"v".hex(), "timestamp": future}])  # fmt: skip
    (late,) = produced["results"]
    assert late["error"]["type"] == "InvalidTimestampException", late
    assert f"Timestamp {future} of message with offset 0 is out of range" in late["error"]["message"]
    got = java.call("consume", bootstrap=b.bootstrap, topic=topic, partition=0, max=1, timeout_ms=1000,
                    **{"from": "earliest"})  # fmt: skip
    assert got["records"] == []  # nothing of either batch was written


def test_every_client_sees_the_same_metadata_of_many_partitions(
    kcompat_session_broker: Any, java: JavaClient
) -> None:
    """Metadata and DescribeTopicPartitions splice each topic's entry encoded once (per api version):
    librdkafka, kafka-python and Java's admin (DescribeTopicPartitions) and consumer (Metadata) must
    each read every partition alike, before and after partitions are added."""
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    from kafka import KafkaAdminClient

    bs = kcompat_session_broker.bootstrap
    topic = unique("md-many")
    confluent = AdminClient({"bootstrap.servers": bs})
    confluent.create_topics([NewTopic(topic, 60, 1)])[topic].result(30)
    kp = KafkaAdminClient(bootstrap_servers=bs)
    try:
        for count in (60, 90):
            md = confluent.list_topics(timeout=10)
            (node,) = md.brokers
            seen = {p.id: (p.leader, p.replicas, p.isrs) for p in md.topics[topic].partitions.values()}
            assert seen == {p: (node, [node], [node]) for p in range(count)}
            (described,) = kp.describe_topics([topic])
            assert {
                p["partition_index"]: (p["leader_id"], p["replica_nodes"], p["isr_nodes"])
                for p in described["partitions"]
            } == seen
            assert len(kp.list_topics()) == len(md.topics)
            java_view = java.call("describe_topic", bootstrap=bs, topic=topic)["partitions"]
            assert sorted((p["partition"], p["leader"], p["replicas"]) for p in java_view) == [
                (p, node, 1) for p in range(count)
            ]
            assert sorted(
                java.call("partitions_for", bootstrap=bs, topic=topic, timeout_ms=5000)["partitions"]
            ) == list(range(count))
            if count == 60:
                confluent.create_partitions([NewPartitions(topic, 90)])[topic].result(30)
    finally:
        kp.close()
