"""Client-metrics resources (ConfigResource type 16, KIP-714 subscriptions): Kafka 4.3.1's
ClientMetricsConfigs, their names, defaults and validation.

Kafka's errors: an empty name, an unknown config or an interval out of [100, 3600000] is
INVALID_REQUEST; a match entry that is not `param=regex` over the known params, or whose regex does
not compile, is INVALID_CONFIG ("Illegal client matching pattern").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kcompat.config.definition import ConfigDef, ConfigEntry, ConfigSource, ConfigSynonym, ConfigType, table
from kcompat.config.errors import ConfigError

CLIENT_METRICS = 16  # ConfigResource.Type.CLIENT_METRICS

CLIENT_METRICS_CONFIGS = table(
    [
        ConfigDef("metrics", ConfigType.LIST, [], "Telemetry metric name prefix list"),
        ConfigDef("interval.ms", ConfigType.INT, 300000, "Metrics push interval in milliseconds"),
        ConfigDef("match", ConfigType.LIST, [], "Client match criteria"),
    ]
)
MATCH_PARAMS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000


class InvalidClientMetrics(ValueError):
    """What Kafka answers with INVALID_REQUEST (InvalidRequestException)."""


def validate_client_metrics(name: str, overrides: Mapping[str, str]) -> dict[str, str]:
    """A subscription's full set of configs, checked as ClientMetricsConfigs.validate."""
    if not name:
        raise InvalidClientMetrics("Subscription name can't be empty")
    for key in overrides:
        if key not in CLIENT_METRICS_CONFIGS:
            raise InvalidClientMetrics(f"Unknown client metrics configuration: {key}")
    values = {k: CLIENT_METRICS_CONFIGS[k].parse(v) for k, v in overrides.items()}
    interval = values.get("interval.ms")
    if interval is not None and not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise InvalidClientMetrics(
            f"Invalid value {interval} for interval.ms, interval must be between 100 and 3600000 (1 hour)"
        )
    for entry in values.get("match") or ():
        param, sep, pattern = entry.partition("=")
        if not sep or param.strip() not in MATCH_PARAMS or not pattern.strip():
            raise ConfigError(f"Illegal client matching pattern: {entry}")
        try:
            re.compile(pattern.strip())
        except re.error:
            raise ConfigError(f"Illegal client matching pattern: {entry}") from None
    return dict(overrides)


def describe_client_metrics(
    overrides: Mapping[str, str],
    names: Iterable[str] | None = None,
    *,
    include_synonyms: bool = True,
    include_documentation: bool = True,
) -> list[ConfigEntry]:
    """DescribeConfigs rows for one subscription: its values (CLIENT_METRICS_CONFIG), else defaults."""
    wanted = (
        sorted(CLIENT_METRICS_CONFIGS) if names is None else [n for n in names if n in CLIENT_METRICS_CONFIGS]
    )
    entries = []
    for key in wanted:
        d = CLIENT_METRICS_CONFIGS[key]
        value = overrides.get(key, d.default_text)
        source = ConfigSource.CLIENT_METRICS_CONFIG if key in overrides else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name=key,
                value=value,
                source=source,
                read_only=False,
                sensitive=False,
                type=d.type,
                documentation=d.doc if include_documentation else "",
                synonyms=(ConfigSynonym(key, value, source),)
                if include_synonyms and key in overrides
                else (),
            )
        )
    return entries
