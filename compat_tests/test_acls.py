"""ACLs with real clients against one `kcompat serve` with StandardAuthorizer on and a SASL_PLAINTEXT
listener (SCRAM-SHA-512 users admin, a super user, and alice):

    kafka-acls (Kafka 4.3.1, --command-config with admin's SCRAM login) adds, lists and removes ACLs;
    confluent-kafka (librdkafka) as alice: TOPIC_AUTHORIZATION_FAILED on produce without WRITE and
    on fetch without READ, GROUP_AUTHORIZATION_FAILED on join without READ on the group; a prefixed
    ACL matches; a DENY beats an ALLOW; admin does everything; the ACLs survive a restart; a
    KIP-848 consumer is refused a subscription naming a topic it may not describe.
The console (admin.listener) asks for an HTTP Basic login against the same SCRAM users.
"""

from __future__ import annotations

import base64
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from support import kafka_tool, scram_broker

from kcompat.testing import TEST_DEFAULTS, Broker, free_port

pytestmark = pytest.mark.timeout(180)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
TOPICS = ("acl-read", "acl-pre-eu", "acl-pre-denied", "acl-secret")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("acl-broker")
    props = {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        # the readiness probe connects on PLAINTEXT, as User:ANONYMOUS
        "super.users": "User:admin;User:ANONYMOUS",
        "admin.listener": f"127.0.0.1:{free_port()}",  # the console asks for a login: SASL is on
    }
    b = scram_broker(base, USERS, props)
    admin = AdminClient(conf(b, "admin"))
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
        f.result(30)
    yield b
    b.stop()


def conf(broker: Broker, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.address("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


@pytest.fixture(scope="module")
def admin_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("acl-admin") / "admin.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";\n'
    )
    return path


def acls(broker: Broker, admin_config: Path, *args: str) -> str:
    return kafka_tool(
        "kafka-acls",
        "--bootstrap-server",
        broker.address("SASL_PLAINTEXT"),
        "--command-config",
        str(admin_config),
        *args,
    ).stdout


def produce_error(broker: Broker, user: str, topic: str) -> Any:
    """The delivery error of one record (None when it was written)."""
    p = Producer({**conf(broker, user), "message.timeout.ms": 10000})
    errors: list[Any] = []
    p.produce(topic, b"v", partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(20)
    assert len(errors) == 1
    return errors[0] if errors[0] is None else errors[0].code()


def consume(c: Consumer, want: int, timeout: float = 20) -> tuple[list[bytes], int | None]:
    """Up to `want` values, or stop at the first consumer error (its code)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        m = c.poll(0.3)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            return got, m.error().code()
        got.append(m.value())
    return got, None


def test_acls_with_kafka_acls_and_confluent_kafka(broker: Broker, admin_config: Path) -> None:
    # Without ACLs alice may do nothing (allow.everyone.if.no.acl.found is false); admin everything.
    assert produce_error(broker, "alice", "acl-read") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(broker, "admin", "acl-read") is None
    assert produce_error(broker, "admin", "acl-pre-eu") is None

    acls(broker, admin_config, "--add", "--allow-principal", "User:alice", "--operation", "Read",
         "--topic", "acl-read", "--group", "acl-g")  # fmt: skip
    acls(broker, admin_config, "--add", "--allow-principal", "User:alice", "--operation", "Write",
         "--resource-pattern-type", "prefixed", "--topic", "acl-pre-")  # fmt: skip
    acls(broker, admin_config, "--add", "--deny-principal", "User:alice", "--operation", "Write",
         "--topic", "acl-pre-denied")  # fmt: skip
    # librdkafka's own CreateAcls: DESCRIBE only on a group (FindCoordinator passes, JoinGroup does not)
    admin = AdminClient(conf(broker, "admin"))
    binding = AclBinding(ResourceType.GROUP, "acl-g-describe", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.DESCRIBE, AclPermissionType.ALLOW)  # fmt: skip
    for f in admin.create_acls([binding]).values():
        assert f.result(30) is None
    listed = acls(broker, admin_config, "--list", "--topic", "acl-read")
    assert "User:alice" in listed and "READ" in listed and "acl-read" in listed

    # WRITE: READ is not enough; the prefixed ACL matches; a DENY beats it
    assert produce_error(broker, "alice", "acl-read") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(broker, "alice", "acl-pre-eu") is None
    assert produce_error(broker, "alice", "acl-pre-denied") == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # Fetch: READ on acl-read; WRITE (which implies DESCRIBE, so Metadata answers) is not READ
    c = Consumer({**conf(broker, "alice"), "group.id": "acl-g", "enable.auto.commit": False})
    c.assign([TopicPartition("acl-read", 0, OFFSET_BEGINNING)])
    got, error = consume(c, 1)
    assert (got, error) == ([b"v"], None)
    c.assign([TopicPartition("acl-pre-eu", 0, OFFSET_BEGINNING)])
    got, error = consume(c, 1)
    assert got == [] and error == KafkaError.TOPIC_AUTHORIZATION_FAILED
    c.close()

    # Group join: READ on acl-g lets alice subscribe; DESCRIBE alone on the group does not
    c = Consumer({**conf(broker, "alice"), "group.id": "acl-g", "auto.offset.reset": "earliest"})
    c.subscribe(["acl-read"])
    assert consume(c, 1) == ([b"v"], None)
    c.close()
    c = Consumer({**conf(broker, "alice"), "group.id": "acl-g-describe", "auto.offset.reset": "earliest"})
    c.subscribe(["acl-read"])
    got, error = consume(c, 1)
    assert got == [] and error == KafkaError.GROUP_AUTHORIZATION_FAILED
    c.close()

    # Metadata hides what alice may not describe
    names = set(AdminClient(conf(broker, "alice")).list_topics(timeout=20).topics)
    assert {"acl-read", "acl-pre-eu", "acl-pre-denied"} <= names and "acl-secret" not in names

    # The ACLs survive a restart; then kafka-acls removes them
    broker.restart()
    listed = acls(broker, admin_config, "--list")
    assert "acl-pre-" in listed and "PREFIXED" in listed and "DENY" in listed and "acl-g-describe" in listed
    acls(broker, admin_config, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read",
         "--topic", "acl-read")  # fmt: skip
    assert produce_error(broker, "alice", "acl-pre-eu") is None  # still allowed
    listed = acls(broker, admin_config, "--list", "--topic", "acl-read")
    assert "User:alice" not in listed


def test_kip848_consumer_regex_sees_only_describable_topics(broker: Broker) -> None:
    """librdkafka's KIP-848 consumer as alice: a regex subscription ends with only the topics she
    may describe (whether the broker's resolution or Metadata's hiding keeps the other out; the
    broker's own regex filter is pinned in tests/server/test_acls_topics.py); a subscription
    naming a topic she may not describe is refused by the heartbeat (TOPIC_AUTHORIZATION_FAILED)."""
    admin = AdminClient(conf(broker, "admin"))
    for f in admin.create_topics([NewTopic(t, 2, 1) for t in ("k848-ok", "k848-hidden")]).values():
        f.result(30)
    bindings = [
        AclBinding(rt, name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
        for rt, name in ((ResourceType.GROUP, "k848-g"), (ResourceType.TOPIC, "k848-ok"))
    ]  # fmt: skip
    for f in admin.create_acls(bindings).values():
        assert f.result(30) is None
    c = Consumer({**conf(broker, "alice"), "group.id": "k848-g", "group.protocol": "consumer"})
    c.subscribe(["^k848-.*"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not c.assignment():
        c.poll(0.2)
    assert {(tp.topic, tp.partition) for tp in c.assignment()} == {("k848-ok", 0), ("k848-ok", 1)}
    c.close()
    c = Consumer({**conf(broker, "alice"), "group.id": "k848-g", "group.protocol": "consumer"})
    c.subscribe(["k848-ok", "k848-hidden"])
    got, error = consume(c, 1, timeout=15)
    c.close()
    assert got == [] and error == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_console_login_with_the_brokers_users(broker: Broker) -> None:
    assert broker.admin_url is not None

    def status(user: str | None, password: str = "") -> int:
        request = urllib.request.Request(broker.admin_url + "/topics")
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return int(response.status)
        except urllib.error.HTTPError as e:
            if e.code == 401:
                assert e.headers["WWW-Authenticate"].startswith("Basic")
            return int(e.code)

    assert status(None) == 401
    assert status("alice", "wrong") == 401
    assert status("nobody", "x") == 401
    assert status("alice", "alice-secret") == 200
    assert status("admin", "admin-secret") == 200
