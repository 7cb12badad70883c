"""Delegation tokens on a single node: the four APIs through the dispatcher (an in-process broker
with a clock the test moves), the file that keeps them across a restart, the periodic sweep, and
SCRAM authentication with a token (Kafka's `tokenauth=true` extension)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from scramp import ScramClient

from kcompat.security.authorizer import STANDARD_AUTHORIZER
from kcompat.security.delegation_tokens import TokenTable, create_hmac, visible
from kcompat.server.auth.delegation_tokens import DelegationTokenManager
from kcompat.server.network.peer import Client
from kcompat.storage.delegation_token_store import DelegationTokenStore
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_delegation_token import CREATE_DELEGATION_TOKEN
from kcompat.wire.messages.describe_delegation_token import DESCRIBE_DELEGATION_TOKEN
from kcompat.wire.messages.expire_delegation_token import EXPIRE_DELEGATION_TOKEN
from kcompat.wire.messages.renew_delegation_token import RENEW_DELEGATION_TOKEN
from kcompat.wire.protocol import decode_response
from tests.server.broker_harness import BrokerHarness, HarnessFactory, flatten
from tests.server.test_sasl import authenticate, handshake, security

SECRET = "s3cret-key"
T0 = 1_700_000_000.0
HOUR_MS = 3_600_000


def client(user: str, protocol: str = "SASL_PLAINTEXT", *, by_token: bool = False) -> Client:
    return Client(
        "c-1", "10.0.0.7", 50000, "SASL", protocol, principal=f"User:{user}", token_authenticated=by_token
    )


ALICE, BOB, CAROL = client("alice"), client("bob"), client("carol")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def call(h: BrokerHarness, who: Client, api: Any, version: int, body: Any) -> Any:
    frame = h.frame(api, version, body)
    chunks = h.run(h.broker.handle(memoryview(frame)[4:], who))
    return decode_response(api.key, version, flatten(chunks)[4:])[1]


def create(h: BrokerHarness, who: Client = ALICE, version: int = 3, **kw: Any) -> Any:
    body = {"owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1}
    return call(h, who, CREATE_DELEGATION_TOKEN, version, {**body, **kw})


def renew(h: BrokerHarness, who: Client, hmac: bytes, period: int = -1) -> Any:
    return call(h, who, RENEW_DELEGATION_TOKEN, 2, {"hmac": hmac, "renew_period_ms": period})


def expire(h: BrokerHarness, who: Client, hmac: bytes, period: int = -1) -> Any:
    return call(h, who, EXPIRE_DELEGATION_TOKEN, 2, {"hmac": hmac, "expiry_time_period_ms": period})


def describe(h: BrokerHarness, who: Client, owners: list[str] | None = None) -> list[str]:
    asked = None if owners is None else [{"principal_type": "User", "principal_name": o} for o in owners]
    resp = call(h, who, DESCRIBE_DELEGATION_TOKEN, 3, {"owners": asked})
    assert resp.error_code == 0
    return [t.token_id for t in resp.tokens]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def h(broker_harness: HarnessFactory, clock: Clock) -> BrokerHarness:
    return broker_harness(
        {
            "delegation.token.secret.key": SECRET,
            "delegation.token.expiry.time.ms": str(HOUR_MS),
            "delegation.token.max.lifetime.ms": str(3 * HOUR_MS),
        },
        clock=clock,
    )


def test_create_renew_expire_as_kafka_answers(h: BrokerHarness, clock: Clock) -> None:
    bob = [{"principal_type": "User", "principal_name": "bob"}]
    made = create(h, renewers=bob)
    now = int(T0 * 1000)
    assert made.error_code == 0 and (made.principal_type, made.principal_name) == ("User", "alice")
    assert (made.issue_timestamp_ms, made.expiry_timestamp_ms, made.max_timestamp_ms) == (
        now,
        now + HOUR_MS,
        now + 3 * HOUR_MS,
    )
    assert made.hmac == create_hmac(made.token_id, SECRET) and len(made.hmac) == 64  # HmacSHA512
    assert len(made.token_id) == 22 and not made.token_id.startswith("-")  # Kafka's Uuid string
    # a shorter max lifetime asked for wins; the expiry is never past it
    short = create(h, max_lifetime_ms=60_000)
    assert short.max_timestamp_ms == short.expiry_timestamp_ms == now + 60_000

    clock.now += 600
    assert renew(h, CAROL, made.hmac).error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    renewed = renew(h, BOB, made.hmac, period=30 * 60_000)  # a renewer; the shorter period wins
    assert renewed.error_code == 0 and renewed.expiry_timestamp_ms == now + 600_000 + 30 * 60_000
    assert renew(h, ALICE, b"not a token").error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert renew(h, ALICE, b"x").expiry_timestamp_ms == -1

    clock.now += 3600  # past the renewed expiry: renewing or expiring it is refused
    assert renew(h, ALICE, made.hmac).error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert expire(h, ALICE, made.hmac, period=1000).error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert expire(h, CAROL, made.hmac).error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    gone = expire(h, ALICE, made.hmac, period=-1)  # a negative period removes it now
    assert gone.error_code == 0 and gone.expiry_timestamp_ms == int(clock.now * 1000)
    assert renew(h, ALICE, made.hmac).error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert made.token_id not in describe(h, ALICE)


def test_who_may_ask_and_for_whom(broker_harness: HarnessFactory, clock: Clock) -> None:
    h = broker_harness(
        {
            "delegation.token.secret.key": SECRET,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin",
        },
        clock=clock,
    )
    # never over PLAINTEXT, one-way SSL, or a connection authenticated with a token
    for who in (client("alice", "PLAINTEXT"), client("ANONYMOUS", "SSL"), client("alice", by_token=True)):
        resp = create(h, who)
        assert resp.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert resp.expiry_timestamp_ms == -1
        assert renew(h, who, b"x").error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert expire(h, who, b"x").error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        desc = call(h, who, DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
        assert desc.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    # a token for another owner needs CREATE_TOKENS on that user; renewers must be users
    other = create(h, ALICE, owner_principal_type="User", owner_principal_name="bob")
    assert other.error_code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    assert (other.principal_name, other.token_requester_principal_name) == ("bob", "alice")
    admin = client("admin")
    for_bob = create(h, admin, owner_principal_type="User", owner_principal_name="bob")
    assert for_bob.error_code == 0 and for_bob.token_requester_principal_name == "admin"
    group = [{"principal_type": "Group", "principal_name": "ops"}]
    assert create(h, ALICE, renewers=group).error_code == ErrorCode.INVALID_PRINCIPAL_TYPE
    mine = create(h, ALICE).token_id
    # the owner sees its own, the super user all, carol none; an empty owner list lists nothing
    assert describe(h, ALICE) == [mine] and describe(h, BOB) == [for_bob.token_id]
    assert sorted(describe(h, admin)) == sorted([mine, for_bob.token_id])
    assert describe(h, CAROL) == [] and describe(h, admin, owners=[]) == []
    assert describe(h, admin, owners=["bob"]) == [for_bob.token_id]


def test_disabled_without_the_secret_key(broker_harness: HarnessFactory) -> None:
    h = broker_harness()
    assert create(h).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert renew(h, ALICE, b"x").error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert expire(h, ALICE, b"x").error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    resp = call(h, ALICE, DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
    assert resp.error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


def test_tokens_survive_a_restart_and_expired_ones_are_swept(h: BrokerHarness, clock: Clock) -> None:
    kept = create(h)
    short = create(h, max_lifetime_ms=1000)
    h.restart()
    assert sorted(describe(h, ALICE)) == sorted([kept.token_id, short.token_id])
    assert renew(h, ALICE, kept.hmac).error_code == 0  # found again by its HMAC
    assert h.broker.tokens.credential(kept.token_id, "SCRAM-SHA-512") is not None
    clock.now += 2
    assert h.broker.tokens.credential(short.token_id, "SCRAM-SHA-256") is None  # expired: refused
    assert h.broker.tokens.sweep() == 1
    h.restart()
    assert describe(h, ALICE) == [kept.token_id]


def test_the_sweep_runs_every_check_interval(broker_harness: HarnessFactory, clock: Clock) -> None:
    h = broker_harness(
        {"delegation.token.secret.key": SECRET, "delegation.token.expiry.check.interval.ms": "50"},
        clock=clock,
    )
    token = create(h, max_lifetime_ms=1000)
    clock.now += 2
    h.sleep(0.3)
    assert renew(h, ALICE, token.hmac).error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_table_and_filter_without_a_broker(tmp_path: Path) -> None:
    table = TokenTable(SECRET, 10_000, 5_000)
    error, token = table.create("User:a", "User:a", ["User:b"], 0, 1000, "tok")
    assert error is ErrorCode.NONE and token is not None
    assert (
        table.renew("User:b", create_hmac("tok", "other"), 0, 1000)[0] is ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    )
    assert table.renew("User:b", table.hmac("tok"), 0, 5500) == (ErrorCode.NONE, 10_500)
    assert table.renew("User:b", table.hmac("tok"), 0, 10_000) == (ErrorCode.NONE, 11_000)  # capped by max
    never = lambda _: False  # noqa: E731
    assert visible("User:b", None, token, never, never)  # a renewer sees it
    assert not visible("User:c", None, token, never, never)
    assert visible("User:c", None, token, lambda tid: tid == "tok", never)  # DESCRIBE on the token
    assert visible("User:c", None, token, never, lambda owner: owner == "User:a")  # DESCRIBE_TOKENS
    assert not visible("User:a", ["User:z"], token, never, never)  # not among the owners asked for
    store = DelegationTokenStore(tmp_path, sync=False)
    store.save(table.tokens())
    assert store.load() == table.tokens()


def scram_with_token(
    manager: DelegationTokenManager, token_id: str, password: str, mechanism: str = "SCRAM-SHA-256"
) -> tuple[Any, Any]:
    """A SCRAM exchange as Kafka's client runs it with tokenauth=true: the extension rides in the
    client-first message and in the AuthMessage the proof signs."""
    from kcompat.server.auth.sasl import SaslAuthenticator

    a = SaslAuthenticator(security(), lambda u, m: None, token_lookup=manager.credential)
    handshake(a, mechanism)
    scram = ScramClient([mechanism], token_id, password)
    first = scram.get_client_first() + ",tokenauth=true"
    scram.client_first_bare += ",tokenauth=true"
    _, body = authenticate(a, first.encode())
    if body.error_code:
        return a, body
    scram.set_server_first(body.auth_bytes.decode())
    _, body = authenticate(a, scram.get_client_final().encode())
    return a, body


def test_scram_with_a_token_authenticates_as_its_owner(h: BrokerHarness, clock: Clock) -> None:
    made = create(h, max_lifetime_ms=2 * HOUR_MS)
    password = base64.b64encode(made.hmac).decode()
    manager = h.broker.tokens
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        a, body = scram_with_token(manager, made.token_id, password, mechanism)
        assert body.error_code == 0, body.error_message
        assert a.principal == "User:alice" and a.by_token
        assert 0 < body.session_lifetime_ms <= HOUR_MS  # the session ends when the token expires
    _, wrong = scram_with_token(manager, made.token_id, base64.b64encode(b"x" * 64).decode())
    assert wrong.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    _, unknown = scram_with_token(manager, "no-such-token", password)
    assert unknown.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    clock.now += 2 * 3600  # expired (not yet swept): refused
    _, late = scram_with_token(manager, made.token_id, password)
    assert late.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


class RecordingForwarder:
    """Cluster mode's forwarder as the dispatcher sees it: the token writes go to the controller."""

    def __init__(self) -> None:
        self.forwarded: list[tuple[int, str]] = []

    def versions(self) -> dict[int, tuple[int, int]]:
        return {38: (1, 3), 39: (1, 2), 40: (1, 2)}

    async def forward(self, frame: bytes, request: Any, client_host: str, principal: str = "") -> list[Any]:
        self.forwarded.append((request.api_key, principal))
        return [b"forwarded"]


def test_cluster_mode_refuses_before_forwarding(h: BrokerHarness) -> None:
    """KafkaApis checks the connection before maybeForwardToController: a PLAINTEXT or token login
    is answered DELEGATION_TOKEN_REQUEST_NOT_ALLOWED by the broker; a SASL login is forwarded."""
    from functools import partial

    from kcompat.server.context import RequestContext
    from kcompat.server.dispatcher import RequestDispatcher

    forwarder = RecordingForwarder()
    dispatcher = RequestDispatcher(partial(RequestContext, h.broker.services), forwarder=forwarder)
    body = {"owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1}
    for who in (client("alice", "PLAINTEXT"), client("alice", by_token=True)):
        frame = h.frame(CREATE_DELEGATION_TOKEN, 3, body)
        chunks = h.run(dispatcher.handle(memoryview(frame)[4:], who))
        resp = decode_response(CREATE_DELEGATION_TOKEN.key, 3, flatten(chunks)[4:])[1]
        assert resp.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    frame = h.frame(RENEW_DELEGATION_TOKEN, 2, {"hmac": b"x", "renew_period_ms": -1})
    assert h.run(dispatcher.handle(memoryview(frame)[4:], ALICE)) == [b"forwarded"]
    assert forwarder.forwarded == [(RENEW_DELEGATION_TOKEN.key, "User:alice")]
