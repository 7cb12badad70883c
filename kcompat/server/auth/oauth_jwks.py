"""OAUTHBEARER tokens signed by an identity provider, checked as Kafka's
OAuthBearerValidatorCallbackHandler checks them: against the keys of
`sasl.oauthbearer.jwks.endpoint.url` (a JWKS, RFC 7517).

    file://   read once at start-up (as Kafka: a token whose kid is not in the file is refused)
    http(s):// fetched at start-up, then every sasl.oauthbearer.jwks.endpoint.refresh.ms, and soon
              after a token names a kid the set lacks (a provider rotated its keys), on a daemon
              thread: the event loop only reads the last key set
A key set that cannot be read at start-up stops start-up; a later fetch that fails keeps the last
keys and logs one line. Signatures are checked with `pyjwt` (imported only by listeners that use
this validator, so a broker without it loads no JWT code).

A token passes when its alg is an asymmetric one (never `none` or HMAC: a public key is no shared
secret), a key of the set of that kid and type verifies it, it has exp and iat and is within them
(and nbf) give or take sasl.oauthbearer.clock.skew.seconds, its aud contains one of
sasl.oauthbearer.expected.audience (a token with aud is refused when none is configured, as
jose4j does for Kafka), its iss is sasl.oauthbearer.expected.issuer when that is set, and it
names a principal in sasl.oauthbearer.sub.claim.name (its sasl.oauthbearer.scope.claim.name, when
present, must be a string or a list of strings; Kafka keeps scopes for the principal, kcompat's
authorizer does not use them).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from typing import Any

import jwt

from kcompat.config.errors import ConfigError
from kcompat.config.security import OAuthSettings

log = logging.getLogger("kcompat.sasl")

# alg -> the JWK key type (kty) that can verify it
ALGORITHMS = {
    **{f"{p}{n}": "RSA" for p in ("RS", "PS") for n in (256, 384, 512)},
    **{f"ES{n}": "EC" for n in (256, 384, 512)},
    "EdDSA": "OKP",
}
_FETCH_TIMEOUT_S = 10.0
_MIN_REFETCH_S = 1.0  # unknown kids wake the fetcher at most this often


def _fetch(url: str) -> jwt.PyJWKSet:
    with urllib.request.urlopen(url, timeout=_FETCH_TIMEOUT_S) as response:  # file/http(s): checked at config
        data = json.loads(response.read())
    return jwt.PyJWKSet.from_dict(data)


class JwksKeys:
    """The verification keys of one listener, shared by its connections."""

    def __init__(self, url: str, refresh_ms: int) -> None:
        self.url = url
        try:
            self._keys = _fetch(url)
        except (OSError, ValueError, jwt.PyJWKSetError, jwt.PyJWKError) as e:
            raise ConfigError(
                f"sasl.oauthbearer.jwks.endpoint.url={url}: cannot read a JWKS there ({e})",
                key="sasl.oauthbearer.jwks.endpoint.url",
                value=url,
            ) from None
        self._refresh_s = refresh_ms / 1000
        self._wake = threading.Event()
        self._stopped = False
        if not url.startswith("file:"):
            threading.Thread(target=self._refresher, name="kcompat-jwks", daemon=True).start()

    def candidates(self, kid: str | None, kty: str) -> list[Any]:
        keys = [
            k
            for k in self._keys.keys
            if k.key_type == kty and (kid is None or k.key_id == kid) and k.public_key_use in (None, "sig")
        ]
        if not keys and kid is not None:
            self._wake.set()  # maybe rotated in since the last fetch: refetch, for the client's retry
        return keys

    def stop(self) -> None:
        """End the refetching (the broker's listeners keep theirs for the process's life)."""
        self._stopped = True
        self._wake.set()

    def _refresher(self) -> None:
        while True:
            self._wake.wait(self._refresh_s)
            self._wake.clear()
            if self._stopped:
                return
            try:
                self._keys = _fetch(self.url)
            except (OSError, ValueError, jwt.PyJWKSetError, jwt.PyJWKError) as e:
                log.warning("JWKS refresh from %s failed, keeping the last keys: %s", self.url, e)
            time.sleep(_MIN_REFETCH_S)


class JwksValidator:
    """validate(token) -> (principal, exp) or ValueError saying why, for the connection's log line."""

    def __init__(self, settings: OAuthSettings) -> None:
        self._settings = settings
        self.keys = JwksKeys(settings.jwks_url, settings.refresh_ms)

    def validate(self, token: str) -> tuple[str, float]:
        s = self._settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as e:
            raise ValueError(f"the token is not a JWS: {e}") from None
        alg = header.get("alg")
        kty = ALGORITHMS.get(alg) if isinstance(alg, str) else None
        if kty is None:
            raise ValueError(f"the token's alg {alg!r} is not one of {', '.join(ALGORITHMS)}")
        kid = header.get("kid")
        keys = self.keys.candidates(kid if isinstance(kid, str) else None, kty)
        if not keys:
            raise ValueError(f"no {kty} key with kid {kid!r} in the JWKS of {self.keys.url}")
        error: jwt.InvalidTokenError | None = None
        for key in keys:  # one, unless the token names no kid and the set has several of its type
            try:
                claims = jwt.decode(
                    token,
                    key.key,
                    algorithms=[str(alg)],
                    audience=list(s.expected_audience) or None,
                    issuer=s.expected_issuer,
                    leeway=s.clock_skew_s,
                    options={"require": ["exp", "iat"]},
                )
                break
            except jwt.InvalidSignatureError as e:
                error = e
            except jwt.InvalidTokenError as e:
                raise ValueError(f"the token is refused: {e}") from None
        else:
            raise ValueError(f"the token is refused: {error}")
        if not isinstance(claims.get("iat"), int | float):
            raise ValueError("the token's iat is not a number")
        principal = claims.get(s.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise ValueError(f"the token has no {s.sub_claim} claim")
        scope = claims.get(s.scope_claim)
        if scope is not None and not (
            isinstance(scope, str) or (isinstance(scope, list) and all(isinstance(x, str) for x in scope))
        ):
            raise ValueError(f"the token's {s.scope_claim} claim is neither a string nor a list of strings")
        return principal, float(claims["exp"])
