"""The rest of the client x mechanism matrix (test_security.py has confluent-kafka, kafka-python,
aiokafka and Kafka's CLI tools): kcat 1.7 (librdkafka 2.0.2) and the Java client 3.9 and 4.3 over
TLS and SASL_SSL, against one `kcompat serve` with three secured listeners:

    SSL       PKCS12 keystore, no client certificates
    MTLS      SSL with ssl.client.auth=required (the client's certificate is verified with the test CA)
    SASL_SSL  PLAIN (JAAS users), SCRAM-SHA-256 and SCRAM-SHA-512 (users stored at start)

Every client verifies the server's certificate with the CA made in the run; a client trusting
another CA, or giving a wrong password, gets its own library's error. kcat's SCRAM runs on the
system librdkafka (refused before 2.6.1, as Kafka 4.x refuses it) and on the confluent-kafka wheel's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
import trustme

from compat_tests.client_data import unique
from compat_tests.test_clients_java import JavaClient, JavaError, java, java_clients  # noqa: F401
from compat_tests.test_security import PLAIN_JAAS, Certs
from kcompat.testing import TEST_DEFAULTS, Broker, free_port, wait_until

pytestmark = pytest.mark.timeout(180)

USERS = {"PLAIN": ("bob", "bob-secret"), "SCRAM-SHA-256": ("dave", "dave-secret"),
         "SCRAM-SHA-512": ("alice", "alice-secret")}  # fmt: skip


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("secure-matrix")
    props = {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL",
        "ssl.keystore.location": str(certs.server_p12),
        "ssl.keystore.password": "store-pw",
        "listener.name.mtls.ssl.truststore.location": str(certs.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": "50",
    }
    b = Broker(
        base / "data",
        base / "kcompat.log",
        overrides=props,
        listeners={n: free_port() for n in ("SSL", "MTLS", "SASL_SSL")},
        args=[
            "--add-scram",
            "SCRAM-SHA-512=[name=alice,password=alice-secret]",
            "--add-scram",
            "SCRAM-SHA-256=[name=dave,password=dave-secret]",
        ],
    )
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA that did not sign the broker's certificate."""
    path = tmp_path_factory.mktemp("other-ca") / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(path))
    return path


# --- kcat ----------------------------------------------------------------------------------------

KCAT_CASES = ["SSL", "SASL_SSL-PLAIN"]
needs_kcat = pytest.mark.skipif(
    shutil.which("kcat") is None, reason="kcat is not installed: run tools/setup-test-deps.sh"
)


def kcat_conf(certs: Certs, case: str, password: str | None = None) -> list[str]:
    listener, _, mechanism = case.partition("-")
    conf = {"security.protocol": listener, "ssl.ca.location": str(certs.ca)}
    if mechanism:
        user, pw = USERS[mechanism]
        conf.update({"sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password or pw})
    return [arg for k, v in conf.items() for arg in ("-X", f"{k}={v}")]


def kcat(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=60, env=env)


@needs_kcat
@pytest.mark.parametrize("case", KCAT_CASES)
def test_kcat_produces_and_consumes(broker: Broker, certs: Certs, case: str) -> None:
    listener = case.partition("-")[0]
    topic = unique("sec-kcat")
    lines = [f"v{i}" for i in range(5)]
    conf = kcat_conf(certs, case)
    done = kcat(
        "-b", broker.address(listener), *conf, "-P", "-t", topic, "-p", "0", stdin="\n".join(lines) + "\n"
    )
    assert done.returncode == 0, done.stderr
    done = kcat("-b", broker.address(listener), *conf, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
                "-f", "%o %s\n")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{i} v{i}" for i in range(5)]


def kcat_librdkafka(env: dict[str, str] | None = None) -> tuple[int, ...]:
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", kcat("-V", env=env).stdout)
    assert found, "kcat -V names no librdkafka version"
    return tuple(int(n) for n in found.groups())


def newer_librdkafka(d: Path) -> dict[str, str]:
    """An environment in which kcat loads the librdkafka bundled with the confluent-kafka wheel
    (the C API is stable across 2.x) instead of the system's."""
    libs = sorted(
        (Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs").glob("librdkafka*.so*")
    )
    if not libs:
        pytest.skip("confluent-kafka is not a wheel with its own librdkafka")
    (d / "librdkafka.so.1").symlink_to(libs[0])
    return {**os.environ, "LD_LIBRARY_PATH": str(d)}


@needs_kcat
def test_kcat_scram_sha_512(broker: Broker, certs: Certs, tmp_path: Path) -> None:
    """librdkafka before 2.6.1 (kcat 1.7 as Debian ships it has 2.0.2) sends its client nonce twice
    in SCRAM's client-final-message (librdkafka#4895). Kafka 4.x's ScramSaslServer compares that
    nonce with String.equals, as RFC 5802 says, and refuses it; so does kcompat. The same kcat on
    a fixed librdkafka gets in."""
    bootstrap, conf = broker.address("SASL_SSL"), kcat_conf(certs, "SASL_SSL-SCRAM-SHA-512")
    topic = unique("sec-kcat-scram")
    if kcat_librdkafka() < (2, 6, 1):
        done = kcat("-b", bootstrap, *conf, "-P", "-t", topic, "-p", "0", stdin="v0\nv1\n")
        assert done.returncode != 0 and "Authentication failed" in done.stderr, done.stderr
        # the broker writes its line after the answer that made kcat give up: wait for it
        wait_until(lambda: "failed authentication with SCRAM-SHA-512 as alice" in broker.logs(),
                   "the broker's line about alice's refused login", timeout=10)  # fmt: skip
    env = newer_librdkafka(tmp_path)
    assert kcat_librdkafka(env) >= (2, 6, 1)
    done = kcat("-b", bootstrap, *conf, "-P", "-t", topic, "-p", "0", stdin="v0\nv1\n", env=env)
    assert done.returncode == 0, done.stderr
    done = kcat("-b", bootstrap, *conf, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", env=env)
    assert done.returncode == 0 and done.stdout.split() == ["v0", "v1"], done.stderr
    wrong = kcat_conf(certs, "SASL_SSL-SCRAM-SHA-512", password="not-the-secret-9")
    done = kcat("-b", bootstrap, *wrong, "-L", "-m", "3", env=env)
    assert done.returncode != 0 and "Authentication failed" in done.stderr, done.stderr


@needs_kcat
def test_kcat_wrong_password_is_an_authentication_error(broker: Broker, certs: Certs) -> None:
    conf = kcat_conf(certs, "SASL_SSL-PLAIN", password="not-the-secret-9")
    done = kcat("-b", broker.address("SASL_SSL"), *conf, "-L", "-m", "3")
    assert done.returncode != 0
    assert "Authentication failed" in done.stderr, done.stderr
    assert "not-the-secret-9" not in broker.logs()


@needs_kcat
def test_kcat_refuses_a_server_signed_by_another_ca(broker: Broker, certs: Certs, other_ca: Path) -> None:
    done = kcat("-b", broker.address("SSL"), "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={other_ca}",
                "-L", "-m", "3")  # fmt: skip
    assert done.returncode != 0
    assert "certificate verify failed" in done.stderr, done.stderr


# --- the Java client, 3.9 and 4.3 ----------------------------------------------------------------

JAVA_CASES = ["SSL", "MTLS", "SASL_SSL-SCRAM-SHA-256", "SASL_SSL-PLAIN"]


def java_config(certs: Certs, case: str, truststore: Path | None = None) -> dict[str, str]:
    listener, _, mechanism = case.partition("-")
    conf = {
        "security.protocol": "SSL" if listener == "MTLS" else listener,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(truststore or certs.ca),
    }
    if listener == "MTLS":
        conf.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.client_keystore)})
    if mechanism:
        user, pw = USERS[mechanism]
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        conf.update({
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'org.apache.kafka.common.security.{module} required username="{user}" password="{pw}";',
        })  # fmt: skip
    return conf


@pytest.mark.parametrize("case", JAVA_CASES)
def test_java_client_produces_and_consumes(broker: Broker, certs: Certs, java: JavaClient, case: str) -> None:  # noqa: F811
    bootstrap = broker.address(case.partition("-")[0])
    conf = java_config(certs, case)
    topic = unique("sec-java")
    records = [{"key": None, "value": f"v{i}".encode().hex()} for i in range(5)]
    produced = java.call("produce", bootstrap=bootstrap, topic=topic, partition=0, records=records,
                         config={**conf, "acks": "all"})  # fmt: skip
    assert [r.get("offset") for r in produced["results"]] == list(range(5)), produced
    got = java.call("consume", bootstrap=bootstrap, topic=topic, partition=0, max=5, timeout_ms=20_000,
                    config=conf, **{"from": "earliest"})  # fmt: skip
    assert [bytes.fromhex(m["value"]) for m in got["records"]] == [f"v{i}".encode() for i in range(5)]


def test_java_client_refuses_a_server_signed_by_another_ca(
    broker: Broker,
    certs: Certs,
    other_ca: Path,
    java: JavaClient,  # noqa: F811
) -> None:
    conf = {
        **java_config(certs, "SSL", truststore=other_ca),
        "default.api.timeout.ms": "15000",
        "request.timeout.ms": "10000",
    }
    with pytest.raises(JavaError) as refused:
        java.call("list_topics", bootstrap=broker.address("SSL"), config=conf)
    assert refused.value.type.endswith("SslAuthenticationException"), refused.value
    # and the broker keeps serving clients that trust it
    test_java_client_produces_and_consumes(broker, certs, java, "SASL_SSL-PLAIN")
