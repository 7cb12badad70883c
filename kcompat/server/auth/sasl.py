"""The SASL exchange of one connection on a SASL_PLAINTEXT or SASL_SSL listener (Kafka's
SaslServerAuthenticator), settled before any other request reaches the dispatcher.

SaslHandshake (17) v0-1, SaslAuthenticate (36) v0-2; mechanisms PLAIN (users of the listener's
PlainLoginModule JAAS config), SCRAM-SHA-256/512 (`scramp` against the stored credentials) and
OAUTHBEARER with Kafka's unsecured-JWS validator (KIP-255, for development: `alg: none` tokens) or,
when the listener names OAuthBearerValidatorCallbackHandler, signed JWTs (kcompat.server.auth.oauth_jwks).

    state         ApiVersions  SaslHandshake          SaslAuthenticate        other request
    HANDSHAKE     broker       -> AUTHENTICATE (v1+)  close                   close
                               -> RAW_TOKEN (v0)
    AUTHENTICATE  close        close                  step; done -> COMPLETE  close
    RAW_TOKEN     every frame is a bare token (no header), answered bare; done -> COMPLETE
    COMPLETE      broker       -> AUTHENTICATE (KIP-368 re-authentication, v1+ only)
                  any request after the session expired (connections.max.reauth.ms): close
A failed authentication is answered with SASL_AUTHENTICATION_FAILED after
connection.failed.authentication.delay.ms (v1+; v0 tokens get no answer) and the connection closed;
an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM and the list of enabled ones.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hmac
import json
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scramp import ScramMechanism
from scramp.utils import ScramException

from kcompat.config.security import ListenerSecurity, parse_jaas, plain_users
from kcompat.storage.scram_credentials import ScramCredential
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
_SIZE = struct.Struct(">i")


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_TOKEN = "raw token"
    COMPLETE = "complete"


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


class _Plain:
    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self._user = ""  # the name tried, for the failure's log line

    def step(self, token: bytes) -> bytes | None:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        self._user = user
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


class _Scram:
    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self._mechanism = mechanism
        self._lookup = lookup
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._first = True
        self.username: str | None = None
        self._user = ""

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        c = self._lookup(user, self._mechanism)
        if c is None:
            raise KeyError(user)
        return c.salt, c.stored_key, c.server_key, c.iterations

    def step(self, token: bytes) -> bytes | None:
        message = token.decode("utf-8", "replace")
        failed = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self._mechanism}"
        try:
            if self._first:
                self._first = False
                for attr in message.split(",")[2:]:  # after the GS2 header: n=saslname (RFC 5802 escapes)
                    if attr.startswith("n="):
                        self._user = attr[2:].replace("=2C", ",").replace("=3D", "=")
                self._server.set_client_first(message)
                first: str = self._server.get_server_first()
                return first.encode()
            self._server.set_client_final(message)
            final: str = self._server.get_server_final()
            answer = final.encode()
        except ScramException:
            raise AuthenticationFailed(failed) from None
        self.username = self._user
        return answer


class _OAuthBearer:
    """KIP-255's client message `n,,\x01auth=Bearer <jws>\x01...\x01`, its token checked by the
    listener's validator (`validate(jws) -> (principal, exp)`, ValueError saying why not). A bad
    token is answered with Kafka's JSON challenge; the client's \x01 then fails."""

    def __init__(self, validate: Callable[[str], tuple[str, float]]) -> None:
        self._validate = validate
        self.username: str | None = None
        self._user = ""
        self._failed: str | None = None
        self.lifetime_ms: int | None = None  # until the token expires

    def step(self, token: bytes) -> bytes | None:
        if self._failed is not None:  # the client's \x01 after the challenge
            raise AuthenticationFailed(f"Authentication failed: {self._failed}")
        parts = token.decode("utf-8", "replace").split("\x01")
        if not parts[0].startswith(("n,", "y,")) or len(parts) < 3:
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
        options = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        bearer = options.get("auth", "")
        if not bearer.startswith("Bearer "):
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message: no Bearer token")
        try:
            principal, exp = self._validate(bearer[7:].strip())
        except ValueError as e:
            self._failed = str(e)
            return json.dumps({"status": "invalid_token"}).encode()
        self.username = self._user = principal
        self.lifetime_ms = max(1, int((exp - time.time()) * 1000))
        return b""


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler (options unsecuredValidator* of the
    OAUTHBEARER JAAS config): `alg: none` tokens, for development."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self._required = set(options.get("unsecuredValidatorRequiredScope", "").split())
        self._skew_s = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0")) / 1000

    def validate(self, jws: str) -> tuple[str, float]:
        pieces = jws.split(".")
        if len(pieces) != 3 or pieces[2]:
            raise ValueError("an unsecured JWS has three parts and an empty signature")
        try:
            header, claims = (
                json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) for p in pieces[:2]
            )
        except (binascii.Error, ValueError):
            raise ValueError("the token's header or claims are not base64url JSON") from None
        if not isinstance(header, dict) or header.get("alg") != "none" or not isinstance(claims, dict):
            raise ValueError("an unsecured JWS must have alg none")
        now = time.time()
        exp = claims.get("exp")
        if not isinstance(exp, int | float):
            raise ValueError("the token has no exp claim")
        if exp <= now - self._skew_s:
            raise ValueError("the token has expired")
        iat = claims.get("iat")
        if isinstance(iat, int | float) and iat > now + self._skew_s:
            raise ValueError("the token was issued in the future")
        principal = claims.get(self._claim)
        if not isinstance(principal, str) or not principal:
            raise ValueError(f"the token has no {self._claim} claim")
        scope = claims.get(self._scope_claim, [])
        scopes = set(scope.split() if isinstance(scope, str) else scope if isinstance(scope, list) else [])
        if not self._required <= scopes:
            raise ValueError(f"the token lacks the required scope {sorted(self._required - scopes)}")
        return principal, float(exp)


class SaslAuthenticator:
    def __init__(
        self,
        security: ListenerSecurity,
        scram_lookup: Callable[[str, str], ScramCredential | None],
        oauth_validate: Callable[[str], tuple[str, float]] | None = None,
    ) -> None:
        assert security.sasl is not None
        self._settings = security
        self._mechanisms = security.sasl.mechanisms
        self._plain_users = plain_users(security.sasl.jaas["PLAIN"]) if "PLAIN" in self._mechanisms else {}
        if oauth_validate is None:  # the listener's JWKS validator, or Kafka's default unsecured one
            oauth = security.sasl.jaas.get("OAUTHBEARER")
            oauth_validate = UnsecuredValidator(parse_jaas(oauth).options if oauth else {}).validate
        self._oauth_validate = oauth_validate
        self._scram_lookup = scram_lookup
        self.max_token_bytes = security.sasl.max_receive_size
        self.state = State.HANDSHAKE
        self._mechanism: _Plain | _Scram | _OAuthBearer | None = None
        self._mechanism_name = ""
        self.principal: str | None = None
        self.session_expires: float | None = None  # loop time

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    def step(self, frame: memoryview, now: float) -> AuthStep:
        if self.state is State.RAW_TOKEN:
            return self._raw_token(bytes(frame), now)
        try:
            key, version, correlation = peek_header(frame)
        except DecodeError:
            return AuthStep(close="a SASL frame too short for a request header")
        if self.state is State.COMPLETE:
            if key == SASL_HANDSHAKE_KEY:
                if version == 0:
                    return AuthStep(close="re-authentication needs SaslHandshake v1 or later")
                return self._handshake(frame, now)
            if self.session_expires is not None and now >= self.session_expires:
                return AuthStep(
                    close=f"the SASL session of {self.principal} expired (connections.max.reauth.ms)"
                )
            return AuthStep(to_broker=True)
        if self.state is State.HANDSHAKE:
            if key == API_VERSIONS_KEY:
                return AuthStep(to_broker=True)
            if key == SASL_HANDSHAKE_KEY:
                return self._handshake(frame, now)
        elif key == SASL_AUTHENTICATE_KEY:
            return self._authenticate(frame, version, correlation, now)
        return AuthStep(
            close=f"unexpected request (API key {key} v{version}) in SASL state {self.state.value}"
        )

    def _handshake(self, frame: memoryview, now: float) -> AuthStep:
        try:
            request = decode_request(frame, strict=False)
        except (DecodeError, UnsupportedRequest) as e:
            return AuthStep(close=f"SaslHandshake does not decode: {e}")
        mechanism = request.body.mechanism
        ok = mechanism in self._mechanisms and (
            self.state is not State.COMPLETE or mechanism == self._mechanism_name
        )
        error = ErrorCode.NONE if ok else ErrorCode.UNSUPPORTED_SASL_MECHANISM
        body = SaslHandshakeResponse(error_code=int(error), mechanisms=list(self._mechanisms))
        chunks = encode_response(SASL_HANDSHAKE_KEY, request.api_version, request.correlation_id, body)
        if not ok:
            return AuthStep(
                chunks=chunks, close=f"SASL mechanism {mechanism!r} is not enabled on this listener"
            )
        self._mechanism_name = mechanism
        if mechanism == "PLAIN":
            self._mechanism = _Plain(self._plain_users)
        elif mechanism == "OAUTHBEARER":
            self._mechanism = _OAuthBearer(self._oauth_validate)
        else:
            self._mechanism = _Scram(mechanism, self._scram_lookup)
        self.state = State.RAW_TOKEN if request.api_version == 0 else State.AUTHENTICATE
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
                delay_s=self._settings.failed_auth_delay_ms / 1000,
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
            return AuthStep(close=self._failure(e), delay_s=self._settings.failed_auth_delay_ms / 1000)
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
            self.state = State.COMPLETE
            # KIP-368: the session ends at connections.max.reauth.ms or when the credential expires
            limits = [
                ms for ms in (self._settings.reauth_ms or None, getattr(mechanism, "lifetime_ms", None)) if ms
            ]
            self.session_expires = now + min(limits) / 1000 if limits else None
        return answer

    def _failure(self, e: Exception) -> str:
        who = self._mechanism._user if self._mechanism is not None else ""
        return f"failed authentication with {self._mechanism_name}" + (f" as {who}" if who else "") + f": {e}"
