"""Virtual clusters on `kcompat proxy` (issue 27): two tenants, `a` and `b`, on one proxy process
in front of one `kcompat serve`, each on its own listeners with its names under its own prefix
upstream. Real clients (confluent-kafka, Java 4.3.1's tools) see only their tenant's topics,
groups and transactional ids; a tenant cannot name another's, API by API (ACLs, configs, KIP-848
regex subscriptions, transactions, share groups, topics by id). One broker (with an authorizer,
the proxy its super user) and one proxy for the module.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from support import KAFKA_JARS, ROOT, java_classpath, java_executable, kafka_tool

from compat_tests.client_data import unique
from compat_tests.groups_members import JVM, compile_java
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
from kcompat.wire.records import Record, build_batch

pytestmark = pytest.mark.timeout(300)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


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
    authorizer = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}
    b = Broker(base / "data", base / "kcompat.log", overrides={**TEST_DEFAULTS, **authorizer})
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
    alter = encode_request(44, 1, 3, {"resources": [{"resource_type": 2, "resource_name": f"tenant-b-{secret}",
                                                     "configs": [{"name": "retention.ms", "config_operation": 0,
                                                                  "value": "1000"}]}]})  # fmt: skip
    (answer,) = raw_frames(tenants.a_port, [alter], 1)
    (altered,) = decode_response(44, 1, answer)[1].responses
    assert altered.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _acl_filter(**over: Any) -> dict[str, Any]:
    return {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1, **over}  # fmt: skip


def _acls(port: int) -> set[tuple[int, str, int]]:
    (answer,) = raw_frames(port, [encode_request(29, 3, 1, _acl_filter())], 1)
    body = decode_response(29, 3, answer)[1]
    assert body.error_code == 0, body.error_message
    return {(r.resource_type, r.resource_name, r.pattern_type) for r in body.resources}


def test_acls_per_tenant(broker: Broker, tenants: Tenants) -> None:
    """confluent's AdminClient creates ACLs through each tenant; each lists its own only, in its
    names (its LITERAL `*` is PREFIXED `a.` upstream); a delete through b leaves a's alone."""
    topic, group = unique("acl-topic"), unique("acl-g")
    read = (AclOperation.READ, AclPermissionType.ALLOW)
    a_bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:app", "*", *read),
        AclBinding(ResourceType.GROUP, group, ResourcePatternType.PREFIXED, "User:app", "*", *read),
        AclBinding(ResourceType.TRANSACTIONAL_ID, "*", ResourcePatternType.LITERAL, "User:app", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
    ]  # fmt: skip
    admin_a = AdminClient({"bootstrap.servers": tenants.a})
    admin_b = AdminClient({"bootstrap.servers": tenants.b})
    for future in admin_a.create_acls(a_bindings).values():
        future.result(30)
    b_binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:app", "*", *read)
    admin_b.create_acls([b_binding])[b_binding].result(30)
    assert {(2, topic, 3), (3, group, 4), (5, "*", 3)} <= _acls(tenants.a_port)
    assert not any(name.startswith(("a.", "tenant-b-")) for _, name, _ in _acls(tenants.a_port))
    in_b = _acls(tenants.b_port)
    assert (2, topic, 3) in in_b and group not in {n for _, n, _ in in_b} and (5, "*", 3) not in in_b
    upstream = _acls(broker.port)
    assert {(2, f"a.{topic}", 3), (3, f"a.{group}", 4), (5, "a.", 4), (2, f"tenant-b-{topic}", 3)} <= upstream
    # b deletes its `topic` ACLs: a's ACL on the same tenant name stays
    b_filter = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    deleted = admin_b.delete_acls([b_filter])[b_filter].result(30)
    assert [(d.name, d.resource_pattern_type) for d in deleted] == [(topic, ResourcePatternType.LITERAL)]
    upstream = _acls(broker.port)
    assert (2, f"a.{topic}", 3) in upstream and (2, f"tenant-b-{topic}", 3) not in upstream
    # a's ACLs beyond its names are answered here, never relayed
    created = encode_request(30, 3, 2, {"creations": [{"resource_type": 4, "resource_name": "kafka-cluster",
        "resource_pattern_type": 3, "principal": "User:app", "host": "*", "operation": 2, "permission_type": 3}]})  # fmt: skip
    deleted_all = encode_request(31, 3, 3, {"filters": [_acl_filter()]})
    create_answer, delete_answer = raw_frames(tenants.a_port, [created, deleted_all], 2)
    assert (
        decode_response(30, 3, create_answer)[1].results[0].error_code
        == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    assert decode_response(31, 3, delete_answer)[1].filter_results[0].error_code == ErrorCode.INVALID_REQUEST
    assert (2, f"tenant-b-{topic}", 3) not in _acls(broker.port) and (2, f"a.{topic}", 3) in _acls(
        broker.port
    )


def test_java_admin_mixed_acl_requests_through_a_tenant(
    broker: Broker, tenants: Tenants, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The Java Admin's one CreateAcls with a cluster ACL among topic and group ones, and one
    DeleteAcls with a filter without a name beside a named one: the proxy relays the tenant's
    entries and answers the others, each future with its own outcome."""
    topic, group = unique("mixed-acl"), unique("mixed-g")
    classes = compile_java(tmp_path_factory.mktemp("acl-java"), KAFKA_JARS,
                           ROOT / "compat_tests" / "java" / "TenantAcls.java")  # fmt: skip
    cmd = [java_executable(), *JVM, "-cp", f"{classes}:{java_classpath(KAFKA_JARS)}", "TenantAcls",
           tenants.a, topic, group]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout.splitlines()
    assert [line if " OK" in line else " ".join(line.split()[:3]) for line in out] == [
        "create CLUSTER ClusterAuthorizationException:",
        "create TOPIC OK",
        "create GROUP OK",
        "delete any InvalidRequestException:",
        "delete named OK 1",  # the topic ACL created above, relayed
    ], out
    assert "a virtual cluster grants ACLs on its topics" in out[0]
    upstream = _acls(broker.port)
    assert (3, f"a.{group}", 4) in upstream and (2, f"a.{topic}", 3) not in upstream
    assert not any(name == "kafka-cluster" and kind == 4 for kind, name, _ in upstream)


def test_configs_altered_and_described_per_tenant(broker: Broker, tenants: Tenants) -> None:
    topic = unique("cfg")
    admins = {b: AdminClient({"bootstrap.servers": b}) for b in (tenants.a, tenants.b, broker.bootstrap)}
    for bootstrap in (tenants.a, tenants.b):  # (a collected client fails its futures: kept in admins)
        admins[bootstrap].create_topics([NewTopic(topic, 1)])[topic].result(30)
    admin_a = admins[tenants.a]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "12345", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    admin_a.incremental_alter_configs([resource])[resource].result(30)

    def retention(bootstrap: str, name: str) -> str:
        admin = admins[bootstrap]
        described = ConfigResource(ConfigResource.Type.TOPIC, name)
        return str(admin.describe_configs([described])[described].result(30)["retention.ms"].value)

    assert retention(tenants.a, topic) == "12345"
    assert retention(tenants.b, topic) != "12345"  # b's own topic of that name
    assert retention(broker.bootstrap, f"a.{topic}") == "12345"


def test_a_kip848_regex_subscription_matches_the_tenants_topics_only(tenants: Tenants) -> None:
    stem = unique("rx")
    confluent_produce(tenants.a, f"{stem}-1", ["a-1", "a-2"])
    confluent_produce(tenants.b, f"{stem}-2", ["b-1"])
    got = confluent_consume(tenants.a, f"^{stem}-.*", unique("rg"), 2, **{"group.protocol": "consumer"})
    assert sorted(got) == ["a-1", "a-2"]
    got_b = confluent_consume(tenants.b, f"^{stem}-.*", unique("rg"), 1, **{"group.protocol": "consumer"})
    assert got_b == ["b-1"]


def test_transactions_listed_and_described_per_tenant(tenants: Tenants) -> None:
    topic, txn = unique("ltx-topic"), unique("ltx")
    assert len(transaction_roundtrip(tenants.a, topic, txn)) == 10
    listing = encode_request(
        66, 1, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
    )
    describe = encode_request(65, 0, 2, {"transactional_ids": [txn]})

    def seen(port: int) -> tuple[set[str], int]:
        listed, described = raw_frames(port, [listing, describe], 2)
        ids = {t.transactional_id for t in decode_response(66, 1, listed)[1].transaction_states}
        (state,) = decode_response(65, 0, described)[1].transaction_states
        return ids, state.error_code

    ids_a, error_a = seen(tenants.a_port)
    assert txn in ids_a and error_a == 0 and not any(i.startswith("a.") for i in ids_a)
    ids_b, error_b = seen(tenants.b_port)
    assert txn not in ids_b and not any(i.startswith("a.") for i in ids_b)
    assert error_b == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_a_tenant_cannot_reach_another_tenants_topic_by_id(broker: Broker, tenants: Tenants) -> None:
    """b's topic id, leaked to a: a's Produce v13, Fetch v17, ShareFetch and Metadata by that id
    are answered UNKNOWN_TOPIC_ID by the proxy, and b's topic holds b's record only."""
    topic = unique("by-id")
    confluent_produce(tenants.b, topic, ["b's"])
    (answer,) = raw_frames(broker.port, [_metadata(1, [f"tenant-b-{topic}"])], 1)
    (described,) = decode_response(3, 12, answer)[1].topics
    leaked = described.topic_id
    produce = encode_request(0, 13, 1, {"acks": -1, "timeout_ms": 5000, "topic_data": [{"topic_id": leaked,
        "partition_data": [{"index": 0, "records": _one_record()}]}]})  # fmt: skip
    fetch = encode_request(1, 17, 2, {"max_wait_ms": 0, "max_bytes": 1 << 20, "topics": [{"topic_id": leaked,
        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})  # fmt: skip
    share = encode_request(78, 1, 3, {"group_id": "sg", "member_id": "m", "share_session_epoch": 0,
        "topics": [{"topic_id": leaked, "partitions": [{"partition_index": 0}]}]})  # fmt: skip
    by_id = encode_request(3, 12, 4, {"topics": [{"name": None, "topic_id": leaked}],
                                      "allow_auto_topic_creation": False})  # fmt: skip
    produced, fetched, shared, metadata = raw_frames(tenants.a_port, [produce, fetch, share, by_id], 4)
    assert decode_response(0, 13, produced)[1].responses[0].partition_responses[0].error_code == 100
    assert decode_response(1, 17, fetched)[1].responses[0].partitions[0].error_code == 100
    assert decode_response(78, 1, shared)[1].error_code == 100
    assert decode_response(3, 12, metadata)[1].topics[0].error_code == 100
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("check")})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(f"tenant-b-{topic}", 0), 30) == (0, 1)
    finally:
        consumer.close()


def _one_record() -> bytes:
    return build_batch([Record(0, int(time.time() * 1000), None, b"a's")])


def _groups(port: int) -> dict[str, str]:
    """ListGroups v5 at `port`: group id -> type."""
    (answer,) = raw_frames(port, [encode_request(16, 5, 1, {"states_filter": [], "types_filter": []})], 1)
    return {g.group_id: g.group_type for g in decode_response(16, 5, answer)[1].groups}


def _share_offsets(port: int, group: str) -> Any:
    """DescribeShareGroupOffsets v1 of every topic-partition of `group` at `port`."""
    ask = encode_request(90, 1, 1, {"groups": [{"group_id": group, "topics": None}]})
    (answer,) = raw_frames(port, [ask], 1)
    (described,) = decode_response(90, 1, answer)[1].groups
    return described


def test_a_java_share_consumer_through_a_tenant(
    broker: Broker, tenants: Tenants, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Kafka 4.3.1's KafkaShareConsumer (explicit ACCEPT of each record) through tenant a reads
    every record once (share.auto.offset.reset=earliest set by kafka-configs through the tenant);
    upstream the group is `a.<group>`, a share group; tenant b sees neither the topic nor the group
    (ListGroups, DescribeShareGroupOffsets, kafka-share-groups --list) and cannot delete its
    offsets; kafka-share-groups --reset-offsets through a sets a's group's offsets."""
    topic, group, n = unique("shared"), unique("sg"), 30
    values = [f"s-{i}" for i in range(n)]
    confluent_produce(tenants.a, topic, values)
    kafka_tool("kafka-configs", "--bootstrap-server", tenants.a, "--alter", "--entity-type", "groups",
               "--entity-name", group, "--add-config", "share.auto.offset.reset=earliest")  # fmt: skip
    classes = compile_java(tmp_path_factory.mktemp("share-java"), KAFKA_JARS,
                           ROOT / "compat_tests" / "java" / "ShareConsumer.java")  # fmt: skip
    cmd = [java_executable(), *JVM, "-cp", f"{classes}:{java_classpath(KAFKA_JARS)}", "ShareConsumer",
           tenants.a, group, topic, "90"]  # fmt: skip
    java = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(java.stdout or []), daemon=True)
    reader.start()
    try:
        # acknowledged: the share-partition's start offset moves past every record
        def all_acknowledged() -> bool:
            described = _share_offsets(tenants.a_port, group)
            starts = [p.start_offset for t in described.topics for p in t.partitions]
            return described.error_code == 0 and starts == [n]

        wait_until(lambda: len(lines) >= n and all_acknowledged(), "every record acknowledged", timeout=90)
        assert java.poll() is None, "the Java share consumer ended early"
        (described,) = _share_offsets(tenants.a_port, group).topics
        assert described.topic_name == topic
    finally:
        java.terminate()
        java.wait(30)
        reader.join(10)
        if java.stdout is not None:
            java.stdout.close()
    got = sorted(line.split() for line in lines)
    assert got == sorted([v, "1"] for v in values)  # each record once, delivery count 1
    upstream = _groups(broker.port)
    assert upstream.get(f"a.{group}", "").lower() == "share" and group not in upstream
    assert group in _groups(tenants.a_port)
    in_b = _groups(tenants.b_port)
    assert group not in in_b and not any(g.startswith("a.") for g in in_b), in_b
    assert topic not in topic_names(tenants.b_port)
    seen_by_b = _share_offsets(tenants.b_port, group)  # tenant-b-<group>: no such share group
    assert seen_by_b.topics == [] and seen_by_b.error_code in (0, ErrorCode.GROUP_ID_NOT_FOUND)
    # b deleting "its" group's offsets names tenant-b-<group>: a's stay
    kafka_tool("kafka-share-groups", "--bootstrap-server", tenants.b, "--delete-offsets", "--group", group,
               "--topic", topic, check=False)  # fmt: skip
    assert [p.start_offset for t in _share_offsets(tenants.a_port, group).topics for p in t.partitions] == [n]
    # AlterShareGroupOffsets through a: a second group of a's, at offset 0 upstream; b's is another
    reset = kafka_tool("kafka-share-groups", "--bootstrap-server", tenants.a, "--reset-offsets",
                       "--to-earliest", "--execute", "--group", f"{group}-2", "--topic", topic)  # fmt: skip
    assert f"{group}-2" in reset.stdout and "a." not in reset.stdout, reset.stdout
    (reset_up,) = _share_offsets(broker.port, f"a.{group}-2").topics
    assert reset_up.topic_name == f"a.{topic}" and [p.start_offset for p in reset_up.partitions] == [0]
    assert _share_offsets(tenants.b_port, f"{group}-2").topics == []
    listed = kafka_tool("kafka-share-groups", "--bootstrap-server", tenants.b, "--list").stdout.split()
    assert group not in listed and not any(g.startswith("a.") for g in listed), listed
    described_a = kafka_tool(
        "kafka-share-groups", "--bootstrap-server", tenants.a, "--describe", "--group", group
    ).stdout
    assert f" {topic} " in described_a and "a." not in described_a, described_a
