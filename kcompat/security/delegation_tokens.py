"""Delegation tokens (KIP-48) as Kafka's DelegationTokenControlManager decides on them, sans-IO:
`now_ms` and new token ids are handed in, the file they are kept in is
kcompat.storage.delegation_token_store's, the wire APIs are handlers/delegation_tokens.py's.

    TokenTable(secret, max_lifetime_ms, renew_ms)
      .create(owner, requester, renewers, max_lifetime_ms, now_ms, token_id) -> (error, token)
      .renew(principal, hmac, period_ms, now_ms)   -> (error, expiry timestamp)
      .expire(principal, hmac, period_ms, now_ms)  -> (error, expiry timestamp); period < 0 removes
      .expired(now_ms) -> the ids past their expiry or max timestamp (the periodic sweep's)

A token's HMAC is HmacSHA512(delegation.token.secret.key, token id); clients send it back to
renew or expire the token, and its base64 is the token's SCRAM password. Principals are Kafka's
KafkaPrincipal strings ("User:alice").
"""

from __future__ import annotations

import base64
import hashlib
import hmac as _hmac
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from kcompat.wire.error_codes import ErrorCode

USER_TYPE = "User"
ERROR_TIMESTAMP = -1  # DelegationTokenManager.ErrorTimestamp: the expiry answered with an error
_LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class TokenInformation:
    """Kafka's TokenInformation: who owns the token, who asked for it, who may renew it, and when
    it was issued, expires (renewable until `max_ms`) and dies at the latest."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal in self.renewers

    def is_expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms


def create_hmac(token_id: str, secret: str) -> bytes:
    return _hmac.digest(secret.encode(), token_id.encode(), hashlib.sha512)


def hmac_base64(hmac: bytes) -> str:
    """The token's SCRAM password, as DelegationToken.hmacAsBase64String gives it to clients."""
    return base64.b64encode(hmac).decode()


def _sum(now: int, duration: int) -> int:
    return _LONG_MAX if now > _LONG_MAX - duration else now + duration


def principal_type(principal: str) -> str:
    return principal.partition(":")[0]


class TokenTable:
    """The tokens of the cluster. `secret` None: tokens are disabled (DELEGATION_TOKEN_AUTH_DISABLED)."""

    def __init__(self, secret: str | None, max_lifetime_ms: int, renew_ms: int) -> None:
        self.secret = secret or None
        self.max_lifetime_ms = max_lifetime_ms
        self.renew_ms = renew_ms
        self._tokens: dict[str, TokenInformation] = {}
        self._by_hmac: dict[bytes, str] = {}

    @property
    def enabled(self) -> bool:
        return self.secret is not None

    def hmac(self, token_id: str) -> bytes:
        assert self.secret is not None
        return create_hmac(token_id, self.secret)

    def tokens(self) -> list[TokenInformation]:
        return list(self._tokens.values())

    def get(self, token_id: str) -> TokenInformation | None:
        return self._tokens.get(token_id)

    def put(self, token: TokenInformation) -> None:
        """Add or replace a token (loading the store, or a decision's outcome)."""
        if self.secret is not None:
            self._by_hmac[self.hmac(token.token_id)] = token.token_id
        self._tokens[token.token_id] = token

    def remove(self, token_id: str) -> TokenInformation | None:
        token = self._tokens.pop(token_id, None)
        if token is not None and self.secret is not None:
            self._by_hmac.pop(self.hmac(token_id), None)
        return token

    def _by(self, hmac: bytes) -> TokenInformation | None:
        token_id = self._by_hmac.get(bytes(hmac))
        return self._tokens.get(token_id) if token_id is not None else None

    def create(
        self,
        owner: str,
        requester: str,
        renewers: Sequence[str],
        max_lifetime_ms: int,
        now_ms: int,
        token_id: str,
    ) -> tuple[ErrorCode, TokenInformation | None]:
        if self.secret is None:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None
        if any(principal_type(r) != USER_TYPE for r in renewers):
            return ErrorCode.INVALID_PRINCIPAL_TYPE, None
        lifetime = self.max_lifetime_ms
        if max_lifetime_ms > 0:
            lifetime = min(lifetime, max_lifetime_ms)
        max_ms = _sum(now_ms, lifetime)
        expiry_ms = min(max_ms, _sum(now_ms, self.renew_ms))
        token = TokenInformation(token_id, owner, requester, tuple(renewers), now_ms, max_ms, expiry_ms)
        self.put(token)
        return ErrorCode.NONE, token

    def renew(self, principal: str, hmac: bytes, period_ms: int, now_ms: int) -> tuple[ErrorCode, int]:
        if self.secret is None:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP
        token = self._by(hmac)
        if token is None:
            return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, ERROR_TIMESTAMP
        if token.is_expired(now_ms):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
        if not token.owner_or_renewer(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, ERROR_TIMESTAMP
        period = self.renew_ms if period_ms <= 0 else min(self.renew_ms, period_ms)
        expiry = min(token.max_ms, now_ms + period)
        self.put(replace(token, expiry_ms=expiry))
        return ErrorCode.NONE, expiry

    def expire(self, principal: str, hmac: bytes, period_ms: int, now_ms: int) -> tuple[ErrorCode, int]:
        if self.secret is None:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP
        token = self._by(hmac)
        if token is None:
            return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, ERROR_TIMESTAMP
        if not token.owner_or_renewer(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, ERROR_TIMESTAMP
        if period_ms < 0:  # expire now: the token is gone
            self.remove(token.token_id)
            return ErrorCode.NONE, now_ms
        if token.is_expired(now_ms):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
        expiry = min(token.max_ms, _sum(now_ms, period_ms))
        self.put(replace(token, expiry_ms=expiry))
        return ErrorCode.NONE, expiry

    def expired(self, now_ms: int) -> list[TokenInformation]:
        return [t for t in self._tokens.values() if t.is_expired(now_ms)]


def visible(
    requester: str,
    owners: Iterable[str] | None,
    token: TokenInformation,
    may_describe_token: Callable[[str], bool],
    may_describe_owner: Callable[[str], bool],
) -> bool:
    """DelegationTokenManager.filterToken: DescribeDelegationToken lists a token asked for (no
    owner list: all) that the requester owns or renews, or may DESCRIBE as a DelegationToken
    resource, or whose owner's tokens it may DESCRIBE_TOKENS."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    if token.owner_or_renewer(requester):
        return True
    return may_describe_token(token.token_id) or may_describe_owner(token.owner)
