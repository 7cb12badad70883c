"""The config resources beside topics and brokers, as Describe/AlterConfigs and ListConfigResources
see them: groups (32), client-metrics subscriptions (16) and broker loggers (8).

    describe_entries(ctx, type, name, names, ...) ──► the rows of one resource
    replace(ctx, type, name, configs, validate_only) ──► AlterConfigs: the whole set
    incremental(ctx, type, name, ops, validate_only) ──► IncrementalAlterConfigs

Groups go through the GroupConfigs service (groups/group_configs.py); client-metrics configs are
kept by the MetadataView beside them; broker loggers are this process's Python loggers
(broker_loggers.py). A broker-logger resource names this broker's id, as Kafka checks.
"""

from __future__ import annotations

from collections.abc import Mapping

from kcompat.config import ConfigEntry, ConfigError, ConfigType, format_value
from kcompat.config.client_metrics_config import (
    CLIENT_METRICS,
    CLIENT_METRICS_CONFIGS,
    InvalidClientMetrics,
    describe_client_metrics,
    validate_client_metrics,
)
from kcompat.config.group_config import GROUP, GROUP_CONFIGS
from kcompat.config.topic_config import AlterOp
from kcompat.server import broker_loggers
from kcompat.server.broker_loggers import BROKER_LOGGER
from kcompat.server.context import RequestContext
from kcompat.server.errors import ApiError
from kcompat.server.groups.group_configs import GroupConfigs
from kcompat.wire.error_codes import ErrorCode

RESOURCE_TYPES = (GROUP, CLIENT_METRICS, BROKER_LOGGER)
Op = tuple[str, int, str | None]


def _group_configs(ctx: RequestContext) -> GroupConfigs:
    configs = ctx.groups.configs
    if configs is None:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Unsupported resource type 32")
    return configs


def _this_broker(ctx: RequestContext, name: str) -> None:
    if not name:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        node = int(name)
    except ValueError:
        raise ApiError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if node != ctx.identity.node_id:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.identity.node_id} but received {name}",
        )


def describe_entries(
    ctx: RequestContext,
    resource_type: int,
    name: str,
    names: list[str] | None,
    synonyms: bool,
    documentation: bool,
) -> list[ConfigEntry]:
    if resource_type == GROUP:
        return _group_configs(ctx).describe(name, names, synonyms=synonyms, documentation=documentation)
    if resource_type == CLIENT_METRICS:
        current = ctx.metadata.resource_configs(CLIENT_METRICS, name)
        return describe_client_metrics(
            current, names, include_synonyms=synonyms, include_documentation=documentation
        )
    _this_broker(ctx, name)
    return broker_loggers.describe(names)


def _client_metrics(ctx: RequestContext, name: str, configs: Mapping[str, str], validate_only: bool) -> None:
    try:
        checked = validate_client_metrics(name, configs)
    except InvalidClientMetrics as e:
        raise ApiError(ErrorCode.INVALID_REQUEST, str(e)) from None
    except ConfigError as e:
        raise ApiError(ErrorCode.INVALID_CONFIG, str(e)) from None
    if not validate_only:
        ctx.metadata.alter_resource_configs(CLIENT_METRICS, name, checked)


def replace(
    ctx: RequestContext, resource_type: int, name: str, configs: Mapping[str, str | None], validate_only: bool
) -> None:
    """AlterConfigs: the resource's configs become `configs`."""
    nulls = sorted(k for k, v in configs.items() if v is None)
    if nulls:
        kind = "group" if resource_type == GROUP else "client metrics"
        raise ApiError(
            ErrorCode.INVALID_REQUEST, f"Null value not supported for {kind} configs: {','.join(nulls)}"
        )
    full = {k: v for k, v in configs.items() if v is not None}
    if resource_type == GROUP:
        _group_configs(ctx).alter(name, full, validate_only=validate_only)
    elif resource_type == CLIENT_METRICS:
        _client_metrics(ctx, name, full, validate_only)
    else:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER",
        )


def incremental(
    ctx: RequestContext, resource_type: int, name: str, ops: list[Op], validate_only: bool
) -> None:
    """IncrementalAlterConfigs: SET, DELETE, and APPEND/SUBTRACT on list configs."""
    if resource_type == BROKER_LOGGER:
        _this_broker(ctx, name)
        broker_loggers.alter(ops, validate_only)
        return
    definitions = GROUP_CONFIGS if resource_type == GROUP else CLIENT_METRICS_CONFIGS
    current = dict(ctx.metadata.resource_configs(resource_type, name))
    for key, op, value in ops:
        d = definitions.get(key)
        if op == AlterOp.DELETE:
            current.pop(key, None)
        elif value is None:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
        elif op == AlterOp.SET or d is None:
            current[key] = value  # an unknown name fails validation with Kafka's message
        elif d.type is not ConfigType.LIST:
            raise ApiError(
                ErrorCode.INVALID_CONFIG,
                f"Config value {AlterOp(op).name.lower()} is not allowed for config key: {key}",
            )
        else:
            base = current.get(key, format_value(ConfigType.LIST, d.default) or "")
            items = [i.strip() for i in base.split(",") if i.strip()]
            delta = [i.strip() for i in value.split(",") if i.strip()]
            items = (
                items + [x for x in delta if x not in items]
                if op == AlterOp.APPEND
                else [i for i in items if i not in delta]
            )
            current[key] = ",".join(items)
    replace(ctx, resource_type, name, current, validate_only)


def list_names(ctx: RequestContext, resource_type: int) -> list[str]:
    """ListConfigResources: the resources of a type that exist here."""
    if resource_type == GROUP:
        return _group_configs(ctx).names()
    if resource_type == CLIENT_METRICS:
        return ctx.metadata.resource_names(CLIENT_METRICS)
    return []
