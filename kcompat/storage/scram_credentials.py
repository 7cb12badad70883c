"""SCRAM credentials (KIP-84), kept as Kafka's controller keeps them: per user and mechanism the
salt, StoredKey, ServerKey and iteration count, never the password.

    file `kcompat-scram-credentials` in the first log dir, JSON written atomically:
    {"alice": {"SCRAM-SHA-512": {"salt": b64, "stored_key": b64, "server_key": b64, "iterations": 4096}}}

AlterUserScramCredentials hands over SaltedPassword = Hi(password, salt, i); the keys are derived
from it here (RFC 5802: StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
HMAC(SaltedPassword, "Server Key")) and SaltedPassword itself is dropped.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kcompat.log.log_files import atomic_write

FILE_NAME = "kcompat-scram-credentials"
# Kafka's ScramMechanism ids (DescribeUserScramCredentials / AlterUserScramCredentials) and hashes.
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_IDS = {name: key for key, name in MECHANISMS.items()}
_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # ScramMechanism's minimum, ScramControlManager's maximum


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def derive(mechanism: str, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
    name = _HASH[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", name)
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.digest(salted_password, b"Server Key", name)
    return ScramCredential(salt, stored_key, server_key, iterations)


def from_password(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    salted = hashlib.pbkdf2_hmac(_HASH[mechanism], password.encode(), salt, iterations)  # Hi() of RFC 5802
    return derive(mechanism, salted, salt, iterations)


class ScramCredentialStore:
    def __init__(self, directory: Path, *, sync: bool = True) -> None:
        self.path = directory / FILE_NAME
        self._sync = sync
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def load(self) -> None:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        self._users = {
            user: {
                mech: ScramCredential(
                    base64.b64decode(c["salt"]),
                    base64.b64decode(c["stored_key"]),
                    base64.b64decode(c["server_key"]),
                    int(c["iterations"]),
                )
                for mech, c in mechs.items()
            }
            for user, mechs in raw.items()
        }

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def mechanisms_of(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def users(self) -> list[str]:
        return sorted(self._users)

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._users.setdefault(user, {})[mechanism] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        mechs = self._users.get(user)
        if mechs is None or mechanism not in mechs:
            return False
        del mechs[mechanism]
        if not mechs:
            del self._users[user]
        return True

    def save(self) -> None:
        def enc(b: bytes) -> str:
            return base64.b64encode(b).decode()

        data = {
            user: {
                mech: {
                    "salt": enc(c.salt),
                    "stored_key": enc(c.stored_key),
                    "server_key": enc(c.server_key),
                    "iterations": c.iterations,
                }
                for mech, c in mechs.items()
            }
            for user, mechs in self._users.items()
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True).encode(), sync=self._sync)


# `kafka-storage format --add-scram` syntax: SCRAM-SHA-512=[name=alice,password=alice-secret(,iterations=8192)]
_ADD_SCRAM = re.compile(r"\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[(.*)\]\s*")


def parse_add_scram(text: str) -> tuple[str, str, ScramCredential]:
    """(user, mechanism, credential) from one --add-scram value; ValueError says what is wrong."""
    m = _ADD_SCRAM.fullmatch(text)
    if m is None:
        raise ValueError(
            f"--add-scram {text!r} is invalid: expected SCRAM-SHA-512=[name=alice,password=secret]"
        )
    fields: dict[str, str] = {}
    for item in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,]*)', m.group(2)):
        key, value = item
        fields[key] = value[1:-1] if value.startswith('"') and value.endswith('"') else value
    if "name" not in fields or "password" not in fields:
        raise ValueError(f"--add-scram {text!r} needs name= and password=")
    iterations = int(fields.get("iterations", MIN_ITERATIONS))
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"--add-scram iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    return fields["name"], m.group(1), from_password(m.group(1), fields["password"], iterations)
