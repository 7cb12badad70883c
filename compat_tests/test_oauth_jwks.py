"""OAUTHBEARER with signed JWTs, validated against a JWKS, with real clients against one
`kcompat serve`:

    SASL_PLAINTEXT  OAuthBearerValidatorCallbackHandler, JWKS from a file:// URL
    SASL_SSL        the same validator, JWKS served over HTTP on 127.0.0.1 by the test

Keys, tokens and certificates are made in the test run (cryptography, pyjwt, trustme). librdkafka
gets its token from `oauth_cb`, the Java client (kafka-topics) from a file through Kafka's
OAuthBearerLoginCallbackHandler; a good token produces and consumes, an expired or wrongly
signed one gets the client's authentication error while the broker keeps serving the others.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import trustme
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from support import QUICK_JVM, kafka_tool

from compat_tests.client_data import unique
from kcompat.testing import TEST_DEFAULTS, Broker, free_port

pytestmark = pytest.mark.timeout(120)

VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ISSUER, AUDIENCE = "https://idp.kcompat.test", "kafka"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
ROGUE_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # not in the JWKS


def jwks() -> dict[str, Any]:
    rsa_jwk = jwt.algorithms.RSAAlgorithm.to_jwk(RSA_KEY.public_key(), as_dict=True)
    ec_jwk = jwt.algorithms.ECAlgorithm.to_jwk(EC_KEY.public_key(), as_dict=True)
    return {"keys": [{**rsa_jwk, "kid": "rsa-1", "use": "sig"}, {**ec_jwk, "kid": "ec-1", "use": "sig"}]}


def token(sub: str, key: Any = RSA_KEY, kid: str = "rsa-1", alg: str = "RS256", life_s: int = 600) -> str:
    now = int(time.time())
    claims = {
        "sub": sub,
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now - 5,
        "exp": now + life_s,
        "scope": "kafka",
    }
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})


class Files:
    def __init__(self, d: Path) -> None:
        ca = trustme.CA()
        self.ca = d / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        self.server_pem = d / "server.pem"
        ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
            str(self.server_pem)
        )
        self.jwks = d / "jwks.json"
        self.jwks.write_text(json.dumps(jwks()))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    return Files(tmp_path_factory.mktemp("oauth"))


@pytest.fixture(scope="module")
def jwks_url() -> Iterator[str]:
    body = json.dumps(jwks()).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, files: Files, jwks_url: str) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("oauth-broker")
    props = {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "ssl.keystore.location": str(files.server_pem),
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": files.jwks.as_uri(),
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_url,
        "connection.failed.authentication.delay.ms": "50",
    }
    b = Broker(
        base / "data",
        base / "kcompat.log",
        overrides=props,
        listeners={n: free_port() for n in ("SASL_SSL", "SASL_PLAINTEXT")},
    )
    b.start()
    yield b
    b.stop()


def conf(broker: Broker, files: Files, listener: str, jws: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bootstrap.servers": broker.address(listener),
        "security.protocol": listener,
        "sasl.mechanisms": "OAUTHBEARER",
        # librdkafka asks for a token; it must believe the token is fresh, so the expiry it is told
        # is always ahead: only the broker judges the token itself
        "oauth_cb": lambda _config: (jws, time.time() + 600),
    }
    if listener == "SASL_SSL":
        out["ssl.ca.location"] = str(files.ca)
    return out


@pytest.mark.parametrize(
    ("listener", "signer"), [("SASL_PLAINTEXT", "RS256"), ("SASL_SSL", "ES256")]
)  # SASL_SSL with RS256: after the expired token below
def test_confluent_kafka_with_a_signed_token(
    broker: Broker, files: Files, listener: str, signer: str
) -> None:
    jws = token("svc-orders") if signer == "RS256" else token("svc-orders", EC_KEY, "ec-1", "ES256")
    c_conf = conf(broker, files, listener, jws)
    topic = unique("oauth-jwks")
    p = Producer(c_conf)
    errors: list[Any] = []
    p.produce(topic, value=b"signed", partition=0, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(30) == 0 and errors == [None]
    c = Consumer({**c_conf, "group.id": unique("g"), "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + 20
    m = None
    while m is None and time.monotonic() < deadline:
        m = c.poll(0.3)
    c.close()
    assert m is not None and m.error() is None and m.value() == b"signed"


@pytest.mark.parametrize(
    ("listener", "bad", "logged"),
    [
        ("SASL_SSL", "expired", "Signature has expired"),
        ("SASL_PLAINTEXT", "rogue", "Signature verification failed"),
    ],
)
def test_bad_tokens_are_the_clients_authentication_error(
    broker: Broker, files: Files, listener: str, bad: str, logged: str
) -> None:
    jws = token(f"svc-{bad}", life_s=-300) if bad == "expired" else token(f"svc-{bad}", ROGUE_KEY)
    errors: list[KafkaError] = []
    p = Producer({**conf(broker, files, listener, jws), "error_cb": errors.append})
    p.produce("never", b"x")
    deadline = time.monotonic() + 15
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        p.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    del p
    log = broker.logs()
    assert (
        f"failed authentication with OAUTHBEARER: Authentication failed: the token is refused: {logged}"
        in log
    )
    assert jws not in log  # never the token
    test_confluent_kafka_with_a_signed_token(broker, files, listener, "RS256")  # the others still served


def test_java_client_with_a_token_file(broker: Broker, files: Files, tmp_path: Path) -> None:
    token_file = tmp_path / "token.jwt"
    token_file.write_text(token("svc-java"))
    client = tmp_path / "client.properties"
    client.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={files.ca}\n"
        "sasl.mechanism=OAUTHBEARER\n"
        "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
        f"sasl.oauthbearer.token.endpoint.url={token_file.as_uri()}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;\n"
    )
    topic = unique("oauth-java")
    jvm = [*QUICK_JVM, f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={token_file.as_uri()}"]
    kafka_tool(
        "kafka-topics",
        "--bootstrap-server",
        broker.address("SASL_SSL"),
        "--command-config",
        str(client),
        "--create",
        "--topic",
        topic,
        jvm_opts=jvm,
    )
    listed = kafka_tool(
        "kafka-topics", "--bootstrap-server", broker.address("SASL_SSL"), "--command-config", str(client),
        "--list", jvm_opts=jvm,
    )  # fmt: skip
    assert topic in listed.stdout.split()
