"""The console's login sessions: who logs in, how long a session lives, the CSRF check."""

from __future__ import annotations

from kcompat.server.admin.console import session as s
from kcompat.server.admin.console.session import TOKEN_PRINCIPAL, Sessions, cookie_value

USERS = {"alice": "alice-secret"}


def sessions(now: list[float], token: str = "") -> Sessions:
    return Sessions(lambda u, p: USERS.get(u) == p, token, clock=lambda: now[0])


def test_login_with_a_user_or_the_token() -> None:
    now = [0.0]
    store = sessions(now, token="t0ken")
    alice = store.login("alice", "alice-secret")
    assert alice is not None and alice.principal == "User:alice"
    assert store.login("alice", "wrong") is None and store.login("", "") is None
    token = store.login("anyone", "t0ken")
    assert token is not None and token.principal == TOKEN_PRINCIPAL
    assert sessions(now).login("anyone", "") is None  # no token set: an empty password is no token
    cookie = alice.cookie()
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert store.get(f"other=1; {s.COOKIE}={alice.sid}") is alice
    assert store.get(f"{s.COOKIE}=forged") is None and store.get(None) is None and store.get("=;;=") is None


def test_csrf_token_is_the_sessions_own() -> None:
    store = sessions([0.0])
    a, b = store.login("alice", "alice-secret"), store.login("alice", "alice-secret")
    assert a is not None and b is not None and a.csrf != b.csrf
    assert a.csrf_ok(a.csrf) and not a.csrf_ok(b.csrf) and not a.csrf_ok("") and not a.csrf_ok(None)


def test_sessions_expire_when_idle_or_old_and_on_logout() -> None:
    now = [0.0]
    store = sessions(now)
    a = store.login("alice", "alice-secret")
    assert a is not None
    header = f"{s.COOKIE}={a.sid}"
    now[0] = s.IDLE_S - 1
    assert store.get(header) is a  # seen: the idle time starts again
    now[0] += s.IDLE_S + 1
    assert store.get(header) is None
    b = store.login("alice", "alice-secret")
    assert b is not None
    start = now[0]
    while now[0] - start < s.LIFETIME_S:
        now[0] += s.IDLE_S / 2
        assert store.get(f"{s.COOKIE}={b.sid}") is b
    now[0] += 1
    assert store.get(f"{s.COOKIE}={b.sid}") is None  # at most LIFETIME_S, however busy
    c = store.login("alice", "alice-secret")
    assert c is not None
    store.logout(f"{s.COOKIE}={c.sid}")
    assert store.get(f"{s.COOKIE}={c.sid}") is None
    assert cookie_value(f"{s.COOKIE}=x") == "x"


def test_wrong_logins_from_an_address_are_limited() -> None:
    now = [0.0]
    store = sessions(now)
    for _ in range(s.FAILURES_MAX):
        assert not store.throttled("10.0.0.1")
        store.failed("10.0.0.1")
    assert store.throttled("10.0.0.1") and not store.throttled("10.0.0.2")
    now[0] += s.FAILURES_S
    assert not store.throttled("10.0.0.1")
