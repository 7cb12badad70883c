"""TLS on either side of `kcompat proxy`, independently: one `kcompat serve` with a PLAINTEXT and
an SSL listener (shared by the module) behind three proxies: TLS terminated at the proxy with a
plaintext upstream, plaintext clients with a TLS upstream, and TLS on both sides. confluent-kafka
and kafka-python produce and consume through each; a plaintext client on a TLS proxy port is
closed, and no answer names an upstream address. The same broker serves the tests of the request
hook (a closed connection for that client only) and of `kcompat proxy` as a process.
"""

from __future__ import annotations

import gc
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
import trustme

from compat_tests.client_data import unique
from compat_tests.proxy.checks import (
    assert_no_upstream_address,
    closed_after,
    confluent_consume,
    confluent_produce,
    metadata_brokers,
)
from compat_tests.proxy.harness import HOST, ProxyThread, free_port_base
from kcompat.proxy.hooks import CloseConnection, Exchange
from kcompat.testing import TEST_DEFAULTS, Broker, free_port, wait_until
from kcompat.wire.protocol import decode_response, encode_request


# The in-process proxy runs uvloop in a thread of the test process; with a TLS upstream uvloop frees
# some transports only when that loop closes or the collector gets to them (pyproject.toml names the
# warning). Collected before the module ends, so that no other module's test meets them.
@pytest.fixture(scope="module", autouse=True)
def _collect_the_loops_left() -> Iterator[None]:
    yield
    gc.collect()


pytestmark = pytest.mark.timeout(180)


class Certs:
    def __init__(self, d: Path) -> None:
        ca = trustme.CA()
        self.ca = d / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        self.server = d / "server.pem"
        ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(self.server))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("proxy-certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("proxy-tls-upstream")
    props = {**TEST_DEFAULTS,
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
             "ssl.keystore.location": str(certs.server),
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
             "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                                 'user_bob="bob-secret";'}  # fmt: skip
    b = Broker(base / "data", base / "kcompat.log", overrides=props,
               listeners={"SSL": free_port(), "SASL_PLAINTEXT": free_port()},
               args=["--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]"])  # fmt: skip
    b.start()
    yield b
    b.stop()


def tls_clients(certs: Certs) -> dict[str, str]:
    return {"proxy.client.security.protocol": "SSL", "ssl.keystore.location": str(certs.server)}


def tls_upstream(certs: Certs) -> dict[str, str]:
    return {
        "proxy.upstream.security.protocol": "SSL",
        "proxy.upstream.ssl.truststore.location": str(certs.ca),
    }


def roundtrip(proxy: ProxyThread, client_conf: dict[str, Any]) -> None:
    topic = unique("proxy-tls")
    values = [f"v-{i}" for i in range(15)]
    confluent_produce(proxy.bootstrap, topic, values, **client_conf)
    assert sorted(confluent_consume(proxy.bootstrap, topic, unique("g"), 15, **client_conf)) == sorted(values)


def confluent_tls(certs: Certs) -> dict[str, str]:
    return {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}


def upstream_ports(broker: Broker) -> set[int]:
    return {broker.port, *broker.listeners.values()}


def test_tls_terminated_at_the_proxy(broker: Broker, certs: Certs) -> None:
    with ProxyThread(broker.bootstrap, **tls_clients(certs)) as proxy:
        roundtrip(proxy, confluent_tls(certs))
        import kafka

        producer = kafka.KafkaProducer(bootstrap_servers=proxy.bootstrap, security_protocol="SSL",
                                       ssl_cafile=str(certs.ca))  # fmt: skip
        producer.send(unique("proxy-tls-kp"), b"x").get(30)
        producer.close()
        # a plaintext client on the TLS port is closed; TLS clients go on being served
        assert closed_after(proxy.bootstrap_port, encode_request(18, 3, 1, {}))
        roundtrip(proxy, confluent_tls(certs))
        assert_no_upstream_address(proxy, upstream_ports(broker))


def test_plaintext_clients_tls_upstream(broker: Broker, certs: Certs) -> None:
    with ProxyThread(f"{HOST}:{broker.listeners['SSL']}", **tls_upstream(certs)) as proxy:
        assert metadata_brokers(proxy.bootstrap_port) == {(1, HOST, proxy.node_port(1))}
        roundtrip(proxy, {})
        assert_no_upstream_address(proxy, upstream_ports(broker))


def test_tls_on_both_sides(broker: Broker, certs: Certs) -> None:
    with ProxyThread(
        f"{HOST}:{broker.listeners['SSL']}", **tls_clients(certs), **tls_upstream(certs)
    ) as proxy:
        roundtrip(proxy, confluent_tls(certs))
        assert_no_upstream_address(proxy, upstream_ports(broker))


def test_an_untrusted_upstream_closes_the_client_with_one_line(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    settings = {
        "proxy.upstream.security.protocol": "SSL",
        "proxy.upstream.ssl.truststore.location": str(other_ca),
    }
    with ProxyThread(f"{HOST}:{broker.listeners['SSL']}", **settings) as proxy:
        assert closed_after(proxy.bootstrap_port, encode_request(18, 3, 1, {}))
    lines = [r.getMessage() for r in caplog.records if "cannot reach the upstream" in r.getMessage()]
    assert len(lines) == 1 and "TLS" in lines[0] and "proxy.upstream.ssl" in lines[0], lines
    assert ssl.OPENSSL_VERSION


@pytest.mark.parametrize(("mechanism", "user", "password"),
                         [("PLAIN", "bob", "bob-secret"), ("SCRAM-SHA-512", "alice", "alice-secret")])  # fmt: skip
def test_sasl_passes_through_per_connection(broker: Broker, mechanism: str, user: str, password: str) -> None:
    """Each client connection has its own upstream connection, so the client's SASL exchange with
    the broker passes through the proxy untouched; a wrong password is the client's error."""
    with ProxyThread(broker.address("SASL_PLAINTEXT")) as proxy:
        conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.username": user, "sasl.password": password}  # fmt: skip
        roundtrip(proxy, conf)
        assert_no_upstream_address(proxy, upstream_ports(broker))
        errors: list[confluent_kafka.KafkaError] = []
        bad = confluent_kafka.Producer({"bootstrap.servers": proxy.bootstrap, **conf, "sasl.password": "wrong",
                                        "error_cb": errors.append})  # fmt: skip
        bad.produce("never", b"x")
        deadline = time.monotonic() + 15
        authentication = confluent_kafka.KafkaError._AUTHENTICATION
        while not any(e.code() == authentication for e in errors) and time.monotonic() < deadline:
            bad.poll(0.2)
        assert any(e.code() == authentication for e in errors), errors


def test_hooks_close_only_their_client(broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    """The request hook (where fault injection attaches) closes a connection by raising
    CloseConnection, or by failing; the other clients are served."""
    mode = {"now": "pass"}

    def hook(exchange: Exchange, frame: bytes | bytearray) -> bytes | None:
        if exchange.api_key == 3 and mode["now"] == "cut":
            raise CloseConnection
        if exchange.api_key == 3 and mode["now"] == "bug":
            raise ValueError("a bug in a rule")
        return None

    with ProxyThread(broker.bootstrap, request_hook=hook) as proxy:
        metadata = encode_request(3, 12, 1, {"topics": None})
        for now in ("cut", "bug"):
            mode["now"] = now
            assert closed_after(proxy.bootstrap_port, metadata), now
            mode["now"] = "pass"
            assert metadata_brokers(proxy.bootstrap_port) == {(1, HOST, proxy.node_port(1))}
    assert sum("request hook failed" in r.getMessage() for r in caplog.records) == 1


def test_the_kcompat_proxy_command(broker: Broker, tmp_path: Path) -> None:
    """`kcompat proxy` as a process: properties file plus shorthands, clients served, SIGTERM ends it."""
    port, base = free_port(), free_port_base()
    (tmp_path / "proxy.properties").write_text(f"proxy.upstream.bootstrap.servers={broker.bootstrap}\n")
    log = (tmp_path / "proxy.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "kcompat", "proxy", str(tmp_path / "proxy.properties"),
         "--bootstrap", f"{HOST}:{port}", "--node-port-base", str(base)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_until(lambda: _answers(port), "the proxy's bootstrap listener", timeout=20)
        assert metadata_brokers(port) == {(1, HOST, base + 1)}
        roundtrip_plain(f"{HOST}:{port}")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
        log.close()
    text = (tmp_path / "proxy.log").read_text()
    assert "kcompat proxy serving bootstrap" in text and "Traceback" not in text, text


def _answers(port: int) -> bool:
    try:
        metadata_brokers(port)
    except OSError:
        return False
    return True


def roundtrip_plain(bootstrap: str) -> None:
    topic = unique("proxy-cmd")
    confluent_produce(bootstrap, topic, ["a", "b", "c"])
    assert sorted(confluent_consume(bootstrap, topic, unique("g"), 3)) == ["a", "b", "c"]


def test_sni_routing_on_one_tls_port(broker: Broker, tmp_path: Path) -> None:
    """proxy.sni.host.pattern: every node on the bootstrap port, advertised as
    broker-<id>.kcompat.test; Java 4.3.1's console producer and consumer resolve those names from a
    hosts file, check the wildcard certificate's names and reach node 1 by its TLS server name."""
    from support import QUICK_JVM, kafka_tool

    ca = trustme.CA()
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem.bytes())
    ca.issue_cert("*.kcompat.test").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "sni.pem"))
    settings = {"proxy.client.security.protocol": "SSL", "ssl.keystore.location": str(tmp_path / "sni.pem"),
                "proxy.sni.host.pattern": "broker-$(nodeId).kcompat.test"}  # fmt: skip
    with ProxyThread(broker.bootstrap, **settings) as proxy:
        port = proxy.bootstrap_port
        tls = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        with (
            socket.create_connection((HOST, port)) as raw,
            tls.wrap_socket(raw, server_hostname="bootstrap.kcompat.test") as s,
        ):
            s.sendall(encode_request(3, 12, 1, {"topics": None, "allow_auto_topic_creation": False}))
            answer = b""
            while len(answer) < 4 or len(answer) < 4 + struct.unpack_from(">i", answer)[0]:
                chunk = s.recv(65536)
                assert chunk, "closed"
                answer += chunk
            answer = answer[4:]
        brokers = {(b.node_id, b.host, b.port) for b in decode_response(3, 12, answer)[1].brokers}
        assert brokers == {(1, "broker-1.kcompat.test", port)}
        assert proxy.server is not None and len(proxy.server._servers) == 1  # no per-node listener
        hosts = tmp_path / "hosts"
        hosts.write_text("127.0.0.1 bootstrap.kcompat.test broker-1.kcompat.test\n")
        jvm = [*QUICK_JVM, f"-Djdk.net.hosts.file={hosts}"]
        client = [
            "security.protocol=SSL",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={tmp_path / 'ca.pem'}",
        ]
        props = [arg for p in client for arg in ("--command-property", p)]
        topic, bootstrap = unique("sni"), f"bootstrap.kcompat.test:{port}"
        lines = [f"sni-{i}" for i in range(10)]
        kafka_tool("kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", topic, *props,
                   input="\n".join(lines) + "\n", jvm_opts=jvm)  # fmt: skip
        out = kafka_tool("kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, *props,
                         "--from-beginning", "--max-messages", "10", "--timeout-ms", "60000", jvm_opts=jvm).stdout  # fmt: skip
        assert sorted(out.split()) == sorted(lines)
        assert proxy.capture.by_api[0] > 0 and proxy.capture.by_api[1] > 0  # Produce and Fetch through it
        seen = {(h, p) for h, p in proxy.capture.seen() if h and p > 0}  # ("", 0): an error's no-node
        assert seen and all(h == "broker-1.kcompat.test" and p == port for h, p in seen), seen
