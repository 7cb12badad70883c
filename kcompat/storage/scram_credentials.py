"""SCRAM credentials (KIP-84), kept as Kafka's controller keeps them: per user and mechanism the
salt, StoredKey, ServerKey and iteration count, never the password.

    file `kcompat-scram-credentials` in the first log dir, JSON written atomically:
    {"alice": {"SCRAM-SHA-512": {"salt": b64, "stored_key": b64, "server_key": b64, "iterations": 4096}}}

AlterUserScramCredentials hands over SaltedPassword = Hi(password, salt, i); the keys are derived
from it (kcompat.security.scram.derive) and SaltedPassword itself is dropped. This file is a single
node's: in cluster mode the credentials are the metadata image's (kcompat.security.scram).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from pathlib import Path

from kcompat.log.log_files import atomic_write
from kcompat.security.scram import HASHES as _HASH
from kcompat.security.scram import MAX_ITERATIONS as MAX_ITERATIONS
from kcompat.security.scram import MECHANISM_IDS as MECHANISM_IDS
from kcompat.security.scram import MECHANISMS as MECHANISMS
from kcompat.security.scram import MIN_ITERATIONS as MIN_ITERATIONS
from kcompat.security.scram import ScramCredential as ScramCredential
from kcompat.security.scram import derive as derive

FILE_NAME = "kcompat-scram-credentials"


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
