"""The ACLs of a single-node broker, kept beside the SCRAM credentials (in cluster mode they come
from the metadata log instead).

    file `kcompat-acls` in the first log dir, JSON written atomically after each change:
    [{"resource_type": "TOPIC", "name": "orders", "pattern": "LITERAL", "principal": "User:alice",
      "host": "*", "operation": "READ", "permission": "ALLOW"}, ...]

Kafka's enum names rather than numbers, so that the file reads as `kafka-acls --list` does.
"""

from __future__ import annotations

import json
from pathlib import Path

from kcompat.log.log_files import atomic_write
from kcompat.security.authorizer import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

FILE_NAME = "kcompat-acls"


class AclStore:
    def __init__(self, directory: Path, *, sync: bool = True) -> None:
        self.path = directory / FILE_NAME
        self._sync = sync

    def load(self) -> list[AclBinding]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        return [
            AclBinding(
                int(ResourceType[a["resource_type"]]),
                a["name"],
                int(PatternType[a["pattern"]]),
                a["principal"],
                a["host"],
                int(AclOperation[a["operation"]]),
                int(AclPermissionType[a["permission"]]),
            )
            for a in raw
        ]

    def save(self, acls: list[AclBinding]) -> None:
        data = [
            {
                "resource_type": ResourceType(a.resource_type).name,
                "name": a.name,
                "pattern": PatternType(a.pattern).name,
                "principal": a.principal,
                "host": a.host,
                "operation": AclOperation(a.operation).name,
                "permission": AclPermissionType(a.permission).name,
            }
            for a in acls
        ]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(data, indent=1).encode(), sync=self._sync)
