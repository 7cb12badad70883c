"""The SASL exchange of one connection as a state table, sans-IO (Kafka's SaslServerAuthenticator):
frames and `now` in, an `AuthStep` out. No socket, no clock, no credential store: the mechanisms
are handed in by kcompat.server.auth.sasl, which binds them to the listener's users, the SCRAM
credentials and the OAUTHBEARER validator.

SaslHandshake (17) v0-1, SaslAuthenticate (36) v0-2. TRANSITIONS says what each request does in
each state (`OTHER` stands for every API key a state does not name):

    state         ApiVersions  SaslHandshake            SaslAuthenticate         other request
    HANDSHAKE     broker       HANDSHAKE:               close                    close
                                 v1+ -> AUTHENTICATE
                                 v0  -> RAW_TOKEN
    AUTHENTICATE  close        close                    AUTHENTICATE:            close
                                                          done -> COMPLETE
    RAW_TOKEN     no headers: every frame is a bare token, answered bare; done -> COMPLETE
    COMPLETE      SESSION      REAUTHENTICATE (KIP-368, SESSION                  SESSION
                                 v1+ only, same mechanism)
SESSION passes the request to the broker until the session expires (connections.max.reauth.ms or
the credential's own lifetime), then closes the connection.

A failed authentication is answered with SASL_AUTHENTICATION_FAILED after
connection.failed.authentication.delay.ms (v1+; v0 tokens get no answer) and the connection
closed; an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM and the list of enabled ones.
"""

from __future__ import annotations

import enum
import hmac
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.protocol import (
    API_VERSIONS_KEY,
    UnsupportedRequest,
    decode_request,
    encode_response,
    peek_header,
)
from kcompat.wire.types.sasl_authenticate import SaslAuthenticateResponse
from kcompat.wire.types.sasl_handshake import SaslHandshakeResponse

SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36
OTHER = -1  # any API key a state's row does not name
_SIZE = struct.Struct(">i")


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"  # ApiVersions and SaslHandshake only
    AUTHENTICATE = "authenticate"  # SaslAuthenticate only, until the mechanism is done
    RAW_TOKEN = "raw token"  # after SaslHandshake v0: bare tokens, no request headers
    COMPLETE = "complete"  # authenticated: requests go to the broker


class Action(enum.Enum):
    TO_BROKER = "pass the request to the broker"
    HANDSHAKE = "answer SaslHandshake and start the mechanism it names"
    AUTHENTICATE = "step the mechanism with SaslAuthenticate's token"
    REAUTHENTICATE = "KIP-368: a new handshake (v1+, same mechanism) on an authenticated connection"
    SESSION = "pass the request to the broker while the session lasts, else close"
    UNEXPECTED = "close: not a request this state takes"


S = SaslState
A = Action

TRANSITIONS: dict[tuple[SaslState, int], Action] = {
    (S.HANDSHAKE, API_VERSIONS_KEY): A.TO_BROKER,
    (S.HANDSHAKE, SASL_HANDSHAKE_KEY): A.HANDSHAKE,
    (S.HANDSHAKE, OTHER): A.UNEXPECTED,
    (S.AUTHENTICATE, SASL_AUTHENTICATE_KEY): A.AUTHENTICATE,
    (S.AUTHENTICATE, OTHER): A.UNEXPECTED,
    (S.COMPLETE, SASL_HANDSHAKE_KEY): A.REAUTHENTICATE,
    (S.COMPLETE, OTHER): A.SESSION,
}
# RAW_TOKEN has no row: its frames carry no request header to look up (SaslHandshake v0).


def action(state: SaslState, api_key: int) -> Action:
    """What a request with `api_key` does in `state` (a state with headers: not RAW_TOKEN)."""
    return TRANSITIONS.get((state, api_key)) or TRANSITIONS[(state, OTHER)]


def after_handshake(version: int) -> SaslState:
    """SaslHandshake v0 means the tokens follow bare; v1+ that they come in SaslAuthenticate."""
    return S.RAW_TOKEN if version == 0 else S.AUTHENTICATE


@dataclass(slots=True)
class AuthStep:
    """What the connection does with a frame: hand it to the broker, or send `chunks` (maybe after
    `delay_s`), and close when `close` names a reason."""

    to_broker: bool = False
    chunks: list[Any] | None = None  # encoded response chunks
    close: str | None = None
    delay_s: float = 0.0


class AuthenticationFailed(Exception):
    pass


class Mechanism(Protocol):
    """One mechanism's server side for one exchange: `step` takes the client's token and returns
    the answer (None: empty), raising AuthenticationFailed; `username` is set once it succeeded."""

    username: str | None
    user_tried: str  # the name the client gave, for the failure's log line (never a password)
    lifetime_ms: int | None  # how long the credential stays valid, when it says (OAUTHBEARER)
    token_authenticated: bool  # the credential was a delegation token (SCRAM with tokenauth=true)

    def step(self, token: bytes) -> bytes | None: ...


class Plain:
    """SASL/PLAIN (RFC 4616) against the users of the listener's PlainLoginModule JAAS config."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.user_tried = ""
        self.lifetime_ms: int | None = None
        self.token_authenticated = False

    def step(self, token: bytes) -> bytes | None:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        self.user_tried = user
        if not user or not password:
            raise AuthenticationFailed("Authentication failed: username or password not specified")
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.username = user
        return None  # PLAIN is done in one step, with an empty answer


class SaslExchange:
    """One connection's exchange. `start(name)` gives a fresh mechanism for an enabled name;
    `now` (seconds, any monotonic origin) only dates the session's end."""

    def __init__(
        self,
        mechanisms: tuple[str, ...],
        start: Callable[[str], Mechanism],
        *,
        reauth_ms: int = 0,
        failed_auth_delay_ms: int = 0,
    ) -> None:
        self._mechanisms = mechanisms
        self._start = start
        self._reauth_ms = reauth_ms
        self._failed_delay_s = failed_auth_delay_ms / 1000
        self.state = S.HANDSHAKE
        self._mechanism: Mechanism | None = None
        self._mechanism_name = ""
        self.principal: str | None = None
        self.by_token = False  # authenticated with a delegation token (KafkaPrincipal.tokenAuthenticated)
        self.session_expires: float | None = None  # in `now`'s time

    @property
    def complete(self) -> bool:
        return self.state is S.COMPLETE

    def step(self, frame: memoryview, now: float) -> AuthStep:
        if self.state is S.RAW_TOKEN:
            return self._raw_token(bytes(frame), now)
        try:
            key, version, correlation = peek_header(frame)
        except DecodeError:
            return AuthStep(close="a SASL frame too short for a request header")
        match action(self.state, key):
            case A.TO_BROKER:
                return AuthStep(to_broker=True)
            case A.HANDSHAKE:
                return self._handshake(frame)
            case A.AUTHENTICATE:
                return self._authenticate(frame, version, correlation, now)
            case A.REAUTHENTICATE:
                if version == 0:
                    return AuthStep(close="re-authentication needs SaslHandshake v1 or later")
                return self._handshake(frame)
            case A.SESSION:
                if self.session_expires is not None and now >= self.session_expires:
                    return AuthStep(
                        close=f"the SASL session of {self.principal} expired (connections.max.reauth.ms)"
                    )
                return AuthStep(to_broker=True)
            case A.UNEXPECTED:
                return AuthStep(
                    close=f"unexpected request (API key {key} v{version}) in SASL state {self.state.value}"
                )

    def _handshake(self, frame: memoryview) -> AuthStep:
        try:
            request = decode_request(frame, strict=False)
        except (DecodeError, UnsupportedRequest) as e:
            return AuthStep(close=f"SaslHandshake does not decode: {e}")
        mechanism = request.body.mechanism
        ok = mechanism in self._mechanisms and (
            self.state is not S.COMPLETE or mechanism == self._mechanism_name
        )
        error = ErrorCode.NONE if ok else ErrorCode.UNSUPPORTED_SASL_MECHANISM
        body = SaslHandshakeResponse(error_code=int(error), mechanisms=list(self._mechanisms))
        chunks = encode_response(SASL_HANDSHAKE_KEY, request.api_version, request.correlation_id, body)
        if not ok:
            return AuthStep(
                chunks=chunks, close=f"SASL mechanism {mechanism!r} is not enabled on this listener"
            )
        self._mechanism_name = mechanism
        self._mechanism = self._start(mechanism)
        self.state = after_handshake(request.api_version)
        return AuthStep(chunks=chunks)

    def _authenticate(self, frame: memoryview, version: int, correlation: int, now: float) -> AuthStep:
        try:
            request = decode_request(frame, strict=False)
        except (DecodeError, UnsupportedRequest) as e:
            return AuthStep(close=f"SaslAuthenticate does not decode: {e}")
        try:
            answer = self._token(request.body.auth_bytes, now)
        except AuthenticationFailed as e:
            body = SaslAuthenticateResponse(
                error_code=int(ErrorCode.SASL_AUTHENTICATION_FAILED), error_message=str(e)
            )
            return AuthStep(
                chunks=encode_response(SASL_AUTHENTICATE_KEY, version, correlation, body),
                close=self._failure(e),
                delay_s=self._failed_delay_s,
            )
        lifetime = 0
        if self.complete and self.session_expires is not None:
            lifetime = max(1, round((self.session_expires - now) * 1000))
        body = SaslAuthenticateResponse(
            error_code=0, error_message=None, auth_bytes=answer or b"", session_lifetime_ms=lifetime
        )
        return AuthStep(chunks=encode_response(SASL_AUTHENTICATE_KEY, version, correlation, body))

    def _raw_token(self, token: bytes, now: float) -> AuthStep:
        try:
            answer = self._token(token, now)
        except AuthenticationFailed as e:
            return AuthStep(close=self._failure(e), delay_s=self._failed_delay_s)
        return AuthStep(chunks=[_SIZE.pack(len(answer or b"")) + (answer or b"")])

    def _token(self, token: bytes, now: float) -> bytes | None:
        """One token of the mechanism's exchange; when it completes, the session starts."""
        mechanism = self._mechanism
        assert mechanism is not None
        answer = mechanism.step(token)
        if mechanism.username is not None:
            principal = f"User:{mechanism.username}"
            if self.principal is not None and principal != self.principal:
                raise AuthenticationFailed(
                    f"Cannot change principals during re-authentication from {self.principal}: {principal}"
                )
            self.principal = principal
            self.by_token = mechanism.token_authenticated
            self.state = S.COMPLETE
            # KIP-368: the session ends at connections.max.reauth.ms or when the credential expires
            limits = [ms for ms in (self._reauth_ms or None, mechanism.lifetime_ms) if ms]
            self.session_expires = now + min(limits) / 1000 if limits else None
        return answer

    def _failure(self, e: Exception) -> str:
        who = self._mechanism.user_tried if self._mechanism is not None else ""
        return f"failed authentication with {self._mechanism_name}" + (f" as {who}" if who else "") + f": {e}"
