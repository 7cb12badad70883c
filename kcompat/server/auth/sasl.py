"""The SASL mechanisms bound to what they need beyond the exchange (the pure state table is
kcompat.security.sasl_exchange): the listener's PLAIN users, SCRAM-SHA-256/512 through `scramp`
against the stored credentials, and OAUTHBEARER with Kafka's unsecured-JWS validator (KIP-255, for
development: `alg: none` tokens) or, when the listener names OAuthBearerValidatorCallbackHandler,
signed JWTs (kcompat.server.auth.oauth_jwks). OAUTHBEARER reads the wall clock for a token's
lifetime, which is why it lives here and not in the pure exchange.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from scramp import ScramMechanism
from scramp.utils import ScramException

from kcompat.config.listener_security import ListenerSecurity
from kcompat.config.security import parse_jaas, plain_users
from kcompat.security.sasl_exchange import AuthenticationFailed, Mechanism, Plain, SaslExchange
from kcompat.storage.scram_credentials import ScramCredential

if TYPE_CHECKING:
    from kcompat.server.auth.delegation_tokens import TokenCredential


TokenLookup = Callable[[str, str], "TokenCredential | None"]


def _no_tokens(token_id: str, mechanism: str) -> TokenCredential | None:
    return None


class _Scram:
    """SCRAM-SHA-256/512 (RFC 5802) through scramp. A client-first message with Kafka's extension
    `tokenauth=true` authenticates with a delegation token (KIP-48): the token id is the name, the
    base64 HMAC the password, and the session is the token owner's, ending when the token expires."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str, str], ScramCredential | None],
        tokens: TokenLookup = _no_tokens,
    ) -> None:
        self._mechanism = mechanism
        self._lookup = lookup
        self._tokens = tokens
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._first = True
        self._token: TokenCredential | None = None
        self.username: str | None = None
        self.user_tried = ""
        self.lifetime_ms: int | None = None
        self.token_authenticated = False

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        c = self._token.credential if self._token is not None else self._lookup(user, self._mechanism)
        if c is None:
            raise KeyError(user)
        return c.salt, c.stored_key, c.server_key, c.iterations

    def _client_first(self, message: str) -> None:
        """Kafka's ScramExtensions follow the nonce as key=value attributes; scramp takes only
        RFC 5802's one-letter ones, so it is given the message without them, and the bare message
        as the client signed it (its AuthMessage includes the extensions)."""
        gs2_cbind, authzid, *bare = message.split(",")
        attrs = [a for a in bare if len(a) >= 2 and a[1] == "="]
        extensions = dict(a.split("=", 1) for a in bare if a not in attrs and "=" in a)
        for attr in attrs:
            if attr.startswith("n="):  # RFC 5802 escapes
                self.user_tried = attr[2:].replace("=2C", ",").replace("=3D", "=")
        if extensions.get("tokenauth", "").lower() == "true":
            self._token = self._tokens(self.user_tried, self._mechanism)
            if self._token is None:
                raise AuthenticationFailed(  # Kafka's answer; the log line names the token id
                    f"Authentication failed during authentication due to invalid credentials with "
                    f"SASL mechanism {self._mechanism} (an unknown or expired delegation token)"
                )
        self._server.set_client_first(",".join([gs2_cbind, authzid, *attrs]))
        self._server.client_first_bare = ",".join(bare)

    def step(self, token: bytes) -> bytes | None:
        message = token.decode("utf-8", "replace")
        failed = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self._mechanism}"
        try:
            if self._first:
                self._first = False
                self._client_first(message)
                first: str = self._server.get_server_first()
                return first.encode()
            self._server.set_client_final(message)
            final: str = self._server.get_server_final()
            answer = final.encode()
        except (ScramException, ValueError):
            raise AuthenticationFailed(failed) from None
        if self._token is not None:  # the principal is the token's owner, until the token expires
            self.username = self._token.owner.partition(":")[2]
            self.token_authenticated = True
            self.lifetime_ms = max(1, self._token.expiry_ms - int(time.time() * 1000))
        else:
            self.username = self.user_tried
        return answer


class _OAuthBearer:
    """KIP-255's client message `n,,\x01auth=Bearer <jws>\x01...\x01`, its token checked by the
    listener's validator (`validate(jws) -> (principal, exp)`, ValueError saying why not). A bad
    token is answered with Kafka's JSON challenge; the client's \x01 then fails."""

    def __init__(self, validate: Callable[[str], tuple[str, float]]) -> None:
        self._validate = validate
        self.username: str | None = None
        self.user_tried = ""
        self._failed: str | None = None
        self.lifetime_ms: int | None = None  # until the token expires
        self.token_authenticated = False  # an OAuth token is not a Kafka delegation token

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
        self.username = self.user_tried = principal
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


class SaslAuthenticator(SaslExchange):
    """The exchange of one connection on a SASL_PLAINTEXT or SASL_SSL listener, its mechanisms
    bound to the listener's settings, the SCRAM credentials and the OAUTHBEARER validator."""

    def __init__(
        self,
        security: ListenerSecurity,
        scram_lookup: Callable[[str, str], ScramCredential | None],
        oauth_validate: Callable[[str], tuple[str, float]] | None = None,
        token_lookup: TokenLookup = _no_tokens,
    ) -> None:
        assert security.sasl is not None
        mechanisms = security.sasl.mechanisms
        self._plain_users = plain_users(security.sasl.jaas["PLAIN"]) if "PLAIN" in mechanisms else {}
        if oauth_validate is None:  # the listener's JWKS validator, or Kafka's default unsecured one
            oauth = security.sasl.jaas.get("OAUTHBEARER")
            oauth_validate = UnsecuredValidator(parse_jaas(oauth).options if oauth else {}).validate
        self._oauth_validate = oauth_validate
        self._scram_lookup = scram_lookup
        self._token_lookup = token_lookup
        self.max_token_bytes = security.sasl.max_receive_size
        super().__init__(
            mechanisms,
            self._mechanism_for,
            reauth_ms=security.reauth_ms,
            failed_auth_delay_ms=security.failed_auth_delay_ms,
        )

    def _mechanism_for(self, name: str) -> Mechanism:
        if name == "PLAIN":
            return Plain(self._plain_users)
        if name == "OAUTHBEARER":
            return _OAuthBearer(self._oauth_validate)
        return _Scram(name, self._scram_lookup, self._token_lookup)
