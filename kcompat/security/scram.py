"""SCRAM credentials (KIP-84) as Kafka keeps them: per user and mechanism the salt, StoredKey,
ServerKey and iteration count, never the password. Pure: no files, no clock.

Where they come from depends on the mode, and the SASL authenticator, the admin listener and
DescribeUserScramCredentials see only `ScramCredentials`:
* a single node: its own file (kcompat.storage.scram_credentials.ScramCredentialStore);
* cluster mode: the metadata image's UserScramCredentialRecords (`CredentialProvider`, which the
  image's SCRAM map replaces on every change, as Kafka's ScramPublisher updates its
  CredentialProvider), written by the controller that AlterUserScramCredentials is forwarded to.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

# Kafka's ScramMechanism ids (DescribeUserScramCredentials / AlterUserScramCredentials, the records).
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_IDS = {name: key for key, name in MECHANISMS.items()}
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # ScramMechanism's minimum, ScramControlManager's maximum


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def derive(mechanism: str, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """RFC 5802: StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
    HMAC(SaltedPassword, "Server Key"); SaltedPassword itself is not kept."""
    name = HASHES[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", name)
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.digest(salted_password, b"Server Key", name)
    return ScramCredential(salt, stored_key, server_key, iterations)


# user -> mechanism name -> credential
ScramUsers = Mapping[str, Mapping[str, ScramCredential]]


class ScramCredentials(Protocol):
    """What reads SCRAM credentials: logins, the admin listener, DescribeUserScramCredentials."""

    def get(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def mechanisms_of(self, user: str) -> dict[str, ScramCredential]: ...

    def users(self) -> list[str]: ...


class CredentialProvider:
    """Cluster mode's SCRAM credentials: the metadata image's, swapped whole on each change."""

    def __init__(self) -> None:
        self._users: ScramUsers = MappingProxyType({})

    def replace(self, users: ScramUsers) -> None:
        self._users = users  # the image's map, never changed in place

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        mechs = self._users.get(user)
        return None if mechs is None else mechs.get(mechanism)

    def mechanisms_of(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def users(self) -> list[str]:
        return sorted(self._users)
