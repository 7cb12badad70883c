"""`kcompat proxy` in front of Apache Kafka 4.3.1 (one combined broker+controller node from the
jars of .deps, shared by the module, with one proxy): confluent-kafka, kafka-python and Kafka's
Java CLI tools produce, consume in classic and KIP-848 groups, run a transaction and administer
(kafka-metadata-quorum reads the controller's endpoints through DescribeQuorum: rewritten too);
the broker is restarted under the clients. Every answer the proxy sent is decoded and none names
an upstream address (the broker's or its controller listener's). Two tests start a proxy of their
own: one with fault rules (blackhole, delay, throttle), one as a virtual cluster (tenant); one runs
`kcompat proxy` as a process, whose 1 MB requests and answers stream through it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import kafka_tool

from benchmarks.brokers import START_TIMEOUT_S, KafkaBroker
from benchmarks.confluent_clients import create_topic
from benchmarks.metadata_probe import wait_for_metadata
from benchmarks.proxy import ProxyProcess
from compat_tests.client_data import unique
from compat_tests.proxy.checks import (
    assert_no_upstream_address,
    confluent_consume,
    confluent_produce,
    kafka_python_roundtrip,
    metadata_brokers,
    transaction_roundtrip,
)
from compat_tests.proxy.harness import HOST, ProxyThread

pytestmark = pytest.mark.timeout(300)


class RestartableKafka(KafkaBroker):
    """KafkaBroker whose restart keeps its port, properties and data (start() makes a new node)."""

    def restart(self) -> None:
        self.stop()
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        with open(self.log_path, "ab") as log:
            started = time.perf_counter()
            self.process = subprocess.Popen(
                self.command(self.workdir / "server.properties"), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=env, cwd=self.workdir,
            )  # fmt: skip
        wait_for_metadata(self.host, self.port, started, START_TIMEOUT_S, self.alive)


@pytest.fixture(scope="module")
def kafka_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableKafka]:
    why = KafkaBroker.available()
    if why is not None:
        pytest.skip(why)
    node = RestartableKafka(Path(tmp_path_factory.mktemp("proxy-kafka")))
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="module")
def proxy(kafka_node: RestartableKafka) -> Iterator[ProxyThread]:
    with ProxyThread(kafka_node.bootstrap) as p:
        yield p


def upstream_ports(node: KafkaBroker) -> set[int]:
    return {node.port, node.controller_port}


def test_metadata_names_the_proxy_endpoint(kafka_node: RestartableKafka, proxy: ProxyThread) -> None:
    assert metadata_brokers(proxy.bootstrap_port) == {(1, HOST, proxy.node_port(1))}
    assert metadata_brokers(proxy.node_port(1)) == {(1, HOST, proxy.node_port(1))}
    assert_no_upstream_address(proxy, upstream_ports(kafka_node))


def test_clients_produce_consume_and_transact(kafka_node: RestartableKafka, proxy: ProxyThread) -> None:
    topic = unique("proxy-kafka")
    kafka_tool(
        "kafka-topics",
        "--bootstrap-server",
        proxy.bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "3",
    )
    values = [f"c-{i}" for i in range(30)]
    confluent_produce(proxy.bootstrap, topic, values)
    assert sorted(confluent_consume(proxy.bootstrap, topic, unique("g-c"), 30)) == sorted(values)
    more = [f"kp-{i}" for i in range(20)]
    got = kafka_python_roundtrip(proxy.bootstrap, topic, more, unique("g-kp"), 50)
    assert sorted(got) == sorted(values + more)
    txn_topic = unique("proxy-kafka-txn")
    got = transaction_roundtrip(proxy.bootstrap, txn_topic, unique("txn"))
    assert sorted(got) == sorted(f"committed-{i}" for i in range(10))
    assert_no_upstream_address(proxy, upstream_ports(kafka_node))


def test_java_tools_classic_and_kip848_groups(kafka_node: RestartableKafka, proxy: ProxyThread) -> None:
    bs = proxy.bootstrap
    topic = unique("proxy-kafka-java")
    kafka_tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "2")
    lines = [f"java-{i}" for i in range(10)]
    kafka_tool(
        "kafka-console-producer", "--bootstrap-server", bs, "--topic", topic, input="\n".join(lines) + "\n"
    )
    for protocol in ("classic", "consumer"):
        group = unique(f"g-{protocol}")
        out = kafka_tool("kafka-console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group", group,
                         "--command-property", f"group.protocol={protocol}", "--from-beginning",
                         "--max-messages", str(len(lines)), "--timeout-ms", "60000").stdout  # fmt: skip
        assert sorted(out.split()) == sorted(lines), protocol
        described = kafka_tool(
            "kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", group
        )
        assert topic in described.stdout
    versions = kafka_tool("kafka-broker-api-versions", "--bootstrap-server", bs).stdout
    assert f"{HOST}:{proxy.node_port(1)} (id: 1" in versions, versions
    quorum = kafka_tool("kafka-metadata-quorum", "--bootstrap-server", bs, "describe", "--status").stdout
    assert f"{HOST}:{proxy.node_port(1)}" in quorum and str(kafka_node.controller_port) not in quorum, quorum
    assert proxy.capture.by_api[55] > 0  # DescribeQuorum answers were decoded and checked
    assert_no_upstream_address(proxy, upstream_ports(kafka_node))


def test_broker_restart_under_the_clients(kafka_node: RestartableKafka, proxy: ProxyThread) -> None:
    topic = unique("proxy-kafka-restart")
    kafka_tool(
        "kafka-topics",
        "--bootstrap-server",
        proxy.bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "2",
    )
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": proxy.bootstrap, "acks": "all",
                                         "enable.idempotence": True, "message.timeout.ms": 120000})  # fmt: skip
    acked: list[str] = []

    def delivered(err: object, msg: confluent_kafka.Message) -> None:
        assert err is None, err
        acked.append(msg.value().decode())

    for i in range(20):
        producer.produce(topic, f"before-{i}".encode(), on_delivery=delivered)
    assert producer.flush(60) == 0
    kafka_node.restart()
    for i in range(20):
        producer.produce(topic, f"after-{i}".encode(), on_delivery=delivered)
    assert producer.flush(120) == 0
    assert len(acked) == 40
    got = confluent_consume(proxy.bootstrap, topic, unique("g-restart"), 40)
    assert sorted(got) == sorted(acked)
    assert_no_upstream_address(proxy, upstream_ports(kafka_node))


def test_faults_on_the_proxy_in_front_of_kafka(kafka_node: RestartableKafka) -> None:
    """The waiting faults in front of Apache Kafka: a Produce answer black-holed after Kafka wrote
    it, the next Produce held, Fetch answers throttled; the idempotent producer's retry is not
    written twice and the consumer reads every record once."""
    from kcompat.fault_client import Faults

    with ProxyThread(kafka_node.bootstrap, **{"proxy.admin.listener": f"{HOST}:0"}) as faulty:
        assert faulty.admin_url is not None
        faults = Faults(faulty.admin_url)
        topic = unique("proxy-kafka-faults")
        lost = faults.add("blackhole", api="Produce", topic=topic, when="after", trigger={"nth": 2})
        held = faults.add("delay", api="Produce", topic=topic, delay_ms=500, trigger={"nth": 4})
        paced = faults.add("throttle", api="Fetch", bytes_per_second=200_000)
        values = [f"f-{i}" for i in range(12)]
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": faulty.bootstrap, "acks": "all",
                                             "enable.idempotence": True, "linger.ms": 0,
                                             "socket.timeout.ms": 3000})  # fmt: skip
        acked: list[str] = []
        started = time.monotonic()
        for v in values:  # one Produce each
            producer.produce(topic, v.encode(), on_delivery=lambda e, m: acked.append(m.value().decode()))
            assert producer.flush(30) == 0
        assert acked == values
        assert time.monotonic() - started >= 3.0  # the lost answer's request timed out
        assert (faults.fired(lost), faults.fired(held)) == (1, 1)
        got = confluent_consume(faulty.bootstrap, topic, unique("g-faults"), 12)
        assert faults.fired(paced) >= 1
        assert sorted(got) == sorted(values)
        assert sorted(confluent_consume(kafka_node.bootstrap, topic, unique("g-direct"), 12)) == sorted(
            values
        )
        assert_no_upstream_address(faulty, upstream_ports(kafka_node))


def test_a_virtual_cluster_in_front_of_kafka(kafka_node: RestartableKafka) -> None:
    """A tenant in front of Apache Kafka: its topic, consumer group and transactional id are
    stored under its prefix, and Kafka's own names (__consumer_offsets, ...) and other topics
    are not listed to it."""
    from kcompat.proxy.tenant import Tenant

    outside = unique("outside")
    kafka_tool("kafka-topics", "--bootstrap-server", kafka_node.bootstrap, "--create", "--topic", outside)
    with ProxyThread(kafka_node.bootstrap, tenant=Tenant("t1", "t1.")) as tenant:
        topic, group = unique("tenant"), unique("tg")
        kafka_tool("kafka-topics", "--bootstrap-server", tenant.bootstrap, "--create", "--topic", topic)
        values = [f"t-{i}" for i in range(10)]
        confluent_produce(tenant.bootstrap, topic, values)
        assert sorted(confluent_consume(tenant.bootstrap, topic, group, 10)) == sorted(values)
        txn_topic = unique("tenant-txn")
        got = transaction_roundtrip(tenant.bootstrap, txn_topic, unique("ttx"))
        assert sorted(got) == sorted(f"committed-{i}" for i in range(10))
        listed = set(
            kafka_tool("kafka-topics", "--bootstrap-server", tenant.bootstrap, "--list").stdout.split()
        )
        assert {topic, txn_topic} <= listed and outside not in listed
        assert not any(t.startswith(("t1.", "__")) for t in listed), listed
        groups = kafka_tool(
            "kafka-consumer-groups", "--bootstrap-server", tenant.bootstrap, "--list"
        ).stdout.split()
        assert group in groups and not any(g.startswith("t1.") for g in groups), groups
        assert_no_upstream_address(tenant, upstream_ports(kafka_node))
    upstream = set(
        kafka_tool("kafka-topics", "--bootstrap-server", kafka_node.bootstrap, "--list").stdout.split()
    )
    assert {f"t1.{topic}", f"t1.{txn_topic}", outside} <= upstream and topic not in upstream
    groups = kafka_tool(
        "kafka-consumer-groups", "--bootstrap-server", kafka_node.bootstrap, "--list"
    ).stdout.split()
    assert f"t1.{group}" in groups


def test_large_frames_stream_through_a_proxy_process(kafka_node: RestartableKafka, tmp_path: Path) -> None:
    """`kcompat proxy` as its users start it (no hooks: 1 MB Produce requests and Fetch answers
    stream through it): librdkafka and the Java consumer read every record once, byte for byte."""
    proxy = ProxyProcess(kafka_node.bootstrap, tmp_path / "proxy.log")
    proxy.start()
    try:
        topic = unique("proxy-kafka-stream")
        create_topic(proxy.bootstrap, topic)
        values = [f"{i:06d}-" + "x" * 1017 for i in range(8000)]  # 8 MB: batches and answers of ~1 MB
        confluent_produce(proxy.bootstrap, topic, values, **{"linger.ms": 100, "batch.size": 1_000_000})
        got = confluent_consume(proxy.bootstrap, topic, unique("g-stream"), len(values))
        assert len(got) == len(values) and sorted(got) == values
        out = kafka_tool("kafka-console-consumer", "--bootstrap-server", proxy.bootstrap, "--topic", topic,
                         "--from-beginning", "--max-messages", str(len(values)), "--timeout-ms", "60000").stdout  # fmt: skip
        assert sorted(out.split()) == values
    finally:
        proxy.stop()
