"""A topic's effective configuration: broker defaults (through their synonyms) plus the topic's own
overrides; validation of CreateTopics / AlterConfigs / IncrementalAlterConfigs changes."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from kcompat.config.broker_config import BrokerConfig
from kcompat.config.broker_properties import BROKER_CONFIGS
from kcompat.config.definition import (
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    TypedAttributes,
    format_value,
)
from kcompat.config.errors import ConfigError
from kcompat.config.log_config import LOG_CONFIG_PROPERTIES, LogConfig
from kcompat.config.topic_properties import TOPIC_CONFIGS, TOPIC_SYNONYMS


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs operation codes."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic overrides as CreateTopics / AlterConfigs carry them; returns them trimmed.
    ConfigError (Kafka's INVALID_CONFIG) for an unknown name, a null value or a bad value."""
    out: dict[str, str] = {}
    for name, raw in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {name}", key=name, value=raw)
        if raw is None:
            raise ConfigError(f"Null value not supported for topic configs: {name}", key=name)
        definition.parse(raw)
        out[name] = raw.strip()
    return out


def apply_incremental(
    current: Mapping[str, str], ops: Iterable[tuple[str, AlterOp | int, str | None]]
) -> dict[str, str]:
    """A topic's overrides after IncrementalAlterConfigs operations (name, op, value), validated.
    APPEND/SUBTRACT work on LIST configs only, starting from the topic's default when unset."""
    result = dict(current)
    for name, op_code, raw in ops:
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {name}", key=name, value=raw)
        try:
            op = AlterOp(op_code)
        except ValueError:
            raise ConfigError(f"Unknown alter config operation {op_code} for {name}", key=name) from None
        if op is AlterOp.DELETE:
            result.pop(name, None)
            continue
        if raw is None:
            raise ConfigError(f"Null value not supported for topic configs: {name}", key=name)
        if op is AlterOp.SET:
            result[name] = raw
            continue
        if definition.type is not ConfigType.LIST:
            raise ConfigError(
                f"Config value {op.name.lower()} is not allowed for config key: {name}", key=name, value=raw
            )
        base = result.get(name, format_value(ConfigType.LIST, definition.default) or "")
        items = [i.strip() for i in base.split(",") if i.strip()]
        changes = [i.strip() for i in raw.split(",") if i.strip()]
        if op is AlterOp.APPEND:
            items += [c for c in changes if c not in items]
        else:
            items = [i for i in items if i not in changes]
        result[name] = ",".join(items)
    return validate_topic_configs(result)


class TopicConfig(TypedAttributes):
    """Effective config of one topic. `get("retention.ms")` or `cfg.retention_ms` gives the typed value."""

    _definitions = TOPIC_CONFIGS
    _kind = "config"

    def __init__(self, broker: BrokerConfig, overrides: Mapping[str, str] | None = None) -> None:
        self.broker = broker
        self.overrides: dict[str, str] = validate_topic_configs(overrides or {})
        self._parsed = {name: TOPIC_CONFIGS[name].parse(raw) for name, raw in self.overrides.items()}
        # Every value get() gave, inherited ones included: both configs are immutable (a change makes
        # a new TopicConfig), and Produce asks compression.type of every request (~2 us resolved).
        self._values: dict[str, Any] = dict(self._parsed)

    def _inherited(self, name: str) -> tuple[Any, ConfigSource]:
        """The value a topic without an override gets, and where it comes from."""
        synonyms = TOPIC_SYNONYMS.get(name, ())
        for synonym in synonyms:
            if self.broker.is_set(synonym.broker_name):
                value = self.broker.raw(synonym.broker_name)
                return self._scaled(name, value, synonym.scale), self.broker.source(synonym.broker_name)
        for synonym in reversed(synonyms):
            default = BROKER_CONFIGS[synonym.broker_name].default
            if default is not None:
                return self._scaled(name, default, synonym.scale), ConfigSource.DEFAULT_CONFIG
        return TOPIC_CONFIGS[name].default, ConfigSource.DEFAULT_CONFIG

    @staticmethod
    def _scaled(name: str, value: Any, scale: int) -> Any:
        if scale == 1:
            return value
        scaled = value * scale
        return -1 if name == "retention.ms" and scaled < 0 else scaled

    def get(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            if name not in TOPIC_CONFIGS:
                raise KeyError(f"unknown topic config {name!r}") from None
        value = self._values[name] = self._inherited(name)[0]
        return value

    def source(self, name: str) -> ConfigSource:
        if name in self._parsed:
            return ConfigSource.TOPIC_CONFIG
        return self._inherited(name)[1]

    def values(self) -> dict[str, Any]:
        """All topic configs, typed."""
        return {name: self.get(name) for name in TOPIC_CONFIGS}

    def log_config(self) -> LogConfig:
        """The typed settings this topic's logs run with (no string round trip); the fields that are
        not topic configs (producer.id.expiration.ms) are the broker's."""
        values: dict[str, Any] = {}
        for name in LOG_CONFIG_PROPERTIES:
            value = self.get(name) if name in TOPIC_CONFIGS else self.broker.get(name)
            values[name.replace(".", "_")] = tuple(value) if isinstance(value, list) else value
        return LogConfig(**values)

    def describe(
        self,
        names: Iterable[str] | None = None,
        *,
        include_synonyms: bool = True,
        include_documentation: bool = True,
    ) -> list[ConfigEntry]:
        """DescribeConfigs rows for this topic (all configs when `names` is None; unknown names skipped)."""
        wanted = sorted(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
        entries = []
        for name in wanted:
            definition = TOPIC_CONFIGS[name]
            # Kafka's ConfigHelper: the topic's own value, then the synonyms of the first broker
            # property in the chain; the source is the first synonym's (DEFAULT_CONFIG when none).
            synonyms: list[ConfigSynonym] = []
            if name in self.overrides:
                shown = format_value(definition.type, self._parsed[name])
                synonyms.append(ConfigSynonym(name, shown, ConfigSource.TOPIC_CONFIG))
            chain = [s.broker_name for s in TOPIC_SYNONYMS.get(name, ())]
            if chain:
                synonyms += self.broker.synonyms_of(chain[0], chain)
            entries.append(
                ConfigEntry(
                    name=name,
                    value=format_value(definition.type, self.get(name)),
                    source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                    read_only=False,
                    sensitive=False,
                    type=definition.type,
                    documentation=definition.doc if include_documentation else "",
                    synonyms=tuple(synonyms) if include_synonyms else (),
                )
            )
        return entries


def topic_config(broker: BrokerConfig, overrides: Mapping[str, str] | None = None) -> TopicConfig:
    """The effective configuration of a topic with these overrides."""
    return TopicConfig(broker, overrides)
