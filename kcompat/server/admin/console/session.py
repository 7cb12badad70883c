"""The console's login sessions: who may act, and the CSRF token each form carries.

    Sessions(credentials, token, clock).login(user, password) -> Session | None
    Sessions.get(cookie header) -> Session | None       (expired or unknown: None)
    Sessions.logout(cookie header)
    Sessions.throttled(peer) / failed(peer)              (wrong logins from an address, limited)
    Session.csrf_ok(value)                               (constant-time compare)

A login is one of the broker's own SASL users (PLAIN's JAAS users and the SCRAM credentials, as the
HTTP Basic check) or, when `admin.console.token` is set, that token (any user name, the principal
then being TOKEN_PRINCIPAL). A session lives IDLE_S without a request and at most LIFETIME_S; its
id is 256 random bits sent as an HttpOnly, SameSite=Strict cookie, and its CSRF token another 256
bits put in every form (a form posted from another site carries neither).
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie

COOKIE = "kcompat_session"
IDLE_S = 30 * 60.0
LIFETIME_S = 8 * 3600.0
MAX_SESSIONS = 256
TOKEN_PRINCIPAL = "User:console"
# Wrong logins from one address: past FAILURES_MAX within FAILURES_S, refused unchecked (a SCRAM
# check is a PBKDF2 on the broker's loop: a guessing script must not stall the Kafka clients).
FAILURES_MAX = 10
FAILURES_S = 60.0


@dataclass(slots=True)
class Session:
    principal: str  # Kafka's form, "User:alice": the authorizer decides what it may do
    created: float
    seen: float
    sid: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def csrf_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(), self.csrf.encode())

    @property
    def user(self) -> str:
        return self.principal.partition(":")[2]

    def cookie(self) -> str:
        return f"{COOKIE}={self.sid}; Path=/; HttpOnly; SameSite=Strict"


def cookie_value(header: str | None) -> str | None:
    if not header:
        return None
    try:
        jar: SimpleCookie = SimpleCookie(header)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


class Sessions:
    def __init__(
        self,
        credentials: Callable[[str, str], bool],
        token: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._credentials = credentials  # (user, password) -> valid, as BasicLogin checks them
        self._token = token
        self._clock = clock
        self._live: OrderedDict[str, Session] = OrderedDict()
        self._failures: OrderedDict[str, list[float]] = OrderedDict()  # by address: recent failures

    def throttled(self, peer: str) -> bool:
        """Too many wrong logins from `peer` lately: refuse without checking."""
        now = self._clock()
        recent = [t for t in self._failures.get(peer, ()) if now - t < FAILURES_S]
        if recent:
            self._failures[peer] = recent
        else:
            self._failures.pop(peer, None)
        return len(recent) >= FAILURES_MAX

    def failed(self, peer: str) -> None:
        self._failures.setdefault(peer, []).append(self._clock())
        self._failures.move_to_end(peer)
        while len(self._failures) > MAX_SESSIONS:
            self._failures.popitem(last=False)

    def login(self, user: str, password: str) -> Session | None:
        if self._token and hmac.compare_digest(password.encode(), self._token.encode()):
            principal = TOKEN_PRINCIPAL
        elif user and self._credentials(user, password):
            principal = f"User:{user}"
        else:
            return None
        now = self._clock()
        session = Session(principal, now, now)
        self._live[session.sid] = session
        while len(self._live) > MAX_SESSIONS:
            self._live.popitem(last=False)
        return session

    def get(self, cookie_header: str | None) -> Session | None:
        sid = cookie_value(cookie_header)
        session = self._live.get(sid) if sid else None
        if session is None:
            return None
        now = self._clock()
        if now - session.seen > IDLE_S or now - session.created > LIFETIME_S:
            del self._live[session.sid]
            return None
        session.seen = now
        self._live.move_to_end(session.sid)
        return session

    def logout(self, cookie_header: str | None) -> None:
        sid = cookie_value(cookie_header)
        if sid:
            self._live.pop(sid, None)
