"""Delegation tokens with Kafka 4.3.1's own tools against one `kcompat serve` with a SASL_PLAINTEXT
listener (SCRAM-SHA-512 users alice, bob and carol) and delegation.token.secret.key set:

    kafka-delegation-tokens --create/--describe/--renew/--expire as alice (bob a renewer);
    the Java producer and consumer (console tools) authenticated with the token (ScramLoginModule
    with tokenauth="true"), as alice; bad input answered with Kafka's errors: a renewal by carol
    (DelegationTokenOwnerMismatchException), an unknown HMAC (DelegationTokenNotFoundException), a
    token asked for over a token-authenticated connection (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED:
    UnsupportedByAuthenticationException), and a token past its max lifetime: its renewal is
    DelegationTokenExpiredException and a client logging in with it is refused.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import kafka_tool, scram_broker

from kcompat.testing import TEST_DEFAULTS, Broker

pytestmark = pytest.mark.timeout(240)

USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("dtoken-broker")
    props = {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "delegation.token.secret.key": "kcompat-test-token-secret",
    }
    b = scram_broker(base, USERS, props)
    yield b
    b.stop()


def login(path: Path, username: str, password: str, *, token: bool = False) -> Path:
    extra = ' tokenauth="true"' if token else ""
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM_LOGIN} username="{username}" password="{password}"{extra};\n'
    )
    return path


def tokens_tool(broker: Broker, config: Path, *args: str, check: bool = True) -> tuple[int, str]:
    result = kafka_tool(
        "kafka-delegation-tokens",
        "--bootstrap-server",
        broker.address("SASL_PLAINTEXT"),
        "--command-config",
        str(config),
        *args,
        check=check,
        timeout=60,
    )
    return result.returncode, result.stdout + result.stderr


def created(output: str) -> tuple[str, str]:
    """(token id, HMAC) from --create's table (TOKENID HMAC OWNER ...)."""
    token_id = re.search(r"Created delegation token with tokenId : (\S+)", output)
    assert token_id is not None, output
    row = next(line.split() for line in output.splitlines() if line.startswith(token_id.group(1) + " "))
    return row[0], row[1]


def test_create_describe_renew_use_and_expire(broker: Broker, tmp_path: Path) -> None:
    alice = login(tmp_path / "alice.properties", "alice", USERS["alice"])
    bob = login(tmp_path / "bob.properties", "bob", USERS["bob"])
    carol = login(tmp_path / "carol.properties", "carol", USERS["carol"])
    _, out = tokens_tool(
        broker, alice, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob"
    )
    token_id, hmac = created(out)
    assert re.search(rf"{token_id}\s+\S+\s+User:alice\s+User:alice\s+\[User:bob\]", out), out

    _, out = tokens_tool(broker, alice, "--describe", "--owner-principal", "User:alice")
    assert "Total number of tokens : 1" in out and token_id in out and hmac in out

    _, out = tokens_tool(broker, bob, "--renew", "--hmac", hmac, "--renew-time-period", "-1")
    assert "Completed renew operation. New expiry date" in out
    code, out = tokens_tool(
        broker, carol, "--renew", "--hmac", hmac, "--renew-time-period", "-1", check=False
    )
    assert code == 1 and "DelegationTokenOwnerMismatchException" in out, out
    unknown = "bm90LWEtdG9rZW4="  # base64 of an HMAC no token has
    code, out = tokens_tool(
        broker, alice, "--renew", "--hmac", unknown, "--renew-time-period", "-1", check=False
    )
    assert code == 1 and "DelegationTokenNotFoundException" in out, out

    # the Java producer (the topic auto-created) and consumer log in with the token, as alice
    with_token = login(tmp_path / "token.properties", token_id, hmac, token=True)
    bs = broker.address("SASL_PLAINTEXT")
    kafka_tool(
        "kafka-console-producer",
        "--bootstrap-server",
        bs,
        "--command-config",
        str(with_token),
        "--topic",
        "dt-orders",
        input="one\ntwo\nthree\n",
    )
    got = kafka_tool(
        "kafka-console-consumer",
        "--bootstrap-server",
        bs,
        "--command-config",
        str(with_token),
        "--topic",
        "dt-orders",
        "--from-beginning",
        "--max-messages",
        "3",
        "--timeout-ms",
        "20000",
    )
    assert got.stdout.split() == ["one", "two", "three"]
    # a connection authenticated with a token may not ask for tokens (Kafka's rule)
    code, out = tokens_tool(broker, with_token, "--create", "--max-life-time-period", "-1", check=False)
    assert code == 1 and "UnsupportedByAuthenticationException" in out, out

    _, out = tokens_tool(broker, alice, "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert "Completed expire operation" in out
    assert token_id not in (broker.data_dir / "kcompat-delegation-tokens").read_text()  # gone for good


@pytest.mark.slow  # three JVMs and a wait for the token to expire
def test_a_token_past_its_lifetime_is_refused(broker: Broker, tmp_path: Path) -> None:
    alice = login(tmp_path / "alice.properties", "alice", USERS["alice"])
    asked = time.time()
    _, out = tokens_tool(broker, alice, "--create", "--max-life-time-period", "3000")
    token_id, hmac = created(out)
    time.sleep(max(0.0, asked + 4 - time.time()))
    code, out = tokens_tool(
        broker, alice, "--renew", "--hmac", hmac, "--renew-time-period", "-1", check=False
    )
    assert code == 1 and "DelegationTokenExpiredException" in out, out
    with_token = login(tmp_path / "late.properties", token_id, hmac, token=True)
    refused = kafka_tool(
        "kafka-topics",
        "--bootstrap-server",
        broker.address("SASL_PLAINTEXT"),
        "--command-config",
        str(with_token),
        "--list",
        check=False,
        timeout=60,
    )
    assert refused.returncode != 0
    assert "SaslAuthenticationException" in refused.stdout + refused.stderr, refused.stderr[-2000:]
