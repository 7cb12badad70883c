"""Virtual clusters on `kcompat proxy` (issue 27): two tenants, `a` and `b`, on one proxy process
in front of one `kcompat serve`, each on its own listeners with its names under its own prefix
upstream. Real clients (confluent-kafka, Java 4.3.1's tools) see only their tenant's topics,
groups and transactional ids; a tenant cannot name another's. One broker and one proxy for the
module.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from support import kafka_tool

from compat_tests.client_data import unique
from compat_tests.proxy.checks import (
    confluent_consume,
    confluent_produce,
    raw_frames,
    transaction_roundtrip,
)
from compat_tests.proxy.harness import HOST, free_port_base
from kcompat.testing import TEST_DEFAULTS, Broker, free_port, wait_until
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.timeout(300)


@dataclass
class Tenants:
    a: str  # bootstrap of virtual cluster a
    b: str
    a_port: int
    b_port: int
    log: Path


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("proxy-tenants-upstream")
    b = Broker(base / "data", base / "kcompat.log", overrides=dict(TEST_DEFAULTS))
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def tenants(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    a_port, b_port = free_port(), free_port()
    vc = "proxy.virtual.cluster."
    overrides = {
        "proxy.virtual.clusters": "a,b",
        f"{vc}a.bootstrap.listener": f"{HOST}:{a_port}",
        f"{vc}a.node.port.base": str(free_port_base()),
        f"{vc}b.bootstrap.listener": f"{HOST}:{b_port}",
        f"{vc}b.node.port.base": str(free_port_base()),
        f"{vc}b.prefix": "tenant-b-",
    }
    log_path = tmp_path_factory.mktemp("proxy-tenants") / "proxy.log"
    log = log_path.open("w")
    args = [arg for k, v in overrides.items() for arg in ("--override", f"{k}={v}")]
    process = subprocess.Popen(
        [sys.executable, "-m", "kcompat", "proxy", "--upstream", broker.bootstrap, *args],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_until(
            lambda: _answers(a_port) and _answers(b_port), "the virtual clusters' listeners", timeout=30
        )
        yield Tenants(f"{HOST}:{a_port}", f"{HOST}:{b_port}", a_port, b_port, log_path)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
        log.close()
    assert "Traceback" not in log_path.read_text()


def _answers(port: int) -> bool:
    try:
        return len(raw_frames(port, [_metadata(1, None)], 1, timeout=2)) == 1
    except OSError:
        return False


def _metadata(correlation: int, topics: list[str] | None) -> bytes:
    named = None if topics is None else [{"name": t} for t in topics]
    return encode_request(3, 12, correlation, {"topics": named, "allow_auto_topic_creation": False})


def topic_names(port: int) -> set[str]:
    (answer,) = raw_frames(port, [_metadata(1, None)], 1)
    return {t.name for t in decode_response(3, 12, answer)[1].topics}


def test_each_tenant_reads_and_writes_its_own_orders(broker: Broker, tenants: Tenants) -> None:
    topic = unique("orders")
    confluent_produce(tenants.a, topic, [f"a-{i}" for i in range(10)])
    confluent_produce(tenants.b, topic, [f"b-{i}" for i in range(7)])
    assert sorted(confluent_consume(tenants.a, topic, unique("ga"), 10)) == sorted(
        f"a-{i}" for i in range(10)
    )
    assert sorted(confluent_consume(tenants.b, topic, unique("gb"), 7)) == sorted(f"b-{i}" for i in range(7))
    upstream = topic_names(broker.port)
    assert {f"a.{topic}", f"tenant-b-{topic}"} <= upstream and topic not in upstream
    seen_by_a = topic_names(tenants.a_port)
    assert topic in seen_by_a
    assert not any(t.startswith(("a.", "tenant-b-", "__")) for t in seen_by_a), seen_by_a


def test_a_group_is_listed_and_committed_in_its_tenant_only(broker: Broker, tenants: Tenants) -> None:
    topic, group = unique("grouped"), unique("g")
    confluent_produce(tenants.a, topic, [f"v{i}" for i in range(5)])
    consumer = Consumer({"bootstrap.servers": tenants.a, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < 5 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        got += msg is not None and msg.error() is None
    consumer.commit(asynchronous=False)

    def groups(bootstrap: str) -> set[str]:
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client fails its futures
        listed = admin.list_consumer_groups().result(30)
        assert not listed.errors, listed.errors
        return {g.group_id for g in listed.valid}

    try:
        assert got == 5
        assert group in groups(tenants.a)
        assert f"a.{group}" in groups(broker.bootstrap)
        in_b = groups(tenants.b)
        assert group not in in_b and not any(g.startswith("a.") for g in in_b), in_b
    finally:
        consumer.close()
    # b naming a's group names tenant-b-<group>: no offsets; a sees its commit
    assert committed(tenants.b_port, group, topic) == -1
    assert committed(tenants.a_port, group, topic) == 5


def committed(port: int, group: str, topic: str) -> int:
    fetch = encode_request(9, 8, 1, {"groups": [{"group_id": group,
                                                 "topics": [{"name": topic, "partition_indexes": [0]}]}]})  # fmt: skip
    (answer,) = raw_frames(port, [fetch], 1)
    (named,) = decode_response(9, 8, answer)[1].groups
    assert named.group_id == group
    if not named.topics:
        return -1
    return int(named.topics[0].partitions[0].committed_offset)


def test_a_transaction_through_a_tenant(broker: Broker, tenants: Tenants) -> None:
    topic, txn = unique("txn-topic"), unique("tx")
    got = transaction_roundtrip(tenants.a, topic, txn)
    assert sorted(got) == sorted(f"committed-{i}" for i in range(10))
    direct = confluent_consume(broker.bootstrap, f"a.{topic}", unique("direct"), 10,
                               **{"isolation.level": "read_committed"})  # fmt: skip
    assert sorted(direct) == sorted(got)


def test_java_tools_per_tenant(tenants: Tenants) -> None:
    only_a, only_b, both = unique("only-a"), unique("only-b"), unique("both")
    for bootstrap, topic in ((tenants.a, only_a), (tenants.b, only_b), (tenants.a, both), (tenants.b, both)):
        kafka_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic)
    listed_a = set(kafka_tool("kafka-topics", "--bootstrap-server", tenants.a, "--list").stdout.split())
    listed_b = set(kafka_tool("kafka-topics", "--bootstrap-server", tenants.b, "--list").stdout.split())
    assert {only_a, both} <= listed_a and only_b not in listed_a
    assert {only_b, both} <= listed_b and only_a not in listed_b
    assert not any(t.startswith(("a.", "tenant-b-", "__")) for t in listed_a | listed_b)
    lines = [f"java-{i}" for i in range(8)]
    kafka_tool("kafka-console-producer", "--bootstrap-server", tenants.b, "--topic", both,
               input="\n".join(lines) + "\n")  # fmt: skip
    group = unique("jg")
    out = kafka_tool("kafka-console-consumer", "--bootstrap-server", tenants.b, "--topic", both, "--group", group,
                     "--command-property", "group.protocol=consumer", "--from-beginning",
                     "--max-messages", str(len(lines)), "--timeout-ms", "60000").stdout  # fmt: skip
    assert sorted(out.split()) == sorted(lines)
    described = kafka_tool(
        "kafka-consumer-groups", "--bootstrap-server", tenants.b, "--describe", "--group", group
    )
    assert both in described.stdout and "tenant-b-" not in described.stdout
    assert (
        "java-"
        not in kafka_tool(
            "kafka-console-consumer",
            "--bootstrap-server",
            tenants.a,
            "--topic",
            both,
            "--from-beginning",
            "--timeout-ms",
            "5000",
            check=False,
        ).stdout
    )  # a's `both` is another topic: empty


def test_a_tenant_cannot_name_another_tenants_topic(tenants: Tenants) -> None:
    secret = unique("secret")
    confluent_produce(tenants.b, secret, ["hidden"])
    for name in (secret, f"tenant-b-{secret}"):  # b's name, and the upstream's
        (answer,) = raw_frames(tenants.a_port, [_metadata(1, [name])], 1)
        (topic,) = decode_response(3, 12, answer)[1].topics
        assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name
    configs = encode_request(
        32, 4, 2, {"resources": [{"resource_type": 2, "resource_name": f"tenant-b-{secret}"}]}
    )
    (answer,) = raw_frames(tenants.a_port, [configs], 1)
    results = decode_response(32, 4, answer)[1].results
    assert results == [] or results[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    acls = encode_request(29, 3, 3, {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
                                     "permission_type": 1})  # fmt: skip
    (answer,) = raw_frames(tenants.a_port, [acls], 1)
    assert decode_response(29, 3, answer)[1].error_code == ErrorCode.SECURITY_DISABLED
