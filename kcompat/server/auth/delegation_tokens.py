"""Kafka's DelegationTokenManager on a single node: the token table (kcompat.security.
delegation_tokens) bound to its file, the clock, the SCRAM credentials tokens authenticate with,
and the periodic removal of expired tokens.

    create / renew / expire   decide (the pure table), write the file, then answer
    credential(id, mechanism) SCRAM with `tokenauth=true` (kcompat.server.auth.sasl): the token's
                              credential, owner and expiry, None for an unknown or expired token
    run_expiry_checks()       every delegation.token.expiry.check.interval.ms: expired tokens go

Each token has a SCRAM credential per mechanism, made as Kafka makes it (ScramFormatter with the
mechanism's minimum 4096 iterations) from the base64 of its HMAC, the password a client presents.
Tokens are on only with delegation.token.secret.key set; the secret itself is never written.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kcompat.config import BrokerConfig
from kcompat.security.delegation_tokens import TokenInformation, TokenTable, hmac_base64
from kcompat.storage.delegation_token_store import DelegationTokenStore
from kcompat.storage.scram_credentials import MECHANISMS, ScramCredential, from_password
from kcompat.wire.error_codes import ErrorCode

log = logging.getLogger("kcompat.server.delegation_tokens")

# Create/Renew/ExpireDelegationToken: forwarded to the controller in cluster mode, once the broker
# has checked the connection may ask for tokens at all (KafkaApis, before maybeForwardToController)
TOKEN_WRITE_KEYS = frozenset({38, 39, 40})
ANONYMOUS = "User:ANONYMOUS"


def allow_token_requests(client: Any) -> bool:
    """KafkaApis.allowTokenRequests: not over a token, nor PLAINTEXT, nor one-way SSL."""
    if client is None or getattr(client, "token_authenticated", False):
        return False
    protocol = client.security_protocol
    return not (protocol == "PLAINTEXT" or (protocol == "SSL" and client.principal == ANONYMOUS))


@dataclass(frozen=True, slots=True)
class TokenCredential:
    """What SCRAM token authentication needs: the credential, whom it authenticates as, until when."""

    credential: ScramCredential
    owner: str  # KafkaPrincipal string, "User:alice"
    expiry_ms: int


def new_token_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 16 random bytes in unpadded base64url, never starting
    with '-' (a command-line tool would read it as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class DelegationTokenManager:
    def __init__(
        self,
        config: BrokerConfig,
        store: DelegationTokenStore | None,
        clock: Callable[[], float],
    ) -> None:
        """`store` None: cluster mode, where the tokens are the metadata image's (`replace`) and
        the controller creates, renews, expires and sweeps them."""
        secret = config.get("delegation.token.secret.key")
        self.table = TokenTable(
            str(secret) if secret else None,
            int(config.get("delegation.token.max.lifetime.ms")),
            int(config.get("delegation.token.expiry.time.ms")),
        )
        self._check_interval_s = int(config.get("delegation.token.expiry.check.interval.ms")) / 1000
        self._store = store
        self._clock = clock
        self._credentials: dict[str, dict[str, ScramCredential]] = {}

    @property
    def enabled(self) -> bool:
        return self.table.enabled

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def load(self) -> None:
        if self._store is None:
            return
        for token in self._store.load():
            self._put(token)

    @property
    def sweeps(self) -> bool:
        """Whether this broker removes expired tokens (a single node; in a cluster the controller)."""
        return self.enabled and self._store is not None

    def replace(self, tokens: Mapping[str, TokenInformation]) -> None:
        """Cluster mode: the image's tokens (DelegationTokenRecords) become the table, as Kafka's
        DelegationTokenPublisher updates the broker's token cache."""
        for token_id in [t.token_id for t in self.table.tokens() if t.token_id not in tokens]:
            self.table.remove(token_id)
        for token in tokens.values():
            self._put(token)
        self._forget_removed()

    def _put(self, token: TokenInformation) -> None:
        self.table.put(token)
        if self.table.enabled and token.token_id not in self._credentials:
            password = hmac_base64(self.table.hmac(token.token_id))
            self._credentials[token.token_id] = {m: from_password(m, password) for m in MECHANISMS.values()}

    def _save(self) -> None:
        if self._store is not None:
            self._store.save(self.table.tokens())

    def hmac(self, token_id: str) -> bytes:
        return self.table.hmac(token_id)

    def tokens(self) -> list[TokenInformation]:
        return self.table.tokens()

    def create(
        self, owner: str, requester: str, renewers: list[str], max_lifetime_ms: int
    ) -> tuple[ErrorCode, TokenInformation | None]:
        error, token = self.table.create(
            owner, requester, renewers, max_lifetime_ms, self.now_ms(), new_token_id()
        )
        if token is not None:
            self._put(token)
            self._save()
        return error, token

    def renew(self, principal: str, hmac: bytes, period_ms: int) -> tuple[ErrorCode, int]:
        error, expiry = self.table.renew(principal, hmac, period_ms, self.now_ms())
        if error is ErrorCode.NONE:
            self._save()
        return error, expiry

    def expire(self, principal: str, hmac: bytes, period_ms: int) -> tuple[ErrorCode, int]:
        error, expiry = self.table.expire(principal, hmac, period_ms, self.now_ms())
        if error is ErrorCode.NONE:
            self._forget_removed()
            self._save()
        return error, expiry

    def _forget_removed(self) -> None:
        for token_id in [t for t in self._credentials if self.table.get(t) is None]:
            del self._credentials[token_id]

    def credential(self, token_id: str, mechanism: str) -> TokenCredential | None:
        token = self.table.get(token_id)
        creds = self._credentials.get(token_id)
        if token is None or creds is None or mechanism not in creds or token.is_expired(self.now_ms()):
            return None
        return TokenCredential(creds[mechanism], token.owner, token.expiry_ms)

    def sweep(self) -> int:
        """DelegationTokenControlManager.sweepExpiredDelegationTokens: remove what has expired."""
        gone = self.table.expired(self.now_ms())
        for token in gone:
            log.info("Delegation token expired for token: %s for owner: %s", token.token_id, token.owner)
            self.table.remove(token.token_id)
        if gone:
            self._forget_removed()
            self._save()
        return len(gone)

    async def run_expiry_checks(self) -> None:
        while True:
            await asyncio.sleep(self._check_interval_s)
            try:
                self.sweep()
            except OSError as e:  # the file could not be written: tried again at the next check
                log.warning(
                    "expired delegation tokens could not be removed from %s (%s); retrying in %.0f s",
                    self._store.path if self._store else "memory",
                    e.strerror or type(e).__name__,
                    self._check_interval_s,
                )
