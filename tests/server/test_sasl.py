"""The SASL exchange of a connection step by step (the state table in kcompat.security.sasl_exchange,
its mechanisms bound in kcompat.server.auth.sasl), the SCRAM credential store, and the per-listener
security settings."""

from __future__ import annotations

import base64
import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scramp import ScramClient, ScramMechanism

from kcompat.config import BrokerConfig, ConfigError
from kcompat.config.listener_security import ListenerSecurity
from kcompat.config.security import SaslSettings, parse_jaas, plain_users
from kcompat.security.sasl_exchange import OTHER, TRANSITIONS, Action, Plain, SaslExchange, SaslState
from kcompat.server.auth.sasl import SaslAuthenticator
from kcompat.storage.scram_credentials import ScramCredentialStore, from_password, parse_add_scram
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import decode_response, encode_request

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="x" user_alice="alice-pw" user_bob="b\\"q";'


def security(
    reauth_ms: int = 0, mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
) -> ListenerSecurity:
    return ListenerSecurity(
        "SASL_SSL", "SASL_SSL", None, SaslSettings(mechanisms, {"PLAIN": JAAS}), reauth_ms, 100
    )


@pytest.fixture
def store(tmp_path: Path) -> ScramCredentialStore:
    s = ScramCredentialStore(tmp_path)
    s.upsert("carol", "SCRAM-SHA-256", from_password("SCRAM-SHA-256", "carol-pw"))
    s.upsert("carol", "SCRAM-SHA-512", from_password("SCRAM-SHA-512", "carol-pw", iterations=8192))
    return s


def auth(store: ScramCredentialStore | None = None, **kw: Any) -> SaslAuthenticator:
    return SaslAuthenticator(security(**kw), store.get if store else lambda u, m: None)


def frame(api_key: int, version: int, body: dict[str, Any], correlation: int = 1) -> memoryview:
    return memoryview(encode_request(api_key, version, correlation, body)[4:])


def answer(api_key: int, version: int, chunks: list[Any] | None) -> Any:
    assert chunks is not None
    data = b"".join(bytes(c) for c in chunks)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    return decode_response(api_key, version, data[4:])[1]


def handshake(a: SaslExchange, mechanism: str, version: int = 1, now: float = 0.0) -> Any:
    step = a.step(frame(17, version, {"mechanism": mechanism}), now)
    return step, answer(17, version, step.chunks)


def authenticate(a: SaslExchange, token: bytes, version: int = 2, now: float = 0.0) -> Any:
    step = a.step(frame(36, version, {"auth_bytes": token}), now)
    return step, answer(36, version, step.chunks)


def test_only_api_versions_and_handshake_come_first() -> None:
    a = auth()
    assert a.step(frame(18, 3, {"client_software_name": "x", "client_software_version": "1"}), 0).to_broker
    step = a.step(frame(3, 12, {"topics": None}), 0)  # Metadata before authenticating: closed
    assert step.close is not None and "unexpected request (API key 3 v12)" in step.close and not step.chunks
    b = auth()
    assert "API key 36" in (b.step(frame(36, 2, {"auth_bytes": b"x"}), 0).close or "")  # Authenticate first
    c = auth()
    handshake(c, "PLAIN")
    assert c.step(frame(17, 1, {"mechanism": "PLAIN"}), 0).close is not None  # a second handshake


def test_every_state_with_request_headers_has_a_row_for_other_requests() -> None:
    """RAW_TOKEN alone has no row: its frames are bare tokens, not requests."""
    assert {state for state, _ in TRANSITIONS} == set(SaslState) - {SaslState.RAW_TOKEN}
    assert all((state, OTHER) in TRANSITIONS for state, _ in TRANSITIONS)
    assert TRANSITIONS[(SaslState.AUTHENTICATE, OTHER)] is Action.UNEXPECTED


def test_the_exchange_runs_without_a_listener_or_a_store() -> None:
    """The pure exchange takes its mechanisms from the caller; `now` only dates the session."""
    started: list[str] = []

    def start(name: str) -> Plain:
        started.append(name)
        return Plain({"alice": "alice-pw"})

    a = SaslExchange(("PLAIN",), start, reauth_ms=1000)
    handshake(a, "PLAIN")
    _, body = authenticate(a, b"\0alice\0alice-pw", now=3.0)
    assert started == ["PLAIN"] and body.error_code == 0 and a.session_expires == 4.0
    assert a.state is SaslState.COMPLETE and a.principal == "User:alice"


def test_unknown_mechanism_gets_the_enabled_list() -> None:
    step, body = handshake(auth(mechanisms=("PLAIN",)), "GSSAPI")
    assert body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and body.mechanisms == ["PLAIN"]
    assert step.close is not None


def test_plain_success_session_lifetime_and_expiry() -> None:
    a = auth(reauth_ms=60_000)
    step, body = handshake(a, "PLAIN")
    assert body.error_code == 0 and body.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    step, body = authenticate(a, b"\0alice\0alice-pw", now=10.0)
    assert body.error_code == 0 and body.session_lifetime_ms == 60_000 and step.close is None
    assert a.principal == "User:alice" and a.state is SaslState.COMPLETE
    assert a.step(frame(3, 12, {"topics": None}), 69.0).to_broker
    expired = a.step(frame(3, 12, {"topics": None}), 70.0)
    assert expired.close is not None and "expired" in expired.close


@pytest.mark.parametrize(
    "token", [b"\0alice\0wrong", b"\0nobody\0alice-pw", b"bob\0alice\0alice-pw", b"alice-pw"]
)
def test_plain_failures(token: bytes) -> None:
    a = auth()
    handshake(a, "PLAIN")
    step, body = authenticate(a, token)
    assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and body.error_message
    assert step.close is not None and step.delay_s == 0.1 and a.principal is None
    assert "alice-pw" not in step.close and "wrong" not in step.close  # never a password in the log line


def test_plain_v0_handshake_means_bare_tokens() -> None:
    a = auth()
    handshake(a, "PLAIN", version=0)
    step = a.step(memoryview(b'\0bob\0b"q'), 0)  # the JAAS value's escaped quote
    assert step.chunks == [b"\0\0\0\0"] and a.principal == "User:bob"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange(store: ScramCredentialStore, mechanism: str) -> None:
    a = auth(store)
    handshake(a, mechanism)
    client = ScramClient([mechanism], "carol", "carol-pw")
    _, body = authenticate(a, client.get_client_first().encode())
    assert body.error_code == 0 and a.principal is None
    client.set_server_first(body.auth_bytes.decode())
    _, body = authenticate(a, client.get_client_final().encode())
    assert body.error_code == 0
    client.set_server_final(body.auth_bytes.decode())  # the server proved it holds the key
    assert a.principal == "User:carol"


@pytest.mark.parametrize(("user", "password"), [("carol", "nope"), ("dave", "carol-pw")])
def test_scram_failures(store: ScramCredentialStore, user: str, password: str) -> None:
    a = auth(store)
    handshake(a, "SCRAM-SHA-512")
    client = ScramClient(["SCRAM-SHA-512"], user, password)
    step, body = authenticate(a, client.get_client_first().encode())
    if body.error_code == 0:
        client.set_server_first(body.auth_bytes.decode())
        step, body = authenticate(a, client.get_client_final().encode())
    assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and step.close is not None


def test_reauthentication_keeps_the_principal() -> None:
    a = auth(reauth_ms=1000)
    handshake(a, "PLAIN")
    authenticate(a, b"\0alice\0alice-pw")
    _, body = handshake(a, "PLAIN", now=0.5)  # KIP-368: a new exchange on the same connection
    assert body.error_code == 0
    _, body = authenticate(a, b"\0alice\0alice-pw", now=0.9)
    assert body.error_code == 0 and body.session_lifetime_ms == 1000
    assert a.step(frame(3, 12, {"topics": None}), 1.5).to_broker  # the new session runs from 0.9
    handshake(a, "PLAIN", now=1.6)
    _, body = authenticate(a, b'\0bob\0b"q', now=1.6)
    assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and "principals" in (
        body.error_message or ""
    )


def test_credential_store_keeps_no_password(tmp_path: Path, store: ScramCredentialStore) -> None:
    store.save()
    text = (tmp_path / "kcompat-scram-credentials").read_text()
    assert "carol-pw" not in text
    assert json.loads(text)["carol"]["SCRAM-SHA-512"]["iterations"] == 8192
    again = ScramCredentialStore(tmp_path)
    again.load()
    c = again.get("carol", "SCRAM-SHA-256")
    assert c is not None
    # the same keys scramp derives from the password and salt
    assert ScramMechanism("SCRAM-SHA-256").make_auth_info("carol-pw", 4096, c.salt) == (
        c.salt,
        c.stored_key,
        c.server_key,
        4096,
    )


def test_add_scram_syntax() -> None:
    user, mechanism, c = parse_add_scram("SCRAM-SHA-512=[name=alice,password=a,b,iterations=8192]")
    assert (user, mechanism, c.iterations) == ("alice", "SCRAM-SHA-512", 8192)
    assert parse_add_scram('SCRAM-SHA-256=[name=bob,password="x,y=z"]')[0] == "bob"
    for bad in (
        "SCRAM-SHA-1=[name=a,password=b]",
        "SCRAM-SHA-256=[name=a]",
        "SCRAM-SHA-256=[name=a,password=b,iterations=10]",
    ):
        with pytest.raises(ValueError, match="--add-scram"):
            parse_add_scram(bad)


def test_jaas_parsing() -> None:
    assert plain_users(JAAS) == {"alice": "alice-pw", "bob": 'b"q'}
    assert parse_jaas("a.B required;").options == {}
    with pytest.raises(ConfigError, match=r"sasl\.jaas\.config is invalid"):
        parse_jaas("PlainLoginModule required user_a=")
    with pytest.raises(ConfigError):
        parse_jaas('PlainLoginModule required user_a="x"')  # no closing ';'


def test_listener_prefixed_settings_override_the_broker_wide_ones() -> None:
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2,INTERNAL://127.0.0.1:3",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": JAAS,
            "connections.max.reauth.ms": "5000",
            "listener.name.sasl_plaintext.connections.max.reauth.ms": "7000",
        }
    )
    sec = cfg.listener_security
    assert sec["PLAINTEXT"].sasl is None and sec["PLAINTEXT"].ssl is None
    assert sec["SASL_PLAINTEXT"].sasl is not None and sec["SASL_PLAINTEXT"].sasl.mechanisms == (
        "SCRAM-SHA-512",
    )
    assert sec["SASL_PLAINTEXT"].reauth_ms == 7000 and sec["INTERNAL"].reauth_ms == 5000
    assert sec["INTERNAL"].sasl is not None and sec["INTERNAL"].sasl.jaas == {"PLAIN": JAAS}


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "SSL://127.0.0.1:1"}, "listener SSL uses TLS and needs a certificate"),
        (
            {"listeners": "SSL://127.0.0.1:1", "ssl.keystore.location": "/k", "ssl.keystore.type": "JKS"},
            "JKS is not supported",
        ),
        (
            {"listeners": "SSL://127.0.0.1:1", "ssl.keystore.location": "/k", "ssl.client.auth": "always"},
            "ssl.client.auth='always' is invalid",
        ),
        (
            {
                "listeners": "SSL://127.0.0.1:1",
                "ssl.keystore.location": "/k",
                "ssl.enabled.protocols": "TLSv1.1",
            },
            "kcompat offers TLSv1.2, TLSv1.3",
        ),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "sasl.enabled.mechanisms": "GSSAPI"}, "names GSSAPI"),
        (
            {"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "sasl.enabled.mechanisms": "PLAIN"},
            "enables PLAIN but has no users",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:1",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": "x",
            },
            "sasl.jaas.config of PLAIN is invalid",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:1",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "connections.max.reauth.ms": "-1",
            },
            "connections.max.reauth.ms='-1' is invalid",
        ),
    ],
)
def test_unusable_listener_settings(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        BrokerConfig(props)
    assert "\n" not in str(info.value)


def jws(claims: dict[str, Any], alg: str = "none") -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': alg})}.{part(claims)}."


def oauth_auth(**options: str) -> SaslAuthenticator:
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        + " ".join(f'{k}="{v}"' for k, v in options.items())
        + ";"
    )
    sec = ListenerSecurity(
        "SASL_SSL", "SASL_SSL", None, SaslSettings(("OAUTHBEARER",), {"OAUTHBEARER": jaas}), 3_600_000, 0
    )
    return SaslAuthenticator(sec, lambda u, m: None)


def test_oauthbearer_unsecured_jws() -> None:
    a = oauth_auth()
    handshake(a, "OAUTHBEARER")
    token = jws({"sub": "svc", "exp": time.time() + 30, "iat": time.time()})
    _, body = authenticate(a, f"n,,\x01auth=Bearer {token}\x01\x01".encode(), now=5.0)
    assert body.error_code == 0 and a.principal == "User:svc"
    assert 28_000 < body.session_lifetime_ms <= 30_000  # the token's expiry, before connections.max.reauth.ms


@pytest.mark.parametrize(
    ("claims", "alg", "options"),
    [
        ({"sub": "svc", "exp": 1}, "none", {}),  # expired
        ({"sub": "svc"}, "none", {}),  # no exp
        ({"exp": 2**40}, "none", {}),  # no principal claim
        ({"sub": "svc", "exp": 2**40}, "HS256", {}),  # not unsecured
        ({"sub": "svc", "exp": 2**40, "scope": "read"}, "none", {"unsecuredValidatorRequiredScope": "write"}),
    ],
)
def test_oauthbearer_refusals(claims: dict[str, Any], alg: str, options: dict[str, str]) -> None:
    a = oauth_auth(**options)
    handshake(a, "OAUTHBEARER")
    step, body = authenticate(a, f"n,,\x01auth=Bearer {jws(claims, alg)}\x01\x01".encode())
    assert (
        body.error_code == 0
        and json.loads(body.auth_bytes) == {"status": "invalid_token"}
        and step.close is None
    )
    step, body = authenticate(a, b"\x01")  # the client acknowledges the challenge: then it fails
    assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and step.close is not None


def test_oauthbearer_other_validators_are_refused() -> None:
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "sasl.enabled.mechanisms": "OAUTHBEARER"}
    handler = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
    with pytest.raises(ConfigError, match="is not supported: kcompat offers"):
        BrokerConfig({**base, handler: "com.example.MyValidator"})
    with pytest.raises(
        ConfigError, match=r"set sasl\.oauthbearer\.jwks\.endpoint\.url"
    ):  # JWKS needs its keys
        BrokerConfig(
            {
                **base,
                handler: "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            }
        )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=64),
            st.sampled_from([17, 36, 18, 3]).flatmap(
                lambda key: st.tuples(st.integers(-2, 4), st.binary(max_size=40)).map(
                    lambda vb: struct.pack(">hhi", key, vb[0], 1) + b"\0\x05kcomp" + vb[1]
                )
            ),
        ),
        max_size=6,
    ),
    st.sampled_from(["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"]),
    st.integers(0, 1),
)
def test_any_frames_give_an_answer_or_a_close_never_an_exception(
    frames: list[bytes], mechanism: str, v: int
) -> None:
    a = SaslAuthenticator(
        ListenerSecurity("X", "SASL_PLAINTEXT", None, SaslSettings((mechanism,), {"PLAIN": JAAS}), 0, 0),
        lambda u, m: None,
    )
    if frames and frames[0][:1] == b"\0":
        a.step(frame(17, v, {"mechanism": mechanism}), 0)  # sometimes past the handshake, into the tokens
    for f in frames:
        step = a.step(memoryview(f), 0)
        assert step.to_broker or step.chunks is not None or step.close is not None
        if step.close is not None:
            break
