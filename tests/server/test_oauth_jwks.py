"""OAUTHBEARER with signed JWTs (kcompat.server.auth.oauth_jwks): tokens signed in the test with keys
made in the test, checked against a JWKS file or a JWKS served over HTTP on 127.0.0.1."""

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
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kcompat.config import BrokerConfig, ConfigError
from kcompat.config.listener_security import ListenerSecurity
from kcompat.config.security import OAuthSettings, SaslSettings
from kcompat.security.sasl_exchange import SaslState
from kcompat.server.auth.oauth_jwks import JwksValidator
from kcompat.server.auth.sasl import SaslAuthenticator
from tests.server.test_sasl import authenticate, handshake

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
ISSUER, AUDIENCE = "https://idp.example", "kafka"
JWKS_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def jwk(key: Any, kid: str, alg: str) -> dict[str, Any]:
    algorithm = jwt.algorithms.RSAAlgorithm if alg.startswith("RS") else jwt.algorithms.ECAlgorithm
    out: dict[str, Any] = algorithm.to_jwk(key.public_key(), as_dict=True)
    return {**out, "kid": kid, "use": "sig", "alg": alg}


JWKS = {"keys": [jwk(RSA_KEY, "rsa-1", "RS256"), jwk(EC_KEY, "ec-1", "ES256")]}


def token(key: Any = RSA_KEY, kid: str | None = "rsa-1", alg: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": "svc-orders", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, **claims}
    body = {k: v for k, v in body.items() if v is not None}  # a claim given as None is left out
    return jwt.encode(body, key, algorithm=alg, headers={"kid": kid} if kid else None)


@pytest.fixture(scope="module")
def jwks_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps(JWKS))
    return path.as_uri()


def validator(url: str, **kw: Any) -> JwksValidator:
    defaults: dict[str, Any] = {"expected_audience": (AUDIENCE,), "expected_issuer": ISSUER}
    return JwksValidator(OAuthSettings(url, **{**defaults, **kw}))


def test_good_rs256_and_es256_tokens_give_the_sub_principal(jwks_file: str) -> None:
    v = validator(jwks_file)
    principal, exp = v.validate(token())
    assert principal == "svc-orders" and exp - time.time() == pytest.approx(600, abs=5)
    assert v.validate(token(EC_KEY, "ec-1", "ES256", sub="svc-es"))[0] == "svc-es"
    assert v.validate(token(kid=None, sub="no-kid"))[0] == "no-kid"  # the one RSA key of the set
    named = validator(jwks_file, sub_claim="client_id")
    assert named.validate(token(client_id="app-7"))[0] == "app-7"
    with pytest.raises(ValueError, match="no client_id claim"):
        named.validate(token())


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda: token(exp=int(time.time()) - 120), "expired"),
        (lambda: token(nbf=int(time.time()) + 120), "not yet valid"),
        (lambda: token(iat=int(time.time()) + 120), "not yet valid"),
        (lambda: token(exp=None), 'missing the "exp" claim'),
        (lambda: token(iat=None), 'missing the "iat" claim'),
        (lambda: token(OTHER_RSA_KEY), "Signature verification failed"),  # right kid, wrong key
        (lambda: token(kid="rsa-9"), "no RSA key with kid 'rsa-9'"),
        (lambda: token(EC_KEY, "rsa-1", "ES256"), "no EC key with kid 'rsa-1'"),
        (lambda: token(aud="billing"), "Audience doesn't match"),
        (lambda: token(iss="https://evil.example"), "Invalid issuer"),
        (lambda: token(sub=None), "no sub claim"),
        (lambda: token(scope={"read": True}), "scope claim is neither"),
        (lambda: token(None, alg="none"), "alg 'none' is not one of"),
        # HS256 with the public key as the shared secret: the classic confusion, refused by its alg
        (lambda: _hs256_with_public_key(), "alg 'HS256' is not one of"),
        (lambda: "not.a.jwt", "not a JWS"),
    ],
)
def test_refusals(jwks_file: str, make: Any, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        validator(jwks_file).validate(make())


def _hs256_with_public_key() -> str:
    """A token signed with HMAC over the public key's PEM, made by hand (pyjwt rightly refuses to)."""
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    now = int(time.time())
    signing = (
        b64(json.dumps({"alg": "HS256", "kid": "rsa-1"}).encode())
        + "."
        + b64(json.dumps({"sub": "x", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 60}).encode())
    )
    return signing + "." + b64(hmac.new(pem, signing.encode(), hashlib.sha256).digest())


def test_clock_skew_and_audience_settings(jwks_file: str) -> None:
    late = token(exp=int(time.time()) - 10)
    assert validator(jwks_file).validate(late)[0] == "svc-orders"  # within the default 30 s skew
    with pytest.raises(ValueError, match="expired"):
        validator(jwks_file, clock_skew_s=0).validate(late)
    assert validator(jwks_file, expected_audience=("billing", "kafka")).validate(token())[0] == "svc-orders"
    with pytest.raises(ValueError, match="Invalid audience"):  # aud present, none expected: as jose4j
        validator(jwks_file, expected_audience=()).validate(token())
    assert validator(jwks_file, expected_audience=(), expected_issuer=None).validate(token(aud=None))


def test_the_sasl_exchange_answers_invalid_token_then_fails(jwks_file: str) -> None:
    settings = SaslSettings(("OAUTHBEARER",), {}, 524288, OAuthSettings(jwks_file))
    security = ListenerSecurity("SASL_SSL", "SASL_SSL", None, settings, 0, 0)
    v = validator(jwks_file)
    good = SaslAuthenticator(security, lambda u, m: None, v.validate)
    handshake(good, "OAUTHBEARER")
    _, response = authenticate(good, f"n,,\x01auth=Bearer {token()}\x01\x01".encode())
    assert (
        response.error_code == 0 and good.state is SaslState.COMPLETE and good.principal == "User:svc-orders"
    )
    assert response.session_lifetime_ms == pytest.approx(600_000, abs=5_000)  # until the token's exp
    bad = SaslAuthenticator(security, lambda u, m: None, v.validate)
    handshake(bad, "OAUTHBEARER")
    expired = token(exp=int(time.time()) - 300)
    _, challenge = authenticate(bad, f"n,,\x01auth=Bearer {expired}\x01\x01".encode())
    assert challenge.error_code == 0 and json.loads(challenge.auth_bytes) == {"status": "invalid_token"}
    step, failed = authenticate(bad, b"\x01")
    assert failed.error_code == 58 and "expired" in failed.error_message  # SASL_AUTHENTICATION_FAILED
    assert step.close is not None and "svc-orders" not in step.close and expired not in step.close


@pytest.fixture
def jwks_server() -> Iterator[tuple[str, dict[str, Any]]]:
    served: dict[str, Any] = {"keys": [jwk(RSA_KEY, "rsa-1", "RS256")], "fetches": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served["fetches"] += 1
            body = json.dumps({"keys": served["keys"]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json", served
    server.shutdown()
    server.server_close()


def test_http_jwks_is_refetched_when_a_new_kid_appears(jwks_server: tuple[str, dict[str, Any]]) -> None:
    url, served = jwks_server
    v = validator(url, refresh_ms=3_600_000)  # no periodic refresh within the test
    assert v.validate(token())[0] == "svc-orders" and served["fetches"] == 1
    served["keys"] = [jwk(OTHER_RSA_KEY, "rsa-2", "RS256")]  # the provider rotates its key
    rotated = token(OTHER_RSA_KEY, "rsa-2")
    with pytest.raises(ValueError, match="no RSA key with kid 'rsa-2'"):
        v.validate(rotated)  # unknown kid: refused now, and the set is fetched again off the loop
    deadline = time.monotonic() + 10
    while True:
        try:
            assert v.validate(rotated)[0] == "svc-orders"
            break
        except ValueError:
            assert time.monotonic() < deadline, "the JWKS was not fetched again"
            time.sleep(0.05)
    assert served["fetches"] == 2
    with pytest.raises(ValueError, match="no RSA key with kid 'rsa-1'"):
        v.validate(token())  # the old key is gone
    v.keys.stop()


def test_http_jwks_is_refetched_every_refresh_ms(jwks_server: tuple[str, dict[str, Any]]) -> None:
    url, served = jwks_server
    v = validator(url, refresh_ms=100)
    try:
        deadline = time.monotonic() + 10
        while served["fetches"] < 3:  # the first at start, then one per refresh (at most one a second)
            assert time.monotonic() < deadline, f"{served['fetches']} fetches"
            time.sleep(0.05)
    finally:
        v.keys.stop()
    assert v.validate(token())[0] == "svc-orders"


def test_unreadable_jwks_stops_start_up(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read a JWKS there"):
        validator((tmp_path / "missing.json").as_uri())
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="cannot read a JWKS there"):
        validator((tmp_path / "bad.json").as_uri())


def test_settings_are_read_as_kafka_names_them() -> None:
    config = BrokerConfig(
        {
            "listeners": "SASL_SSL://127.0.0.1:1",
            "ssl.keystore.location": "/x.pem",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": JWKS_VALIDATOR,
            "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks",
            "sasl.oauthbearer.expected.audience": "kafka, billing",
            "sasl.oauthbearer.expected.issuer": ISSUER,
            "sasl.oauthbearer.sub.claim.name": "client_id",
            "sasl.oauthbearer.clock.skew.seconds": "5",
            "sasl.oauthbearer.jwks.endpoint.refresh.ms": "60000",
        }
    )
    sasl = config.listener_security["SASL_SSL"].sasl
    assert sasl is not None and sasl.oauth == OAuthSettings(
        "https://idp/jwks", 60000, ("kafka", "billing"), ISSUER, "scope", "client_id", 5
    )
    with pytest.raises(ConfigError, match=r"jwks\.endpoint\.url"):
        BrokerConfig(
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:1",
                "sasl.enabled.mechanisms": "OAUTHBEARER",
                "sasl.server.callback.handler.class": JWKS_VALIDATOR,
                "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks",
            }
        )
