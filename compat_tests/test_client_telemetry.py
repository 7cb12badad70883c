"""Client telemetry (KIP-714) with real Java 4.3.1 clients against a real `kcompat serve`: without a
subscription a client gets the empty one and pushes nothing; with one set through Kafka 4.3.1's
kafka-configs, a producer and a consumer (enable.metrics.push defaults to true) push their metrics,
which show on /metrics and the console's /clients page; librdkafka pushes too. Bad input gets Kafka's answers: invalid
subscription configs, a push naming another subscription id, an oversized push, a payload that
is not OTLP, and the broker goes on serving."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families
from support import QUICK_JVM, kafka_tool, kafka_tool_command, log_has

from kcompat.client.connection import Connection
from kcompat.kafka_uuid import ZERO_UUID
from kcompat.testing import Broker, free_port, wait_until
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.get_telemetry_subscriptions import GET_TELEMETRY_SUBSCRIPTIONS
from kcompat.wire.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.messages.push_telemetry import PUSH_TELEMETRY

pytestmark = pytest.mark.timeout(180)

MAX_BYTES = 65_536  # telemetry.max.bytes: far above what a Java client pushes compressed
JAVA = "apache-kafka-java"
TOPIC = "pushed"

Samples = list[tuple[str, dict[str, str], float]]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("telemetry")
    b = Broker(base / "data", base / "broker.log", {"admin.listener": f"127.0.0.1:{free_port()}",
                                                     "telemetry.max.bytes": str(MAX_BYTES),
                                                     "group.initial.rebalance.delay.ms": "0",
                                                     "offsets.topic.num.partitions": "1"},
               python=sys.executable)  # fmt: skip
    b.start()
    yield b
    b.stop()


def get(broker: Broker, path: str) -> str:
    assert broker.admin_url is not None
    with urllib.request.urlopen(broker.admin_url + path, timeout=10) as resp:
        body: str = resp.read().decode()
        return body


def scrape(broker: Broker) -> Samples:
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(get(broker, "/metrics"))
            for s in f.samples]  # fmt: skip


def of_client(samples: Samples, name: str, client_id: str) -> dict[tuple[str, str], float]:
    """A client's samples of one family: {(metric, attributes): value} (pushes: {("", ""): n})."""
    return {(labels.get("metric", ""), labels.get("attributes", "")): v for n, labels, v in samples
            if n == name and labels["client_id"] == client_id and labels["client_software_name"] == JAVA}  # fmt: skip


def configs(broker: Broker, *args: str, check: bool = True) -> str:
    r = kafka_tool("kafka-configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "client-metrics",
                   *args, check=check)  # fmt: skip
    return r.stdout + r.stderr


def produce(broker: Broker, client_id: str, records: int) -> subprocess.Popen[str]:
    """A Java producer (kafka-producer-perf-test: 20 records a second) running in the background."""
    cmd = kafka_tool_command("kafka-producer-perf-test", "--topic", TOPIC, "--num-records", str(records),
                             "--throughput", "20", "--record-size", "100", "--command-property",
                             f"bootstrap.servers={broker.bootstrap}", f"client.id={client_id}",
                             jvm_opts=QUICK_JVM)  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def consume(broker: Broker, client_id: str, records: int) -> subprocess.Popen[str]:
    cmd = kafka_tool_command("kafka-console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", TOPIC,
                             "--from-beginning", "--max-messages", str(records), "--timeout-ms", "30000",
                             "--group", "telemetry", "--consumer-property", f"client.id={client_id}")  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def pushed_enough(broker: Broker) -> Samples | None:
    """/metrics once the producer pushed twice, after sending, and the consumer after fetching."""
    samples = scrape(broker)
    pushes = of_client(samples, "kcompat_client_telemetry_pushes_total", "prod1").get(("", ""), 0)
    pushed = of_client(samples, "kcompat_client_telemetry_value", "prod1")
    consumed = of_client(samples, "kcompat_client_telemetry_value", "cons1")
    sent = pushed.get(("org.apache.kafka.producer.topic.record.send.total", f"topic={TOPIC}"))
    fetched = any(m.startswith("org.apache.kafka.consumer.fetch.manager.") for m, _ in consumed)
    return samples if pushes >= 2 and sent is not None and fetched else None


def alter(conn: Connection, name: str, *settings: str) -> Any:
    """IncrementalAlterConfigs SET on a client-metrics resource; its result."""
    ops = [{"name": k, "config_operation": 0, "value": v} for k, _, v in (x.partition("=") for x in settings)]
    body = {
        "resources": [{"resource_type": 16, "resource_name": name, "configs": ops}],
        "validate_only": False,
    }
    _, resp = conn.request(INCREMENTAL_ALTER_CONFIGS.key, body, 1)
    return resp.responses[0]


def finish(proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"{proc.args}\n{out}\n{err}"


def test_java_clients_push_what_their_subscription_asks_for(broker: Broker) -> None:
    # No subscription: the producer asks (its instance is known, with its software name) and pushes
    # nothing. (It creates the topic, so that the next producer sends from its first second on.)
    finish(produce(broker, "quiet", 20))
    samples = scrape(broker)
    assert of_client(samples, "kcompat_client_telemetry_pushes_total", "quiet") == {("", ""): 0}
    assert of_client(samples, "kcompat_client_telemetry_value", "quiet") == {}

    out = configs(broker, "--alter", "--entity-name", "java", "--add-config",
                  "metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.],interval.ms=500,"
                  f"match=[client_software_name={JAVA}]")  # fmt: skip
    assert "Completed updating config for client-metric java." in out, out

    # A producer and a consumer reading what it sends, until both have pushed what is checked.
    producer = produce(broker, "prod1", 2000)  # 100 s at 20 records a second: stopped long before
    consumer = consume(broker, "cons1", 2000)
    try:
        samples = wait_until(lambda: pushed_enough(broker), "the clients' pushes", timeout=60, interval=0.5)
    finally:
        for proc in (producer, consumer):
            proc.terminate()
            proc.communicate(timeout=30)
    pushed = of_client(samples, "kcompat_client_telemetry_value", "prod1")
    # buffer.memory's default, exactly: the payload was decompressed and decoded right.
    assert pushed[("org.apache.kafka.producer.buffer.total.bytes", "")] == 33554432, sorted(pushed)
    consumed = of_client(samples, "kcompat_client_telemetry_value", "cons1")
    # Only what the subscription asks for (the clients filter by its prefixes).
    assert all(m.startswith("org.apache.kafka.consumer.") for m, _ in consumed)
    assert all(m.startswith("org.apache.kafka.producer.") for m, _ in pushed)
    page = get(broker, "/clients")
    assert "prod1" in page and "org.apache.kafka.producer.buffer.total.bytes" in page and JAVA in page


def test_bad_input_gets_kafkas_answers(broker: Broker) -> None:
    # A subscription Kafka refuses, with Kafka's reason, through kafka-configs; the other checks
    # (compared with Kafka's own in test_config_resources_kafka) through the wire, quicker.
    out = configs(
        broker, "--alter", "--entity-name", "bad", "--add-config", "match=[client_colour=red]", check=False
    )
    assert "InvalidConfigurationException: Illegal client matching pattern: client_colour=red" in out, out
    bad = {
        "interval.ms=50": (ErrorCode.INVALID_REQUEST, "Invalid value 50 for interval.ms"),
        "match=client_id=(": (ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id=("),
        "colour=red": (ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: colour"),
    }
    with Connection(broker.host, broker.port, client_id="admin") as admin:
        for config, (code, reason) in bad.items():
            result = alter(admin, "bad", config)
            assert result.error_code == code and reason in (result.error_message or ""), result
        assert alter(admin, "raw", "metrics=*", "interval.ms=1000", "match=client_id=raw").error_code == 0
    with Connection(broker.host, broker.port, client_id="raw") as conn:
        _, sub = conn.request(GET_TELEMETRY_SUBSCRIPTIONS.key, {"client_instance_id": ZERO_UUID}, 0)
        assert (sub.error_code, sub.requested_metrics, sub.push_interval_ms) == (0, ["*"], 1000)
        assert sub.telemetry_max_bytes == MAX_BYTES

        def push(**kw: object) -> int:
            body = {"client_instance_id": sub.client_instance_id, "subscription_id": sub.subscription_id,
                    "terminating": False, "compression_type": 0, "metrics": b""} | kw  # fmt: skip
            _, resp = conn.request(PUSH_TELEMETRY.key, body, 0)
            return int(resp.error_code)

        assert push(subscription_id=sub.subscription_id ^ 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert push() == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # within the 1 s interval
        time.sleep(1.05)
        assert push(metrics=os.urandom(MAX_BYTES + 1)) == ErrorCode.TELEMETRY_TOO_LARGE
        time.sleep(1.05)
        assert push(metrics=b"\x0a\xff\xff\x03 not OTLP") == ErrorCode.INVALID_RECORD
        time.sleep(1.05)
        assert push(compression_type=1, metrics=b"not gzip") == ErrorCode.INVALID_RECORD
        # The connection, and the broker, go on serving.
        _, meta = conn.request(METADATA.key, {"topics": None}, 12)
        assert [b.port for b in meta.brokers] == [broker.port]
    assert log_has(broker, "PushTelemetry from client raw")
    samples = scrape(broker)
    assert [v for n, _, v in samples if n == "kcompat_client_telemetry_invalid_payloads_total"] == [2.0]
    unknown = [
        v for n, _, v in samples if n == "kafka_server_client_metrics_unknown_subscription_request_total"
    ]
    assert unknown and unknown[0] >= 1


def test_librdkafka_pushes_too(broker: Broker) -> None:
    """confluent-kafka (librdkafka 2.5+ implements KIP-714) with its own subscription."""
    with Connection(broker.host, broker.port, client_id="admin") as admin:
        assert (
            alter(admin, "librdkafka", "metrics=*", "interval.ms=500", "match=client_id=rdk").error_code == 0
        )
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "rdk", "linger.ms": 5})

    def pushed() -> dict[tuple[str, str], float] | None:
        producer.produce(TOPIC, b"from librdkafka")
        producer.poll(0)
        samples = scrape(broker)
        values = {(labels["metric"], labels["attributes"]): v for n, labels, v in samples
                  if n == "kcompat_client_telemetry_value" and labels["client_id"] == "rdk"}  # fmt: skip
        return values if ("org.apache.kafka.producer.record.queue.time.max", "") in values else None

    try:
        values = wait_until(pushed, "librdkafka's push", timeout=30, interval=0.2)
    finally:
        assert producer.flush(10) == 0
    software = {labels["client_software_name"] for n, labels, _ in scrape(broker)
                if n == "kcompat_client_telemetry_pushes_total" and labels["client_id"] == "rdk"}  # fmt: skip
    assert software == {"confluent-kafka-python"}
    assert all(m.startswith("org.apache.kafka.producer.") for m, _ in values)
