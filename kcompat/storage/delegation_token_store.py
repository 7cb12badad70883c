"""The delegation tokens of a single-node broker, beside its SCRAM credentials (in cluster mode
Kafka keeps them as DelegationTokenRecords in the metadata log).

    file `kcompat-delegation-tokens` in the first log dir, JSON written atomically after each change:
    [{"token_id": "...", "owner": "User:alice", "requester": "User:alice", "renewers": ["User:bob"],
      "issue_ms": 1700000000000, "max_ms": ..., "expiry_ms": ...}]

No HMAC and no SCRAM credential is written: both follow from the token id and
delegation.token.secret.key, as Kafka derives them when it replays a DelegationTokenRecord.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from kcompat.log.log_files import atomic_write
from kcompat.security.delegation_tokens import TokenInformation

FILE_NAME = "kcompat-delegation-tokens"


class DelegationTokenStore:
    def __init__(self, directory: Path, *, sync: bool = True) -> None:
        self.path = directory / FILE_NAME
        self._sync = sync

    def load(self) -> list[TokenInformation]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        return [
            TokenInformation(
                token_id=str(t["token_id"]),
                owner=str(t["owner"]),
                requester=str(t["requester"]),
                renewers=tuple(str(r) for r in t["renewers"]),
                issue_ms=int(t["issue_ms"]),
                max_ms=int(t["max_ms"]),
                expiry_ms=int(t["expiry_ms"]),
            )
            for t in raw
        ]

    def save(self, tokens: Iterable[TokenInformation]) -> None:
        data = [
            {
                "token_id": t.token_id,
                "owner": t.owner,
                "requester": t.requester,
                "renewers": list(t.renewers),
                "issue_ms": t.issue_ms,
                "max_ms": t.max_ms,
                "expiry_ms": t.expiry_ms,
            }
            for t in sorted(tokens, key=lambda t: t.issue_ms)
        ]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(data, indent=1).encode(), sync=self._sync)
