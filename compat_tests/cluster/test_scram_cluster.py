"""Cluster mode, SCRAM users: a REAL Kafka 4.3.1 controller and two `kcompat serve` brokers with
SASL_PLAINTEXT listeners (SCRAM-SHA-512). kafka-configs --alter through broker 1 is forwarded to the
controller (AlterUserScramCredentials in an Envelope), the controller's UserScramCredentialRecord
reaches broker 2's metadata image, and a confluent-kafka client and a Java tool log in as the user
on broker 2, which also describes it; --delete-config writes RemoveUserScramCredentialRecord and a
new login is refused (SaslAuthenticationException: Kafka's SASL_AUTHENTICATION_FAILED).
The slow test adds an Apache Kafka 4.3.1 broker: a user made through it logs in on kcompat.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from support import cluster_broker, kafka_tool, log_has

from compat_tests.cluster.test_replication import JavaBroker
from kcompat.testing import Broker, free_port, wait_until
from kcompat.testing_cluster import ControllerQuorum

pytestmark = pytest.mark.timeout(300)

SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required"
JAVA_ID = 3


@pytest.fixture(scope="module")
def brokers(
    kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Broker]]:
    base = tmp_path_factory.mktemp("scram-cluster")
    made: list[Broker] = []
    try:
        for node_id in (1, 2):
            b = cluster_broker(
                kraft_quorum,
                base,
                node_id,
                **{
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                    "offsets.topic.replication.factor": "2",
                },
            )
            b.listeners["SASL_PLAINTEXT"] = free_port()
            made.append(b.start())
        for node_id, b in enumerate(made, 1):
            wait_until(
                lambda b=b, n=node_id: log_has(b, f"metadata: broker {n} is unfenced"), "unfenced", timeout=40
            )
        yield made
    finally:
        for b in made:
            b.stop()


def configs(bootstrap: str, *args: str, check: bool = True) -> str:
    result = kafka_tool("kafka-configs", "--bootstrap-server", bootstrap, *args, check=check, timeout=60)
    return (result.stdout + result.stderr).strip()


def user(name: str) -> tuple[str, ...]:
    return ("--entity-type", "users", "--entity-name", name)


def confluent_login(bootstrap: str, name: str, password: str) -> list[KafkaError]:
    """What librdkafka reported logging in as `name` and asking for metadata; [] when it could."""
    errors: list[KafkaError] = []
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": name,
            "sasl.password": password,
            "error_cb": errors.append,
            "log_level": 2,  # the refusals are expected: no FAIL lines on stderr
        }
    )
    try:
        admin.list_topics(timeout=5)
    except KafkaException as e:
        admin.poll(0.1)  # serves error_cb: the broker's refusal is reported there
        return [*errors, e.args[0]]
    return []


def refused(bootstrap: str, name: str, password: str) -> bool:
    """The broker answered the login with SASL_AUTHENTICATION_FAILED (librdkafka's _AUTHENTICATION)."""
    return any(e.code() == KafkaError._AUTHENTICATION for e in confluent_login(bootstrap, name, password))


def java_login(tmp_path: Path, bootstrap: str, name: str, password: str) -> tuple[bool, str]:
    """kafka-topics --list logged in as `name` over SASL_PLAINTEXT: (succeeded, output)."""
    props = tmp_path / f"{name}.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM_LOGIN} username="{name}" password="{password}";\n'
    )
    result = kafka_tool(
        "kafka-topics", "--bootstrap-server", bootstrap, "--command-config", str(props), "--list",
        check=False, timeout=60,
    )  # fmt: skip
    return result.returncode == 0, result.stdout + result.stderr


def test_scram_users_live_in_the_metadata_log(brokers: list[Broker], tmp_path: Path) -> None:
    one, two = brokers
    two_sasl = two.address("SASL_PLAINTEXT")
    assert refused(two_sasl, "alice", "alice-secret")  # no such user yet

    out = configs(
        one.bootstrap, "--alter", "--add-config", "SCRAM-SHA-512=[password=alice-secret]", *user("alice")
    )
    assert out == "Completed updating config for user alice.", out
    # Broker 2 never saw the request: it has alice from the controller's record, through its image.
    wait_until(
        lambda: confluent_login(two_sasl, "alice", "alice-secret") == [],
        "alice logs in on broker 2",
        timeout=30,
    )
    assert confluent_login(one.address("SASL_PLAINTEXT"), "alice", "alice-secret") == []
    assert refused(two_sasl, "alice", "wrong")
    described = configs(two.bootstrap, "--describe", *user("alice"))
    assert (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096" in described
    )

    out = configs(one.bootstrap, "--alter", "--delete-config", "SCRAM-SHA-512", *user("alice"))
    assert out == "Completed updating config for user alice.", out

    wait_until(lambda: refused(two_sasl, "alice", "alice-secret"), "alice refused on broker 2", timeout=30)
    # Kafka's Java client names SASL_AUTHENTICATION_FAILED SaslAuthenticationException
    ok, out = java_login(tmp_path, two_sasl, "alice", "alice-secret")
    assert not ok and "SaslAuthenticationException" in out, out[-3000:]


@pytest.mark.slow  # a Java broker JVM beside the module's cluster: ~40 s more
def test_a_user_made_through_a_java_broker_logs_in_on_kcompat(
    kraft_quorum: ControllerQuorum, brokers: list[Broker], tmp_path: Path
) -> None:
    java = JavaBroker(kraft_quorum, tmp_path, JAVA_ID)
    java.start()
    try:
        wait_until(
            lambda: (
                JAVA_ID
                in AdminClient({"bootstrap.servers": brokers[1].bootstrap}).list_topics(timeout=5).brokers
            ),
            "the Java broker registered and unfenced",
            timeout=60,
        )
        out = configs(
            f"127.0.0.1:{java.port}",
            "--alter",
            "--add-config",
            "SCRAM-SHA-512=[password=bob-secret]",
            *user("bob"),
        )
        assert out == "Completed updating config for user bob.", out
        two_sasl = brokers[1].address("SASL_PLAINTEXT")
        wait_until(
            lambda: confluent_login(two_sasl, "bob", "bob-secret") == [],
            "bob logs in on kcompat",
            timeout=30,
        )
        ok, out = java_login(tmp_path, two_sasl, "bob", "bob-secret")
        assert ok, out[-3000:]
    finally:
        java.stop()
