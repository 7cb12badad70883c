"""LogConfig: the typed per-topic settings kcompat.log works with, named after Kafka's topic configs
(segment.bytes -> segment_bytes). The log parses nothing: the broker builds one from a topic's
typed TopicConfig values (`TopicConfig.log_config()`), and each default is the one in the config
definitions (topic_properties.py, broker_properties.py), so both can never disagree.

A field whose name is not a topic config is the broker property of that name
(producer.id.expiration.ms). An unknown field is a TypeError, as for any dataclass: a setting
kcompat.log does not know cannot be passed and silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from kcompat.config.broker_properties import BROKER_CONFIGS
from kcompat.config.definition import ConfigDef
from kcompat.config.topic_properties import TOPIC_CONFIGS


def property_name(field_name: str) -> str:
    """The config a LogConfig field holds: segment_bytes -> segment.bytes."""
    return field_name.replace("_", ".")


def definition_of(name: str) -> ConfigDef:
    return TOPIC_CONFIGS.get(name) or BROKER_CONFIGS[name]


def _default(name: str) -> Any:
    value = definition_of(name).default
    return tuple(value) if isinstance(value, list) else value  # LISTs as tuples: the dataclass is frozen


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    flush_messages: int = _default("flush.messages")  # Kafka leaves flushing to the OS by default
    flush_ms: int = _default("flush.ms")
    retention_ms: int = _default("retention.ms")  # -1: keep forever
    retention_bytes: int = _default("retention.bytes")  # -1: no size limit
    cleanup_policy: tuple[str, ...] = _default("cleanup.policy")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    max_message_bytes: int = _default("max.message.bytes")
    message_timestamp_type: str = _default("message.timestamp.type")
    message_timestamp_before_max_ms: int = _default(
        "message.timestamp.before.max.ms"
    )  # how old a CreateTime may be
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")  # how far in the future
    producer_id_expiration_ms: int = _default("producer.id.expiration.ms")  # a broker property

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy


LOG_CONFIG_PROPERTIES: tuple[str, ...] = tuple(property_name(f.name) for f in fields(LogConfig))

__all__ = ["LOG_CONFIG_PROPERTIES", "LogConfig", "property_name"]
