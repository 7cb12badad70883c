"""Group configs (ConfigResource type 32): Kafka 4.3.1's GroupConfig, its names, types, defaults,
broker synonyms and validation.

A group's value is its override, else its broker synonym's value (group.consumer.session.timeout.ms
for consumer.session.timeout.ms, ...), else the definition's default. Validation is GroupConfig's:
every name known ("Unknown group config name: X"), each value parsed and checked against its
definition, then, over the group's full set merged onto the broker's values, each bounded by the
broker's min/max properties and each session timeout above its heartbeat interval. Every failure
is INVALID_CONFIG, as Kafka's InvalidConfigurationException and ConfigException are.

The broker properties are read from the broker's config (every one of Kafka's is defined, so a
bound set on the broker bounds the groups' values too); KAFKA_BROKER_DEFAULTS is the fallback for
a property the broker table lacks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kcompat.config.broker_config import BrokerConfig
from kcompat.config.broker_properties import BROKER_CONFIGS
from kcompat.config.definition import (
    Check,
    ConfigDef,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    OneOf,
    at_least,
    format_value,
    table,
)
from kcompat.config.errors import ConfigError

GROUP = 32  # ConfigResource.Type.GROUP

_DURATION = re.compile(r"P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?", re.IGNORECASE)


def _auto_offset_reset(value: Any) -> bool:
    v = str(value).lower()
    if v in ("latest", "earliest"):
        return True
    if not v.startswith("by_duration:"):
        return False
    duration = v[len("by_duration:") :]
    return duration not in ("p", "pt") and _DURATION.fullmatch(duration) is not None


_I, _S, _B = ConfigType.INT, ConfigType.STRING, ConfigType.BOOLEAN
GROUP_CONFIGS = table(
    [
        ConfigDef(
            "consumer.session.timeout.ms",
            _I,
            45000,
            "The timeout to detect client failures when using the consumer group protocol.",
            validator=at_least(1),
        ),
        ConfigDef(
            "consumer.heartbeat.interval.ms",
            _I,
            5000,
            "The heartbeat interval given to the members of a consumer group.",
            validator=at_least(1),
        ),
        ConfigDef(
            "consumer.assignment.interval.ms",
            _I,
            1000,
            "The interval between assignment updates for a consumer group.",
            validator=at_least(0),
        ),
        ConfigDef(
            "share.session.timeout.ms",
            _I,
            45000,
            "The timeout to detect client failures when using the share group protocol.",
            validator=at_least(1),
        ),
        ConfigDef(
            "share.heartbeat.interval.ms",
            _I,
            5000,
            "The heartbeat interval given to the members of a share group.",
            validator=at_least(1),
        ),
        ConfigDef(
            "share.record.lock.duration.ms",
            _I,
            30000,
            "The record acquisition lock duration in milliseconds for share groups.",
            validator=at_least(1000),
        ),
        ConfigDef(
            "share.delivery.count.limit",
            _I,
            5,
            "The maximum number of delivery attempts for a record delivered to a share group.",
            validator=at_least(2),
        ),
        ConfigDef(
            "share.partition.max.record.locks",
            _I,
            2000,
            "Share-group record lock limit per share-partition.",
            validator=at_least(100),
        ),
        ConfigDef(
            "share.auto.offset.reset",
            _S,
            "latest",
            "The strategy to initialize the share-partition start offset: earliest, latest, or by_duration:<ISO8601 duration> (a duration before now; negative is not allowed).",
            validator=Check(_auto_offset_reset, "[latest, earliest, by_duration:PnDTnHnMn.nS]"),
        ),
        ConfigDef(
            "share.isolation.level",
            _S,
            "read_uncommitted",
            'Controls how to read records written transactionally. If set to "read_committed", the share group will only deliver transactional records which have been committed. If set to "read_uncommitted", the share group will return all messages, even transactional messages which have been aborted. Non-transactional records will be returned unconditionally in either mode.',
            validator=OneOf(("read_committed", "read_uncommitted")),
        ),
        ConfigDef(
            "share.renew.acknowledge.enable",
            _B,
            True,
            "Whether the renew acknowledge type is enabled for the share group.",
        ),
        ConfigDef(
            "share.assignment.interval.ms",
            _I,
            1000,
            "The interval between assignment updates for a share group.",
            validator=at_least(0),
        ),
        ConfigDef(
            "streams.session.timeout.ms",
            _I,
            45000,
            "The timeout to detect client failures when using the streams group protocol.",
            validator=at_least(1),
        ),
        ConfigDef(
            "streams.heartbeat.interval.ms",
            _I,
            5000,
            "The heartbeat interval given to the members.",
            validator=at_least(1),
        ),
        ConfigDef(
            "streams.num.standby.replicas",
            _I,
            0,
            "The number of standby replicas for each task.",
            validator=at_least(0),
        ),
        ConfigDef(
            "streams.initial.rebalance.delay.ms",
            _I,
            3000,
            "The amount of time the group coordinator will wait for more streams clients to join a new group before performing the first rebalance. A longer delay means potentially fewer rebalances.",
            validator=at_least(0),
        ),
        ConfigDef(
            "streams.assignment.interval.ms",
            _I,
            1000,
            "The interval between assignment updates for a streams group.",
            validator=at_least(0),
        ),
    ]
)

# GroupConfig.ALL_GROUP_CONFIG_SYNONYMS: the broker property each group config defaults to.
_NO_SYNONYM = ("share.auto.offset.reset", "share.isolation.level", "share.renew.acknowledge.enable")
BROKER_SYNONYM = {name: f"group.{name}" for name in GROUP_CONFIGS if name not in _NO_SYNONYM}

# Kafka 4.3.1's defaults of the broker properties group configs read (GroupCoordinatorConfig,
# ShareGroupConfig), for those kcompat's broker table does not define.
KAFKA_BROKER_DEFAULTS: Mapping[str, int] = {
    **{f"group.{name}": d.default for name, d in GROUP_CONFIGS.items() if name in BROKER_SYNONYM},
    **{f"group.{kind}.min.session.timeout.ms": 45000 for kind in ("consumer", "share", "streams")},
    **{f"group.{kind}.max.session.timeout.ms": 60000 for kind in ("consumer", "share", "streams")},
    **{f"group.{kind}.min.heartbeat.interval.ms": 5000 for kind in ("consumer", "share", "streams")},
    **{f"group.{kind}.max.heartbeat.interval.ms": 15000 for kind in ("consumer", "share", "streams")},
    **{f"group.{kind}.min.assignment.interval.ms": 0 for kind in ("consumer", "share", "streams")},
    **{f"group.{kind}.max.assignment.interval.ms": 15000 for kind in ("consumer", "share", "streams")},
    "group.share.min.record.lock.duration.ms": 15000,
    "group.share.max.record.lock.duration.ms": 60000,
    "group.share.min.delivery.count.limit": 2,
    "group.share.max.delivery.count.limit": 10,
    "group.share.min.partition.max.record.locks": 100,
    "group.share.max.partition.max.record.locks": 4000,
    "group.streams.max.standby.replicas": 2,
}

# GroupConfig.validateValues, in its order: (config, lower-bound property, upper-bound property).
_BOUNDS = [
    (
        "consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    (
        "consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    (
        "consumer.assignment.interval.ms",
        "group.consumer.min.assignment.interval.ms",
        "group.consumer.max.assignment.interval.ms",
    ),
    (
        "share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    (
        "share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    (
        "share.delivery.count.limit",
        "group.share.min.delivery.count.limit",
        "group.share.max.delivery.count.limit",
    ),
    (
        "share.partition.max.record.locks",
        "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks",
    ),
    (
        "share.assignment.interval.ms",
        "group.share.min.assignment.interval.ms",
        "group.share.max.assignment.interval.ms",
    ),
    (
        "streams.heartbeat.interval.ms",
        "group.streams.min.heartbeat.interval.ms",
        "group.streams.max.heartbeat.interval.ms",
    ),
    (
        "streams.session.timeout.ms",
        "group.streams.min.session.timeout.ms",
        "group.streams.max.session.timeout.ms",
    ),
    ("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
    (
        "streams.assignment.interval.ms",
        "group.streams.min.assignment.interval.ms",
        "group.streams.max.assignment.interval.ms",
    ),
]
_SESSION_OVER_HEARTBEAT = [
    (f"{k}.session.timeout.ms", f"{k}.heartbeat.interval.ms") for k in ("consumer", "share", "streams")
]


def broker_value(broker: BrokerConfig, prop: str) -> Any:
    """A broker property group configs read: kcompat's value when it defines it, else Kafka's default."""
    if prop in BROKER_CONFIGS:
        return broker.get(prop)
    return KAFKA_BROKER_DEFAULTS[prop]


def _defaults(broker: BrokerConfig) -> dict[str, Any]:
    """GroupCoordinatorConfig.extractGroupConfigMap: each config's broker-level value."""
    return {
        name: broker_value(broker, BROKER_SYNONYM[name]) if name in BROKER_SYNONYM else d.default
        for name, d in GROUP_CONFIGS.items()
    }


def validate_group_configs(broker: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, str]:
    """A group's full set of overrides, checked as Kafka's GroupConfig.validate; ConfigError if not."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            raise ConfigError(f"Unknown group config name: {name}")
    values = _defaults(broker)
    for name, raw in overrides.items():
        values[name] = GROUP_CONFIGS[name].parse(raw)
    for name, low, high in _BOUNDS:
        if low is not None and values[name] < broker_value(broker, low):
            raise ConfigError(f"{name} must be greater than or equal to {low}")
        if values[name] > broker_value(broker, high):
            raise ConfigError(f"{name} must be less than or equal to {high}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise ConfigError(f"{session} must be greater than {heartbeat}")
    return dict(overrides)


def group_value(broker: BrokerConfig, overrides: Mapping[str, str], name: str) -> Any:
    """The typed value a group runs with: its override, else the broker's, else the default."""
    raw = overrides.get(name)
    if raw is not None:
        try:
            return GROUP_CONFIGS[name].parse(raw)
        except ConfigError:
            pass  # validated when written; a broker bound changed since: fall back
    return _defaults(broker)[name]


def describe_group_configs(
    broker: BrokerConfig,
    overrides: Mapping[str, str],
    names: Iterable[str] | None = None,
    *,
    include_synonyms: bool = True,
    include_documentation: bool = True,
) -> list[ConfigEntry]:
    """DescribeConfigs rows for one group, as Kafka's ConfigHelper.createGroupConfigEntry: the
    group's override (GROUP_CONFIG), then its broker synonym's layers; the source is the first's."""
    wanted = sorted(GROUP_CONFIGS) if names is None else [n for n in names if n in GROUP_CONFIGS]
    entries = []
    for name in wanted:
        d = GROUP_CONFIGS[name]
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, overrides[name], ConfigSource.GROUP_CONFIG))
        prop = BROKER_SYNONYM.get(name)
        if prop is None:  # no broker synonym: Kafka lists the definition's default
            synonyms.append(ConfigSynonym(name, d.default_text, ConfigSource.DEFAULT_CONFIG))
        else:
            if prop in BROKER_CONFIGS:
                synonyms += broker.synonyms_of(prop)
            else:
                synonyms.append(
                    ConfigSynonym(prop, str(KAFKA_BROKER_DEFAULTS[prop]), ConfigSource.DEFAULT_CONFIG)
                )
        entries.append(
            ConfigEntry(
                name=name,
                value=format_value(d.type, group_value(broker, overrides, name)),
                source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=False,
                sensitive=False,
                type=d.type,
                documentation=d.doc if include_documentation else "",
                synonyms=tuple(synonyms) if include_synonyms else (),
            )
        )
    return entries
