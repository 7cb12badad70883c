"""TLS and SASL with real clients against one `kcompat serve` with five listeners:

    PLAINTEXT       (the readiness probe)
    SSL             PKCS12 keystore, no client certificates
    MTLS            SSL with ssl.client.auth=required and a principal mapping rule
    SASL_SSL        PLAIN (JAAS users) and SCRAM-SHA-256/512, inline PEM keystore
    SASL_PLAINTEXT  PLAIN, SCRAM-SHA-512 and OAUTHBEARER (unsecured JWS)

Certificates are made in the test run (trustme). kafka-python, confluent-kafka (librdkafka),
aiokafka and the Java client (Kafka's console tools, kafka-configs) produce and consume; refused clients get their
own library's authentication error while the broker keeps serving the others.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AIOTopicPartition
from aiokafka.helpers import create_ssl_context
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KPTopicPartition
from support import kafka_tool

from compat_tests.client_data import unique
from kcompat.testing import TEST_DEFAULTS, Broker, closed_by_peer, free_port
from kcompat.wire.protocol import encode_request

pytestmark = pytest.mark.timeout(180)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_bob="bob-secret" user_admin="admin-secret";')  # fmt: skip


class Certs:
    def __init__(self, d: Path) -> None:
        ca = trustme.CA()
        server = ca.issue_cert("localhost", "127.0.0.1")
        client = ca.issue_cert(
            "client.kcompat.test", common_name="Mallory Client", organization_name="kcompat"
        )
        self.dir = d
        self.ca = d / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        self.server_pem = d / "server.pem"
        server.private_key_and_cert_chain_pem.write_to_path(str(self.server_pem))
        self.server_chain = server.cert_chain_pems[0].bytes().decode()
        self.server_key = server.private_key_pem.bytes().decode()
        key = serialization.load_pem_private_key(server.private_key_pem.bytes(), None)
        cert = x509.load_pem_x509_certificate(server.cert_chain_pems[0].bytes())
        self.server_p12 = d / "server.p12"
        self.server_p12.write_bytes(
            pkcs12.serialize_key_and_certificates(
                b"kcompat", key, cert, None, serialization.BestAvailableEncryption(b"store-pw")
            )
        )  # type: ignore[arg-type]
        self.client_cert = d / "client-cert.pem"
        self.client_key = d / "client-key.pem"
        client.cert_chain_pems[0].write_to_path(str(self.client_cert))
        # Java's PEM keystore wants PKCS#8 keys
        ckey = serialization.load_pem_private_key(client.private_key_pem.bytes(), None)
        self.client_key.write_bytes(
            ckey.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        self.client_keystore = d / "client-keystore.pem"
        self.client_keystore.write_bytes(self.client_key.read_bytes() + self.client_cert.read_bytes())


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("secure-broker")
    names = ("SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT")
    props = {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "ssl.keystore.location": str(certs.server_p12),
        "ssl.keystore.password": "store-pw",
        "listener.name.mtls.ssl.keystore.location": str(certs.server_pem),
        "listener.name.mtls.ssl.truststore.location": str(certs.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT",
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.certificate.chain": certs.server_chain,
        "listener.name.sasl_ssl.ssl.keystore.key": certs.server_key,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        "sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": "50",
    }
    b = Broker(
        base / "data",
        base / "kcompat.log",
        overrides=props,
        listeners={n: free_port() for n in names},
        args=["--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]"],
    )
    b.start()
    yield b
    b.stop()


# --- client settings per listener and mechanism -------------------------------------------------

CASES = ["SSL", "MTLS", "SASL_SSL-PLAIN", "SASL_SSL-SCRAM-SHA-512", "SASL_PLAINTEXT-SCRAM-SHA-512"]
USERS = {"PLAIN": ("bob", "bob-secret"), "SCRAM-SHA-512": ("alice", "alice-secret")}


def split(case: str) -> tuple[str, str | None]:
    listener, _, mechanism = case.partition("-")
    return listener, mechanism or None


def librdkafka_conf(broker: Broker, certs: Certs, case: str, password: str | None = None) -> dict[str, Any]:
    listener, mechanism = split(case)
    conf: dict[str, Any] = {"bootstrap.servers": broker.address(listener)}
    conf["security.protocol"] = "SSL" if listener == "MTLS" else listener
    if "SSL" in listener or listener == "MTLS":
        conf["ssl.ca.location"] = str(certs.ca)
    if listener == "MTLS":
        conf.update(
            {"ssl.certificate.location": str(certs.client_cert), "ssl.key.location": str(certs.client_key)}
        )
    if mechanism:
        user, pw = USERS[mechanism]
        conf.update({"sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password or pw})
    return conf


def kafka_python_conf(broker: Broker, certs: Certs, case: str) -> dict[str, Any]:
    listener, mechanism = split(case)
    conf: dict[str, Any] = {"bootstrap_servers": broker.address(listener)}
    conf["security_protocol"] = "SSL" if listener == "MTLS" else listener
    if "SSL" in listener or listener == "MTLS":
        conf["ssl_cafile"] = str(certs.ca)
    if listener == "MTLS":
        conf.update({"ssl_certfile": str(certs.client_cert), "ssl_keyfile": str(certs.client_key)})
    if mechanism:
        user, pw = USERS[mechanism]
        conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": pw})
    return conf


def java_conf(certs: Certs, case: str, user: tuple[str, str] | None = None) -> str:
    listener, mechanism = split(case)
    lines = [f"security.protocol={'SSL' if listener == 'MTLS' else listener}"]
    if "SSL" in listener or listener == "MTLS":
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={certs.ca}"]
    if listener == "MTLS":
        lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={certs.client_keystore}"]
    if mechanism:
        name, pw = user or USERS[mechanism]
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        lines += [
            f"sasl.mechanism={mechanism}",
            f'sasl.jaas.config=org.apache.kafka.common.security.{module} required username="{name}" password="{pw}";',
        ]
    return "\n".join(lines) + "\n"


# --- produce and consume --------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_confluent_kafka_produces_and_consumes(broker: Broker, certs: Certs, case: str) -> None:
    conf = librdkafka_conf(broker, certs, case)
    topic = unique("sec-ck")
    p = Producer({**conf, "linger.ms": 5})
    errors: list[Any] = []
    for i in range(20):
        p.produce(topic, value=f"v{i}".encode(), partition=0, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(30) == 0 and errors == [None] * 20
    c = Consumer({**conf, "group.id": unique("g"), "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(got) < 20 and time.monotonic() < deadline:
        m = c.poll(0.3)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value())
    c.close()
    assert got == [f"v{i}".encode() for i in range(20)]


@pytest.mark.parametrize("case", CASES)
def test_kafka_python_produces_and_consumes(broker: Broker, certs: Certs, case: str) -> None:
    conf = kafka_python_conf(broker, certs, case)
    topic = unique("sec-kp")
    p = KafkaProducer(**conf)
    for i in range(10):
        p.send(topic, f"v{i}".encode(), partition=0).get(30)
    p.close()
    c = KafkaConsumer(**conf, enable_auto_commit=False)
    tp = KPTopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(got) < 10 and time.monotonic() < deadline:
        for records in c.poll(300).values():
            got += [r.value for r in records]
    c.close()
    assert got == [f"v{i}".encode() for i in range(10)]


@pytest.mark.parametrize("case", ["SSL", "SASL_SSL-SCRAM-SHA-512", "SASL_PLAINTEXT-PLAIN"])
def test_aiokafka_produces_and_consumes(broker: Broker, certs: Certs, case: str) -> None:
    listener, mechanism = split(case)
    conf: dict[str, Any] = {"bootstrap_servers": broker.address(listener), "security_protocol": listener}
    if "SSL" in listener:
        conf["ssl_context"] = create_ssl_context(cafile=str(certs.ca))
    if mechanism:
        user, pw = USERS.get(mechanism, ("bob", "bob-secret"))
        conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": pw})
    topic = unique("sec-aio")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"v{i}".encode(), partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**conf, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = AIOTopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[bytes] = []
            while len(got) < 5:
                batch = await consumer.getmany(tp, timeout_ms=500)
                got += [m.value for m in batch.get(tp, [])]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(run(), 60)) == [f"v{i}".encode() for i in range(5)]


def test_java_client_and_kafka_configs_scram_user(broker: Broker, certs: Certs, tmp_path: Path) -> None:
    """kafka-configs adds a SCRAM user through AlterUserScramCredentials; that user produces with the
    Java client over SASL_SSL; the Java consumer reads over mTLS. The store holds no password."""
    admin = tmp_path / "admin.properties"
    admin.write_text(java_conf(certs, "SASL_SSL-SCRAM-SHA-512"))
    kafka_tool(
        "kafka-configs",
        "--bootstrap-server",
        broker.address("SASL_SSL"),
        "--command-config",
        str(admin),
        "--alter",
        "--add-config",
        "SCRAM-SHA-512=[iterations=8192,password=carol-secret]",
        "--entity-type",
        "users",
        "--entity-name",
        "carol",
    )
    stored = (broker.data_dir / "kcompat-scram-credentials").read_text()
    assert '"carol"' in stored and "carol-secret" not in stored and "alice-secret" not in stored

    carol = tmp_path / "carol.properties"
    carol.write_text(java_conf(certs, "SASL_SSL-SCRAM-SHA-512", ("carol", "carol-secret")))
    topic = unique("sec-java")
    kafka_tool(
        "kafka-console-producer",
        "--bootstrap-server",
        broker.address("SASL_SSL"),
        "--command-config",
        str(carol),
        "--topic",
        topic,
        input="one\ntwo\nthree\n",
    )
    mtls = tmp_path / "mtls.properties"
    mtls.write_text(java_conf(certs, "MTLS"))
    out = kafka_tool(
        "kafka-console-consumer",
        "--bootstrap-server",
        broker.address("MTLS"),
        "--command-config",
        str(mtls),
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "3",
        "--timeout-ms",
        "20000",
    )
    assert out.stdout.split() == ["one", "two", "three"]
    # and PLAIN from the JAAS config, over SASL_PLAINTEXT, with Kafka's admin tool
    plain = tmp_path / "plain.properties"
    plain.write_text(java_conf(certs, "SASL_PLAINTEXT-PLAIN"))
    listed = kafka_tool(
        "kafka-topics",
        "--bootstrap-server",
        broker.address("SASL_PLAINTEXT"),
        "--command-config",
        str(plain),
        "--list",
    )
    assert topic in listed.stdout.split()


def test_confluent_kafka_oauthbearer_unsecured_jws(broker: Broker, certs: Certs) -> None:
    conf = {
        "bootstrap.servers": broker.address("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=svc-reporter lifeSeconds=600",
    }
    topic = unique("sec-oauth")
    p = Producer(conf)
    errors: list[Any] = []
    p.produce(topic, value=b"token", partition=0, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(30) == 0 and errors == [None]
    c = Consumer({**conf, "group.id": unique("g"), "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + 20
    m = None
    while m is None and time.monotonic() < deadline:
        m = c.poll(0.3)
    c.close()
    assert m is not None and m.error() is None and m.value() == b"token"


# --- refusals ---------------------------------------------------------------------------------------


def test_wrong_password_is_the_clients_authentication_error(
    broker: Broker, certs: Certs, tmp_path: Path
) -> None:
    errors: list[KafkaError] = []
    conf = librdkafka_conf(broker, certs, "SASL_SSL-SCRAM-SHA-512", password="not-the-secret-7")
    p = Producer({**conf, "error_cb": errors.append})
    p.produce("never", b"x")
    deadline = time.monotonic() + 15
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        p.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    del p
    bad = tmp_path / "bad.properties"
    bad.write_text(java_conf(certs, "SASL_SSL-PLAIN", ("bob", "nope")))
    result = kafka_tool(
        "kafka-topics",
        "--bootstrap-server",
        broker.address("SASL_SSL"),
        "--command-config",
        str(bad),
        "--list",
        check=False,
    )
    assert result.returncode != 0 and "SaslAuthenticationException" in result.stdout + result.stderr
    # the broker keeps serving everyone else
    test_confluent_kafka_produces_and_consumes(broker, certs, "SASL_SSL-PLAIN")
    log = broker.logs()
    assert "failed authentication with SCRAM-SHA-512 as alice" in log and "not-the-secret-7" not in log


def test_mtls_refuses_a_client_without_certificate(broker: Broker, certs: Certs) -> None:
    errors: list[KafkaError] = []
    conf = {
        "bootstrap.servers": broker.address("MTLS"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
    }
    p = Producer({**conf, "error_cb": errors.append})
    p.produce("never", b"x")
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors and "certificate required" in errors[0].str()
    # The client may read the broker's alert before the broker has written its line about it.
    deadline = time.monotonic() + 10
    while "PEER_DID_NOT_RETURN_A_CERTIFICATE" not in broker.logs() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "PEER_DID_NOT_RETURN_A_CERTIFICATE" in broker.logs()


def _api_versions(sock: socket.socket) -> None:
    sock.sendall(encode_request(18, 0, 1, {}))
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    sock.recv(size, socket.MSG_WAITALL)


def test_hostile_peers_are_closed_with_one_line_each(broker: Broker, certs: Certs) -> None:
    host, port = broker.address("SASL_PLAINTEXT").split(":")
    # a Metadata request before any SASL handshake
    with socket.create_connection((host, int(port)), timeout=5) as s:
        _api_versions(s)  # allowed before authenticating
        s.sendall(encode_request(3, 12, 2, {"topics": None}))
        assert closed_by_peer(s)
    # garbage instead of a TLS ClientHello
    ssl_host, ssl_port = broker.address("SSL").split(":")
    with socket.create_connection((ssl_host, int(ssl_port)), timeout=5) as s:
        s.sendall(b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")  # ApiVersions in the clear
        assert closed_by_peer(s)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        log = broker.logs()
        if (
            "unexpected request (API key 3 v12) in SASL state handshake" in log
            and "TLS handshake failed" in log
        ):
            break
        time.sleep(0.05)
    assert log.count("unexpected request (API key 3 v12)") == 1
    assert "TLS handshake failed: WRONG_VERSION_NUMBER" in log


def test_stalled_handshakes_do_not_delay_other_clients(broker: Broker, certs: Certs) -> None:
    host, port = broker.address("SSL").split(":")
    stalled = [socket.create_connection((host, int(port)), timeout=5) for _ in range(10)]
    for s in stalled:
        s.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00]) + b"\x01" * 40)  # half a ClientHello, then nothing
    try:
        conf = kafka_python_conf(broker, certs, "SSL")
        took = []
        for _ in range(3):
            t0 = time.monotonic()
            p = KafkaProducer(**conf)
            p.send(unique("stall"), b"x").get(10)
            p.close()
            took.append(time.monotonic() - t0)
        print(
            f"kafka-python connect + produce over SSL while 10 handshakes stall: {min(took) * 1000:.0f} ms min"
        )
        assert max(took) < 5
    finally:
        for s in stalled:
            s.close()
