"""A single node's finalized feature levels set by UpdateFeatures (`kafka-features upgrade` and
`downgrade`). In Kafka they are FeatureLevelRecords in the KRaft metadata log (cluster mode reads
them from the image); a single broker keeps the levels changed from its start-up defaults in
`kcompat-features.json` in the first log dir, rewritten whole and atomically, with the finalized
features epoch (one more per change, as the metadata offset grows in Kafka):

    {"version": 1, "epoch": 1, "levels": {"transaction.version": 1}}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from kcompat.log.log_files import atomic_write

FILE_NAME = "kcompat-features.json"
FORMAT_VERSION = 1


class FeatureStore:
    def __init__(self, directory: Path, *, sync: bool = True) -> None:
        self.path = directory / FILE_NAME
        self._sync = sync
        self.levels: dict[str, int] = {}
        self.epoch = 0

    def load(self) -> None:
        """Read the stored levels; a missing file is none. ValueError if it is corrupt."""
        if not self.path.exists():
            return
        doc = json.loads(self.path.read_text())
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unknown format version {doc.get('version')!r}")
        self.levels = {str(k): int(v) for k, v in doc.get("levels", {}).items()}
        self.epoch = int(doc.get("epoch", 0))

    def update(self, levels: Mapping[str, int]) -> None:
        """Set these levels, one epoch later, and save; unchanged on OSError."""
        doc = {"version": FORMAT_VERSION, "epoch": self.epoch + 1, "levels": {**self.levels, **levels}}
        atomic_write(self.path, json.dumps(doc, indent=1).encode(), sync=self._sync)
        self.levels, self.epoch = doc["levels"], doc["epoch"]  # type: ignore[assignment]
