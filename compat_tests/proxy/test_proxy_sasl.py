"""SASL terminated at `kcompat proxy` (issue 27): clients authenticate to the proxy with PLAIN,
SCRAM-SHA-256/512 or OAUTHBEARER, and the proxy logs in to a SASL upstream (one `kcompat serve`
for the module, its sessions 1.5 s long) with its own SCRAM credentials, re-authenticating each
upstream connection before its session ends (KIP-368); the client's session lifetime is the
proxy's connections.max.reauth.ms. confluent-kafka and Kafka's Java tools produce and consume
through it; a wrong password is refused with SASL_AUTHENTICATION_FAILED.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from support import kafka_tool

from compat_tests.client_data import unique
from compat_tests.proxy.checks import assert_no_upstream_address, confluent_consume, confluent_produce
from compat_tests.proxy.harness import HOST, ProxyThread
from kcompat.fault_client import Faults
from kcompat.testing import TEST_DEFAULTS, Broker, free_port, wait_until
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.timeout(240)

UPSTREAM_SESSION_MS = 1500
CLIENT_SESSION_MS = 2000
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
_JAAS_USERS = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("proxy-sasl-upstream")
    props = {**TEST_DEFAULTS,
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
             "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                                 'user_other="other-secret";',
             "connections.max.reauth.ms": str(UPSTREAM_SESSION_MS)}  # fmt: skip
    b = Broker(base / "data", base / "kcompat.log", overrides=props, listeners={"SASL_PLAINTEXT": free_port()},
               args=["--add-scram", "SCRAM-SHA-512=[name=proxy,password=proxy-secret]"])  # fmt: skip
    b.start()
    yield b
    b.stop()


def proxy_props(
    client_session_ms: int = CLIENT_SESSION_MS, proxy_password: str = "proxy-secret"
) -> dict[str, str]:
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule required"
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required"
    return {
        "proxy.client.security.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.proxy.plain.sasl.jaas.config": f"{plain} {_JAAS_USERS};",
        "listener.name.proxy.scram-sha-256.sasl.jaas.config": f"{scram} {_JAAS_USERS};",
        "listener.name.proxy.scram-sha-512.sasl.jaas.config": f"{scram} {_JAAS_USERS};",
        "listener.name.proxy.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "connections.max.reauth.ms": str(client_session_ms),
        "proxy.upstream.security.protocol": "SASL_PLAINTEXT",
        "proxy.upstream.sasl.mechanism": "SCRAM-SHA-512",
        "proxy.upstream.sasl.jaas.config": f'{scram} username="proxy" password="{proxy_password}";',
    }  # fmt: skip


@pytest.fixture(scope="module")
def proxy(broker: Broker) -> Iterator[ProxyThread]:
    props = {**proxy_props(), "proxy.admin.listener": f"{HOST}:0"}  # fault rules by principal
    with ProxyThread(broker.address("SASL_PLAINTEXT"), **props) as p:
        yield p


def client_conf(mechanism: str, user: str = "alice", password: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        return {
            **conf,
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={user}",
        }
    return {**conf, "sasl.username": user, "sasl.password": password or USERS[user]}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_confluent_authenticates_to_the_proxy(broker: Broker, proxy: ProxyThread, mechanism: str) -> None:
    topic = unique(f"proxy-sasl-{mechanism.lower()}")
    conf = client_conf(mechanism)
    values = [f"{mechanism}-{i}" for i in range(20)]
    assert confluent_produce(proxy.bootstrap, topic, values, **conf) == len(values)
    got = confluent_consume(proxy.bootstrap, topic, unique("g"), len(values), **conf)
    assert sorted(got) == sorted(values)
    assert_no_upstream_address(proxy, {broker.listeners["SASL_PLAINTEXT"], broker.port})


def test_java_tools_through_sasl_termination(broker: Broker, proxy: ProxyThread, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="bob" password="bob-secret";\n'
    )
    bs, topic = proxy.bootstrap, unique("proxy-sasl-java")
    kafka_tool("kafka-topics", "--bootstrap-server", bs, "--command-config", str(config), "--create",
               "--topic", topic, "--partitions", "2")  # fmt: skip
    lines = [f"java-{i}" for i in range(10)]
    kafka_tool("kafka-console-producer", "--bootstrap-server", bs, "--topic", topic,
               "--command-config", str(config), input="\n".join(lines) + "\n")  # fmt: skip
    # the group's join takes longer than the 2 s session: the consumer re-authenticates on the way
    out = kafka_tool("kafka-console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group", unique("g"),
                     "--command-config", str(config), "--from-beginning", "--max-messages", str(len(lines)),
                     "--timeout-ms", "60000").stdout  # fmt: skip
    assert sorted(out.split()) == sorted(lines)


def _frame(s: socket.socket) -> bytes:
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    return s.recv(size, socket.MSG_WAITALL)


def _login(s: socket.socket, user: str, password: str, correlation: int = 1) -> Any:
    """SaslHandshake v1 + SaslAuthenticate v2 with PLAIN; the SaslAuthenticate answer."""
    s.sendall(encode_request(17, 1, correlation, {"mechanism": "PLAIN"}))
    _, handshake = decode_response(17, 1, _frame(s))
    assert handshake.error_code == 0, handshake
    s.sendall(encode_request(36, 2, correlation + 1, {"auth_bytes": f"\0{user}\0{password}".encode()}))
    return decode_response(36, 2, _frame(s))[1]


def _metadata(s: socket.socket, correlation: int) -> Any:
    s.sendall(encode_request(3, 12, correlation, {"topics": None, "allow_auto_topic_creation": False}))
    return decode_response(3, 12, _frame(s))[1]


def test_a_wrong_password_is_refused(proxy: ProxyThread) -> None:
    with socket.create_connection((HOST, proxy.bootstrap_port), timeout=10) as s:
        answer = _login(s, "alice", "not-her-password")
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, answer
        assert s.recv(1) == b""  # and the connection closed
    errors: list[confluent_kafka.KafkaError] = []
    bad = confluent_kafka.Producer({"bootstrap.servers": proxy.bootstrap, **client_conf("SCRAM-SHA-512", password="nope"),
                                    "error_cb": errors.append})  # fmt: skip
    bad.produce("never", b"x")
    deadline = time.monotonic() + 15
    while (
        not any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors)
        and time.monotonic() < deadline
    ):
        bad.poll(0.2)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors), errors


def test_the_client_session_is_the_proxys_and_can_be_renewed(proxy: ProxyThread) -> None:
    with socket.create_connection((HOST, proxy.bootstrap_port), timeout=10) as s:
        answer = _login(s, "bob", "bob-secret")
        assert answer.error_code == 0 and 0 < answer.session_lifetime_ms <= CLIENT_SESSION_MS, answer
        assert _metadata(s, 3).brokers
        renewed = _login(s, "bob", "bob-secret", correlation=4)  # KIP-368, on the same connection
        assert renewed.error_code == 0 and renewed.session_lifetime_ms > 0, renewed
        time.sleep(CLIENT_SESSION_MS / 1000 + 0.5)  # let it lapse: the next request closes the connection
        s.sendall(encode_request(3, 12, 6, {"topics": None, "allow_auto_topic_creation": False}))
        assert s.recv(4) == b""


def test_the_proxy_reauthenticates_upstream(broker: Broker) -> None:
    """One client connection kept busy for three upstream sessions: the upstream would close a
    connection whose session lapsed, so every answer coming back shows the proxy re-authenticated."""
    with ProxyThread(broker.address("SASL_PLAINTEXT"), **proxy_props(client_session_ms=0)) as p:
        with socket.create_connection((HOST, p.bootstrap_port), timeout=10) as s:
            assert _login(s, "alice", "alice-secret").error_code == 0
            deadline = time.monotonic() + 3 * UPSTREAM_SESSION_MS / 1000
            correlation = 10
            while time.monotonic() < deadline:
                correlation += 1
                assert _metadata(s, correlation).brokers
                time.sleep(0.1)
        assert p.server is not None
        assert p.server.shared.sasl_counts["reauthentications"] >= 2, p.server.shared.sasl_counts


def test_the_upstream_refusing_the_proxys_password_closes_the_client(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    with ProxyThread(broker.address("SASL_PLAINTEXT"), **proxy_props(proxy_password="wrong")) as p:
        with socket.create_connection((HOST, p.bootstrap_port), timeout=10) as s:
            s.sendall(encode_request(18, 0, 1, {}))
            assert s.recv(4) == b""
        wait_until(lambda: any("refused the proxy's SASL login" in r.getMessage() for r in caplog.records))
    line = next(r.getMessage() for r in caplog.records if "refused the proxy's SASL login" in r.getMessage())
    assert "SASL_AUTHENTICATION_FAILED" in line and "proxy.upstream.sasl.jaas.config" in line, line


def test_fault_rules_match_the_principal_the_proxy_authenticated(proxy: ProxyThread) -> None:
    assert proxy.admin_url is not None
    faults = Faults(proxy.admin_url)
    rule = faults.add("drop", api="Metadata", principal="User:bob")
    try:
        with socket.create_connection((HOST, proxy.bootstrap_port), timeout=10) as s:
            assert _login(s, "alice", "alice-secret").error_code == 0
            assert _metadata(s, 3).brokers  # not alice's rule
        with socket.create_connection((HOST, proxy.bootstrap_port), timeout=10) as s:
            assert _login(s, "bob", "bob-secret").error_code == 0
            s.sendall(encode_request(3, 12, 3, {"topics": None, "allow_auto_topic_creation": False}))
            assert s.recv(4) == b""  # bob's Metadata: the connection dropped
        assert faults.fired(rule) == 1
    finally:
        faults.clear()
