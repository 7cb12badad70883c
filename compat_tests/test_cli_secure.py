"""The `kcompat` CLI against secured listeners, run as a user runs it (a subprocess), against one
`kcompat serve` AND one Apache Kafka 4.3.1 broker, each with TLS and SASL listeners and the
StandardAuthorizer (super user admin; everyone else allowed where no ACL says otherwise):

    kcompat  SSL, MTLS (client certificate required), SASL_SSL (PLAIN, SCRAM-SHA-256/512),
             SASL_PLAINTEXT (PLAIN, SCRAM-SHA-512, OAUTHBEARER with unsecured JWTs)
    kafka    SASL_SSL (PLAIN, SCRAM-SHA-256/512), SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, OAUTHBEARER)

Settings come from flags, -X, KCOMPAT_* variables and a profiles file; SCRAM users are made with
`kcompat user create`, ACLs with `kcompat acl create`, and a refused read shows Kafka's error name.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from benchmarks.brokers import KafkaBroker
from compat_tests.test_cli_tools import KCOMPAT
from compat_tests.test_security import Certs
from kcompat.testing import TEST_DEFAULTS, Broker, free_port

pytestmark = pytest.mark.timeout(300)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHZ = {
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "super.users": "User:admin;User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "true",
}
PLAIN_JAAS_ADMIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'user_bob="bob-secret" user_admin="admin-secret";')  # fmt: skip


class SecureKafka(KafkaBroker):
    """Kafka 4.3.1 with SASL_SSL and SASL_PLAINTEXT listeners beside the PLAINTEXT readiness one."""

    def __init__(self, workdir: Path, certs: Certs) -> None:
        super().__init__(workdir)
        self.certs = certs
        self.extra = {"SASL_SSL": free_port(), "SASL_PLAINTEXT": free_port()}

    def address(self, listener: str) -> str:
        return f"{self.host}:{self.extra[listener]}"

    def properties(self) -> dict[str, str]:
        props = super().properties()
        extra = ",".join(f"{n}://{self.host}:{p}" for n, p in self.extra.items())
        props["listeners"] += "," + extra
        props["advertised.listeners"] += "," + extra
        props["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
        props["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
        for listener in ("sasl_ssl", "sasl_plaintext"):
            prefix = f"listener.name.{listener}"
            props[f"{prefix}.plain.sasl.jaas.config"] = PLAIN_JAAS_ADMIN
            for m in ("scram-sha-256", "scram-sha-512"):
                props[f"{prefix}.{m}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
            props[f"{prefix}.oauthbearer.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
            )
        props["listener.name.sasl_ssl.ssl.keystore.type"] = "PEM"
        props["listener.name.sasl_ssl.ssl.keystore.location"] = str(self.certs.dir / "kafka-server.pem")
        props.update(AUTHZ)
        return props


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    c = Certs(tmp_path_factory.mktemp("certs"))
    # Java's PEM keystore: a PKCS#8 key, then the chain.
    key = serialization.load_pem_private_key(c.server_key.encode(), None)
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (c.dir / "kafka-server.pem").write_bytes(pkcs8 + c.server_chain.encode())
    return c


@pytest.fixture(scope="module")
def kcompat_secure(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("cli-secure")
    props = {
        **TEST_DEFAULTS,
        **AUTHZ,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "ssl.keystore.location": str(certs.server_p12),
        "ssl.keystore.password": "store-pw",
        "listener.name.mtls.ssl.truststore.location": str(certs.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        "sasl.jaas.config": PLAIN_JAAS_ADMIN,
        "connection.failed.authentication.delay.ms": "50",
    }
    b = Broker(
        base / "data",
        base / "kcompat.log",
        overrides=props,
        listeners={n: free_port() for n in ("SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT")},
    )
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def kafka_secure(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[SecureKafka]:
    why = KafkaBroker.available()
    if why:
        pytest.fail(why, pytrace=False)
    broker = SecureKafka(tmp_path_factory.mktemp("kafka-secure") / "w", certs)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module", params=["kcompat", "kafka"])
def target(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.param}_secure")


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kc(tmp_path: Path) -> Run:
    """kc(*args, input=None, ok=True, env={}): `kcompat ARGS` with no KCOMPAT_* from outside and a
    profiles file of this test's own."""

    def run(*args: str, input: str | None = None, ok: bool = True, env: dict[str, str] | None = None) -> Any:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "KCOMPAT_"))}
        result = subprocess.run(
            [*KCOMPAT, *args], input=input, capture_output=True, text=True, timeout=120,
            env={**base, "KCOMPAT_PROFILES": str(tmp_path / "profiles.toml"), **(env or {})},
        )  # fmt: skip
        if ok and result.returncode != 0:
            pytest.fail(
                f"kcompat {' '.join(args)} exited {result.returncode}:\n{result.stderr}", pytrace=False
            )
        return result

    return run


def admin_flags(target: Any, certs: Certs) -> list[str]:
    return ["-b", target.address("SASL_SSL"), "--cacert", str(certs.ca), "--sasl-mechanism", "PLAIN",
            "--user", "admin", "--password", "admin-secret"]  # fmt: skip


def round_trip(kc: Run, flags: list[str], topic: str, env: dict[str, str] | None = None) -> None:
    lines = [f"{topic}-{i}" for i in range(5)]
    kc("produce", topic, *flags, input="\n".join(lines) + "\n", env=env)
    assert kc("consume", topic, *flags, env=env).stdout.splitlines()[-5:] == lines


def test_every_mechanism_produces_and_consumes(kc: Run, target: Any, certs: Certs) -> None:
    admin = admin_flags(target, certs)
    kc("user", "create", "dave", "--new-password", "dave-secret", "--mechanism", "SCRAM-SHA-256", *admin)
    kc("user", "create", "alice", "--new-password", "alice-secret", "--mechanism", "SCRAM-SHA-512", *admin)
    ca = ["--cacert", str(certs.ca)]
    cases: dict[str, list[str]] = {
        "SASL_SSL-PLAIN": admin,
        "SASL_SSL-SCRAM-SHA-256": ["-b", target.address("SASL_SSL"), *ca, "--sasl-mechanism", "SCRAM-SHA-256",
                                   "--user", "dave", "--password", "dave-secret"],
        "SASL_SSL-SCRAM-SHA-512": ["-b", target.address("SASL_SSL"), "-X", f"tls.ca={certs.ca}",
                                   "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "user=alice", "-X", "pass=alice-secret"],
        "SASL_PLAINTEXT-OAUTHBEARER": ["-b", target.address("SASL_PLAINTEXT"), "--sasl-mechanism", "OAUTHBEARER",
                                       "--user", "carol"],
    }  # fmt: skip
    if isinstance(target, Broker):
        cases["SSL"] = ["-b", target.address("SSL"), *ca]
        cases["MTLS"] = ["-b", target.address("MTLS"), *ca, "--tls-cert", str(certs.client_cert),
                         "--tls-key", str(certs.client_key)]  # fmt: skip
    for name, flags in cases.items():
        topic = f"sec-{name.lower()}-{uuid.uuid4().hex[:6]}"
        kc("topic", "create", topic, "-p", "1", *admin)
        round_trip(kc, flags, topic)
        info = json.loads(kc("cluster", "info", "--output", "json", *flags).stdout)
        assert info["bootstrap"] == flags[1], name


def test_profiles_and_environment_carry_the_same_settings(kc: Run, target: Any, certs: Certs) -> None:
    topic = f"sec-profile-{uuid.uuid4().hex[:6]}"
    made = kc("profile", "create", "secure", "-b", target.address("SASL_SSL"), "--cacert", str(certs.ca),
              "--sasl-mechanism", "PLAIN", "--user", "admin", "--password", "admin-secret")  # fmt: skip
    assert made.stdout.startswith("created profile secure in ") and made.stdout.endswith("(now current)\n")
    kc("profile", "create", "other", "-b", "127.0.0.1:1", "--no-use")
    listed = json.loads(kc("profile", "list", "--output", "json").stdout)
    assert [(p["profile"], p["current"]) for p in listed] == [("other", False), ("secure", True)]
    shown = kc("profile", "show").stdout
    assert "pass=*****" in shown and "admin-secret" not in shown
    kc("topic", "create", topic, "-p", "1")  # no flags: the current profile
    round_trip(kc, [], topic)
    down = kc("topic", "list", "--profile", "other", ok=False)
    assert down.returncode == 3
    kc("profile", "use", "other")
    assert kc("topic", "list", ok=False).returncode == 3
    assert kc("topic", "list", env={"KCOMPAT_PROFILE": "secure"}).returncode == 0
    kc("profile", "delete", "secure")
    assert kc("topic", "list", "--profile", "secure", ok=False).stderr.startswith(
        "kcompat: no profile secure"
    )

    env = {"KCOMPAT_BOOTSTRAP": target.address("SASL_SSL"), "KCOMPAT_TLS_CA": str(certs.ca),
           "KCOMPAT_SASL_MECHANISM": "SCRAM-SHA-512", "KCOMPAT_USER": "alice", "KCOMPAT_PASS": "alice-secret",
           "KCOMPAT_PROFILE": "other"}  # fmt: skip
    kc("user", "create", "alice", "--new-password", "alice-secret", "--mechanism", "SCRAM-SHA-512",
       *admin_flags(target, certs))  # fmt: skip
    round_trip(kc, [], topic, env=env)


def test_refusals_say_what_to_do(kc: Run, target: Any, certs: Certs) -> None:
    plain = kc("topic", "list", "-b", target.address("SASL_PLAINTEXT"), ok=False)
    assert plain.returncode == 3 and len(plain.stderr.splitlines()) == 1
    assert (
        "closed the connection; if the listener is SASL or TLS, connect with --sasl-mechanism" in plain.stderr
    )
    no_tls = kc("topic", "list", "-b", target.address("SASL_SSL"), "--timeout", "3", ok=False)
    assert no_tls.returncode == 3 and "--tls" in no_tls.stderr
    untrusted = kc("topic", "list", "-b", target.address("SASL_SSL"), "--tls", ok=False)
    assert untrusted.returncode == 3 and "certificate was not accepted" in untrusted.stderr
    assert "--cacert" in untrusted.stderr
    wrong = kc("topic", "list", *admin_flags(target, certs)[:-1], "wrong", ok=False)
    assert wrong.returncode == 1 and len(wrong.stderr.splitlines()) == 1
    assert "SASL_AUTHENTICATION_FAILED" in wrong.stderr and "--password" in wrong.stderr
    mech = kc("topic", "list", "-b", target.address("SASL_PLAINTEXT"), "--sasl-mechanism", "SCRAM-SHA-256",
              "--user", "a", "--password", "b", ok=False) if isinstance(target, Broker) else None  # fmt: skip
    if mech is not None:
        assert mech.returncode == 1 and "UNSUPPORTED_SASL_MECHANISM" in mech.stderr
        assert "PLAIN, SCRAM-SHA-512, OAUTHBEARER" in mech.stderr


def test_users_and_acls(kc: Run, target: Any, certs: Certs) -> None:
    admin = admin_flags(target, certs)
    kc("user", "create", "erin", "--new-password", "erin-secret", "--mechanism", "SCRAM-SHA-512", *admin)
    kc("user", "create", "erin", "--new-password", "erin-secret", "--mechanism", "SCRAM-SHA-256", *admin)
    users = {u["user"]: u for u in json.loads(kc("user", "list", "--output", "json", *admin).stdout)}
    assert sorted(m["mechanism"] for m in users["erin"]["mechanisms"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    erin = ["-b", target.address("SASL_SSL"), "--cacert", str(certs.ca), "--sasl-mechanism", "SCRAM-SHA-512",
            "--user", "erin", "--password", "erin-secret"]  # fmt: skip
    topic = f"sec-acl-{uuid.uuid4().hex[:6]}"
    kc("topic", "create", topic, "-p", "1", *admin)
    round_trip(kc, erin, topic)

    made = kc("acl", "create", "--principal", "User:erin", "--operation", "read", "--operation", "describe",
              "--topic", topic, "--permission", "deny", *admin)  # fmt: skip
    assert made.stdout.startswith("created 2 ACLs")
    listed = json.loads(kc("acl", "list", "--topic", topic, "--output", "json", *admin).stdout)
    assert sorted((a["principal"], a["operation"], a["permission"], a["pattern"]) for a in listed) == [
        ("User:erin", "DESCRIBE", "DENY", "LITERAL"),
        ("User:erin", "READ", "DENY", "LITERAL"),
    ]
    refused = kc("consume", topic, *erin, ok=False)
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1
    assert "TOPIC_AUTHORIZATION_FAILED" in refused.stderr and "kcompat acl list" in refused.stderr
    everything = kc("acl", "delete", *admin, ok=False)
    assert everything.returncode == 2 and "--all" in everything.stderr
    gone = json.loads(kc("acl", "delete", "--principal", "User:erin", "--output", "json", *admin).stdout)
    assert len(gone) == 2
    assert json.loads(kc("acl", "list", "--topic", topic, "--output", "json", *admin).stdout) == []
    kc("consume", topic, *erin)

    assert kc("user", "delete", "erin", *admin).stdout == "deleted user erin (SCRAM-SHA-256, SCRAM-SHA-512)\n"
    assert "erin" not in {
        u["user"] for u in json.loads(kc("user", "list", "--output", "json", *admin).stdout)
    }
    locked_out = kc("topic", "list", *erin, ok=False)
    assert locked_out.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in locked_out.stderr
