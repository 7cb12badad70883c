"""The proxy's SASL, in memory: its upstream login (UpstreamLogin) against the broker's server
side, and the client side built from Kafka's listener properties (client_authenticators)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kcompat.config.errors import ConfigError
from kcompat.config.proxy_config import ProxyConfig
from kcompat.proxy.sasl import LoginFailed, UpstreamLogin, client_authenticators, reauth_delay, upstream_login
from kcompat.security.sasl_exchange import SaslExchange

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def config(**extra: str) -> ProxyConfig:
    return ProxyConfig(
        {
            "proxy.upstream.bootstrap.servers": "127.0.0.1:9092",
            "proxy.client.security.protocol": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "listener.name.proxy.plain.sasl.jaas.config": f'{PLAIN} user_proxy="pw";',
            "sasl.jaas.config": f'{SCRAM} user_proxy="pw";',
            "connections.max.reauth.ms": "60000",
            **extra,
        }
    )


def run(login: UpstreamLogin, server: SaslExchange) -> None:
    """Frames from the login to the server and back until the login is done."""
    frame = login.first()
    while frame is not None:
        step = server.step(memoryview(frame[4:]), now=0.0)
        assert step.chunks is not None
        frame = login.answer(b"".join(bytes(c) for c in step.chunks)[4:])


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_the_upstream_login_passes_the_brokers_sasl(mechanism: str) -> None:
    make_server = client_authenticators(config())
    assert make_server is not None
    server = make_server()
    login = UpstreamLogin(
        mechanism, {"username": "proxy", "password": "pw", "unsecuredLoginStringClaim_sub": "proxy"}
    )
    run(login, server)
    assert server.complete and server.principal == "User:proxy"
    assert 0 < login.lifetime_ms <= 60000


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_fails_the_login_in_kafkas_words(mechanism: str) -> None:
    make_server = client_authenticators(config())
    assert make_server is not None
    with pytest.raises(LoginFailed, match="SASL_AUTHENTICATION_FAILED"):
        run(UpstreamLogin(mechanism, {"username": "proxy", "password": "nope"}), make_server())


def test_settings_without_users_or_credentials_are_refused() -> None:
    with pytest.raises(ConfigError, match="names no users"):
        client_authenticators(config(**{"sasl.jaas.config": f"{SCRAM};"}))
    with pytest.raises(ConfigError, match=r"proxy\.upstream\.sasl\.jaas\.config"):
        upstream_login(config(**{"proxy.upstream.security.protocol": "SASL_PLAINTEXT"}))
    assert client_authenticators(config(**{"proxy.client.security.protocol": "PLAINTEXT"})) is None


def test_reauthentication_comes_before_the_session_ends() -> None:
    delays = [reauth_delay(10_000) for _ in range(50)]
    assert all(8.5 <= d <= 9.5 for d in delays)


def test_the_proxy_command_refuses_sasl_settings_in_one_line(tmp_path: Path) -> None:
    props = tmp_path / "proxy.properties"
    props.write_text(
        "proxy.upstream.bootstrap.servers=127.0.0.1:1\nproxy.bootstrap.listener=127.0.0.1:0\n"
        "proxy.client.security.protocol=SASL_PLAINTEXT\nsasl.enabled.mechanisms=SCRAM-SHA-256\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "kcompat", "proxy", str(props)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.startswith("kcompat: invalid configuration:") and "names no users" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
