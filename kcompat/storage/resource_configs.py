"""A single node's configs of resources that are neither topics nor brokers: groups (type 32) and
client-metrics subscriptions (type 16). In Kafka they are ConfigRecords in the KRaft metadata log
(cluster mode reads them from the image); a single broker keeps them in
`kcompat-resource-configs.json` in the first log dir, rewritten whole and atomically as
kcompat-topics.json is:

    {"version": 1, "configs": {"32": {"my-group": {"consumer.session.timeout.ms": "50000"}},
                               "16": {"all-metrics": {"metrics": "*", "interval.ms": "1000"}}}}

A resource whose last config is removed is dropped, as Kafka's image drops it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from kcompat.log.log_files import atomic_write

FILE_NAME = "kcompat-resource-configs.json"
FORMAT_VERSION = 1
_EMPTY: Mapping[str, str] = MappingProxyType({})


class ResourceConfigStore:
    def __init__(self, directory: Path, *, sync: bool = True) -> None:
        self.path = directory / FILE_NAME
        self._sync = sync
        self._configs: dict[int, dict[str, dict[str, str]]] = {}

    def load(self) -> None:
        """Read the stored configs; a missing file is an empty store. ValueError if it is corrupt."""
        if not self.path.exists():
            return
        doc = json.loads(self.path.read_text())
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unknown format version {doc.get('version')!r}")
        self._configs = {
            int(rtype): {name: {str(k): str(v) for k, v in cfg.items()} for name, cfg in by_name.items()}
            for rtype, by_name in doc.get("configs", {}).items()
        }

    def get(self, resource_type: int, name: str) -> Mapping[str, str]:
        return MappingProxyType(self._configs.get(resource_type, {}).get(name, {})) or _EMPTY

    def names(self, resource_type: int) -> list[str]:
        return sorted(self._configs.get(resource_type, {}))

    def set(self, resource_type: int, name: str, configs: Mapping[str, str]) -> None:
        """Replace one resource's configs (empty: remove it) and save; unchanged on OSError."""
        by_name = self._configs.setdefault(resource_type, {})
        old = by_name.get(name)
        if configs:
            by_name[name] = dict(configs)
        else:
            by_name.pop(name, None)
        try:
            self._save()
        except OSError:
            if old is None:
                by_name.pop(name, None)
            else:
                by_name[name] = old
            raise

    def _save(self) -> None:
        doc = {
            "version": FORMAT_VERSION,
            "configs": {str(t): by_name for t, by_name in sorted(self._configs.items()) if by_name},
        }
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode(), sync=self._sync)
