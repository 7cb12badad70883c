"""The client quotas of a single-node broker, beside its ACLs (in cluster mode they are the
metadata log's ClientQuotaRecords instead).

    file `kcompat-client-quotas` in the first log dir, JSON written atomically after each change:
    [{"entity": {"user": "alice", "client-id": null}, "quotas": {"producer_byte_rate": 1048576.0}}]

A null name is the type's default (`--entity-default`), as in Kafka's ClientQuotaRecord.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from kcompat.log.log_files import atomic_write
from kcompat.quotas.entities import Entity, entity_of

FILE_NAME = "kcompat-client-quotas"


class QuotaStore:
    def __init__(self, directory: Path, *, sync: bool = True) -> None:
        self.path = directory / FILE_NAME
        self._sync = sync

    def load(self) -> dict[Entity, dict[str, float]]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return {entity_of(e["entity"].items()): {k: float(v) for k, v in e["quotas"].items()} for e in raw}

    def save(self, table: Mapping[Entity, Mapping[str, float]]) -> None:
        data = [{"entity": dict(entity), "quotas": dict(values)} for entity, values in table.items()]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(data, indent=1).encode(), sync=self._sync)
