"""Per-topic log settings, named after Kafka's topic config keys (segment.bytes -> segment_bytes).

Defaults are Kafka's (LogConfig / ServerLogConfigs in Kafka 4.0). `from_properties` takes the dotted
keys as CreateTopics / AlterConfigs carry them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX  # Kafka leaves flushing to the OS by default
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1024 * 1024 + 12  # Kafka's 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX  # how old a CreateTime timestamp may be
    message_timestamp_after_max_ms: int = 3600 * 1000  # how far in the future
    producer_id_expiration_ms: int = 24 * 3600 * 1000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def with_properties(self, props: dict[str, str]) -> LogConfig:
        """A copy with Kafka-style dotted keys applied ("retention.ms": "1000"); unknown keys are ignored."""
        known = {f.name: f for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            name = key.replace(".", "_")
            if name not in known:
                continue
            current = getattr(self, name)
            if name == "cleanup_policy":
                changes[name] = tuple(p.strip() for p in raw.split(",") if p.strip())
            elif isinstance(current, bool):
                changes[name] = raw.strip().lower() == "true"
            elif isinstance(current, int):
                changes[name] = int(raw)
            elif isinstance(current, float):
                changes[name] = float(raw)
            else:
                changes[name] = raw
        return replace(self, **changes)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LogConfig:
        return cls().with_properties(props)
