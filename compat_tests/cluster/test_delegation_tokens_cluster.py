"""Delegation tokens in cluster mode: a REAL Kafka 4.3.1 controller and a `kcompat serve` broker,
both with the same delegation.token.secret.key. kafka-delegation-tokens --create and --expire go
through the broker to the controller (forwarded in an Envelope with the client's principal), the
controller's DelegationTokenRecord and RemoveDelegationTokenRecord reach the broker's metadata
image, and the broker answers --describe and authenticates the Java producer and consumer logging
in with the token from them; once expired, the token is refused."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import ClusterBrokerFactory, kafka_tool, log_has

from compat_tests.cluster.test_scram_cluster import confluent_login
from kcompat.testing import free_port, wait_until
from kcompat.testing_cluster import ControllerQuorum

NODE_ID = 1
SECRET = "kcompat-cluster-token-secret"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@pytest.fixture(scope="module")
def token_quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerQuorum]:
    why_not = ControllerQuorum.available()
    if why_not is not None:
        pytest.fail(why_not, pytrace=False)
    props = {"delegation.token.secret.key": SECRET}
    with ControllerQuorum(tmp_path_factory.mktemp("token-quorum"), voters=1, properties=props) as quorum:
        yield quorum


def login(path: Path, username: str, password: str, *, token: bool = False) -> Path:
    extra = ' tokenauth="true"' if token else ""
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM_LOGIN} username="{username}" password="{password}"{extra};\n'
    )
    return path


@pytest.mark.slow  # its own controller JVM and seven tool JVMs: ~70 s on the shared machine
def test_tokens_through_the_controller(
    token_quorum: ControllerQuorum, cluster_broker_factory: ClusterBrokerFactory, tmp_path: Path
) -> None:
    broker = cluster_broker_factory(
        token_quorum,
        NODE_ID,
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "delegation.token.secret.key": SECRET,
        },
    )
    broker.listeners["SASL_PLAINTEXT"] = free_port()
    broker.start()
    wait_until(
        lambda: log_has(broker, f"metadata: broker {NODE_ID} is unfenced"), "the unfencing record", timeout=40
    )
    bs = broker.address("SASL_PLAINTEXT")
    # alice is the controller's (a UserScramCredentialRecord), as every SCRAM user in cluster mode
    kafka_tool("kafka-configs", "--bootstrap-server", broker.bootstrap, "--alter", "--add-config",
               "SCRAM-SHA-512=[password=alice-secret]", "--entity-type", "users", "--entity-name", "alice")  # fmt: skip
    wait_until(
        lambda: confluent_login(bs, "alice", "alice-secret") == [], "alice in the broker's image", timeout=30
    )
    alice = login(tmp_path / "alice.properties", "alice", "alice-secret")

    def tokens(*args: str, config: Path = alice, check: bool = True) -> str:
        result = kafka_tool(
            "kafka-delegation-tokens",
            "--bootstrap-server",
            bs,
            "--command-config",
            str(config),
            *args,
            check=check,
            timeout=60,
        )
        return result.stdout + result.stderr

    out = tokens("--create", "--max-life-time-period", "-1")
    found = re.search(r"Created delegation token with tokenId : (\S+)", out)
    assert found is not None, out
    token_id = found.group(1)
    hmac = next(line.split()[1] for line in out.splitlines() if line.startswith(token_id + " "))
    # the broker answers from the controller's DelegationTokenRecord in its image
    wait_until(
        lambda: hmac in tokens("--describe", "--owner-principal", "User:alice"),
        "the token in the broker's image",
        timeout=60,
    )

    with_token = login(tmp_path / "token.properties", token_id, hmac, token=True)
    kafka_tool(
        "kafka-topics",
        "--bootstrap-server",
        bs,
        "--command-config",
        str(with_token),
        "--create",
        "--topic",
        "dt-cluster",
        "--partitions",
        "1",
        "--replication-factor",
        "1",
    )
    kafka_tool(
        "kafka-console-producer",
        "--bootstrap-server",
        bs,
        "--command-config",
        str(with_token),
        "--topic",
        "dt-cluster",
        input="one\ntwo\n",
    )
    got = kafka_tool(
        "kafka-console-consumer",
        "--bootstrap-server",
        bs,
        "--command-config",
        str(with_token),
        "--topic",
        "dt-cluster",
        "--partition",  # no group: one broker cannot hold __consumer_offsets' 3 replicas
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        "2",
        "--timeout-ms",
        "30000",
    )
    assert got.stdout.split() == ["one", "two"], got.stdout + got.stderr[-3000:]

    out = tokens("--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert "Completed expire operation" in out
    refused = kafka_tool(
        "kafka-topics",
        "--bootstrap-server",
        bs,
        "--command-config",
        str(with_token),
        "--list",
        check=False,
        timeout=60,
    )
    assert refused.returncode != 0 and "SaslAuthenticationException" in refused.stdout + refused.stderr
