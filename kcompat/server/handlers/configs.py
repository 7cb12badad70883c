"""DescribeConfigs (key 32): v1-4.  AlterConfigs (key 33): v0-2.  IncrementalAlterConfigs (key 44): v0-1.

Resources: topics (type 2), the broker (type 4, named by its node id, or "" for the cluster-wide
dynamic defaults), and (config_resources.py) groups (32, Kafka's GroupConfig), client-metrics
subscriptions (16) and broker loggers (8, this process's loggers: IncrementalAlterConfigs only).
Other types get INVALID_REQUEST. In cluster mode (Incremental)AlterConfigs is forwarded to the
controller (group and client-metrics configs come back as ConfigRecords in the image), except a
request only about broker loggers, which this broker answers (dispatcher.py), as Kafka's does.

DescribeConfigs version notes:
* v0 (removed in Kafka 4, KIP-896): name, value, read_only, is_default, is_sensitive (sensitive values are null)
* v1: include_synonyms; config_source replaces is_default; synonyms (the topic override, then each
  broker property that supplies the default, with its layers: dynamic, static, default)
* v2: no change
* v3: include_documentation; config_type and documentation
* v4: flexible
A topic lists every topic config; a broker every property kcompat knows (read_only unless it can
be changed at run time); unknown names in configuration_keys are left out, as in Kafka.

AlterConfigs version notes (replaces all of a resource's overrides):
* v0: resources and configs, validate_only;  v1: no change;  v2: flexible

IncrementalAlterConfigs version notes:
* v0: per config an operation: SET, DELETE, APPEND and SUBTRACT (list configs only)
* v1: flexible
Topic changes are validated against the topic config table (INVALID_CONFIG), persisted, and applied
to the live logs at once; broker changes only to properties that are dynamic in Kafka.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from kcompat.config import ConfigEntry, ConfigError, ConfigType, format_value
from kcompat.config.broker_properties import BROKER_CONFIGS
from kcompat.config.topic_config import AlterOp, apply_incremental, validate_topic_configs
from kcompat.server.auth import access
from kcompat.server.config_resources import RESOURCE_TYPES, describe_entries, incremental, replace
from kcompat.server.context import RequestContext
from kcompat.server.errors import ApiError
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_configs import ALTER_CONFIGS
from kcompat.wire.messages.describe_configs import DESCRIBE_CONFIGS
from kcompat.wire.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from kcompat.wire.protocol import Request
from kcompat.wire.types import alter_configs as ac
from kcompat.wire.types import incremental_alter_configs as iac
from kcompat.wire.types.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)

TOPIC = 2
BROKER = 4


def _broker_layer(ctx: RequestContext, name: str) -> bool:
    """True for the cluster-default resource (""), False for this broker; ApiError for another id."""
    if name == "":
        return True
    try:
        node = int(name)
    except ValueError:
        raise ApiError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if node != ctx.identity.node_id:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.identity.node_id} or empty string, but received {name}",
        )
    return False


def _entries(
    ctx: RequestContext, res: DescribeConfigsResource, synonyms: bool, documentation: bool
) -> list[ConfigEntry]:
    if (
        denied := access.config_error(ctx, access.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
    ) is not None:
        raise ApiError(denied)
    names = list(res.configuration_keys) if res.configuration_keys is not None else None
    if res.resource_type == TOPIC:
        t = ctx.metadata.topic(res.resource_name)
        if t is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist.")
        return ctx.metadata.describe_topic_configs(t, names, synonyms=synonyms, documentation=documentation)
    if res.resource_type == BROKER:
        # The "" resource shows only the cluster-wide dynamic values, as Kafka does.
        cluster_default = _broker_layer(ctx, res.resource_name)
        return ctx.config.describe(
            names,
            include_synonyms=synonyms,
            include_documentation=documentation,
            cluster_default=cluster_default,
        )
    if res.resource_type in RESOURCE_TYPES:
        return describe_entries(ctx, res.resource_type, res.resource_name, names, synonyms, documentation)
    raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")


@handles(DESCRIBE_CONFIGS, "1-4")
async def describe_configs(
    ctx: RequestContext, request: Request[DescribeConfigsRequest]
) -> DescribeConfigsResponse:
    body = request.body
    v = request.api_version
    results = []
    for res in body.resources:
        out = DescribeConfigsResult(
            error_code=0,
            error_message=None,
            resource_type=res.resource_type,
            resource_name=res.resource_name,
            configs=[],
        )
        results.append(out)
        try:
            entries = _entries(ctx, res, body.include_synonyms, body.include_documentation)
        except ApiError as e:
            out.error_code, out.error_message = int(e.error), e.message
            continue
        out.configs = [
            DescribeConfigsResourceResult(
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=int(e.source),
                is_sensitive=e.sensitive,
                synonyms=[
                    DescribeConfigsSynonym(name=s.name, value=s.value, source=int(s.source))
                    for s in e.synonyms
                ]
                if v >= 1 and body.include_synonyms
                else [],
                config_type=int(e.type),
                documentation=e.documentation if body.include_documentation else None,
            )
            for e in entries
        ]
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _duplicates(resources: list[Any]) -> Counter[tuple[int, str]]:
    return Counter((r.resource_type, r.resource_name) for r in resources)


def _alter_each(
    ctx: RequestContext, body: Any, alter: Callable[[Any], None]
) -> list[tuple[Any, int, str | None]]:
    """The checks AlterConfigs and IncrementalAlterConfigs share, then `alter(resource)` for each;
    an ApiError becomes that resource's error and the others go on: (resource, error code, message)."""
    dupes = _duplicates(body.resources)
    responses = []
    for res in body.resources:
        error, message = 0, None
        try:
            if dupes[(res.resource_type, res.resource_name)] > 1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate resource in the request.")
            _check_unique_keys([c.name for c in res.configs])
            if res.resource_type not in (TOPIC, BROKER, *RESOURCE_TYPES):
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
            if (
                denied := access.config_error(ctx, access.ALTER_CONFIGS, res.resource_type, res.resource_name)
            ) is not None:
                raise ApiError(denied)
            alter(res)
        except ApiError as e:
            error, message = int(e.error), e.message
        responses.append((res, error, message))
    return responses


@handles(ALTER_CONFIGS, "0-2")
async def alter_configs(
    ctx: RequestContext, request: Request[ac.AlterConfigsRequest]
) -> ac.AlterConfigsResponse:
    body = request.body

    def alter(res: ac.AlterConfigsResource) -> None:
        changes = {c.name: c.value for c in res.configs}
        if res.resource_type in RESOURCE_TYPES:
            replace(ctx, res.resource_type, res.resource_name, changes, body.validate_only)
        elif res.resource_type == TOPIC:
            t = _topic(ctx, res.resource_name)
            overrides = _config_call(validate_topic_configs, changes)
            if not body.validate_only:
                ctx.metadata.alter_topic_configs(t, overrides)
        else:  # BROKER: AlterConfigs replaces the whole dynamic layer
            cluster_default = _broker_layer(ctx, res.resource_name)
            full: dict[str, str | None] = {k: None for k in _dynamic_layer(ctx, cluster_default)}
            full.update(changes)
            _alter_broker(ctx, full, cluster_default, body.validate_only)

    return ac.AlterConfigsResponse(
        throttle_time_ms=0,
        responses=[
            ac.AlterConfigsResourceResponse(
                error_code=error,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
            for res, error, message in _alter_each(ctx, body, alter)
        ],
    )


@handles(INCREMENTAL_ALTER_CONFIGS, "0-1")
async def incremental_alter_configs(
    ctx: RequestContext, request: Request[iac.IncrementalAlterConfigsRequest]
) -> iac.IncrementalAlterConfigsResponse:
    body = request.body

    def alter(res: iac.AlterConfigsResource) -> None:
        ops = [(c.name, c.config_operation, c.value) for c in res.configs]
        for _, op, _ in ops:
            if op not in tuple(AlterOp):
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation {op}")
        if res.resource_type in RESOURCE_TYPES:
            incremental(ctx, res.resource_type, res.resource_name, ops, body.validate_only)
        elif res.resource_type == TOPIC:
            t = _topic(ctx, res.resource_name)
            overrides = _config_call(apply_incremental, t.configs, ops)
            if not body.validate_only:
                ctx.metadata.alter_topic_configs(t, overrides)
        else:
            cluster_default = _broker_layer(ctx, res.resource_name)
            current = _dynamic_layer(ctx, cluster_default)
            _alter_broker(ctx, _broker_incremental(ctx, current, ops), cluster_default, body.validate_only)

    return iac.IncrementalAlterConfigsResponse(
        throttle_time_ms=0,
        responses=[
            iac.AlterConfigsResourceResponse(
                error_code=error,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
            for res, error, message in _alter_each(ctx, body, alter)
        ],
    )


def _check_unique_keys(names: list[str]) -> None:
    repeated = sorted(n for n, c in Counter(names).items() if c > 1)
    if repeated:
        raise ApiError(
            ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(repeated)}"
        )


def _topic(ctx: RequestContext, name: str) -> Any:
    t = ctx.metadata.topic(name)
    if t is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
    return t


def _config_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except ConfigError as e:
        raise ApiError(ErrorCode.INVALID_CONFIG, str(e)) from None


def _dynamic_layer(ctx: RequestContext, cluster_default: bool) -> dict[str, str]:
    cfg = ctx.config
    return cfg.dynamic_default_values if cluster_default else cfg.dynamic_values


def _broker_incremental(
    ctx: RequestContext, current: dict[str, str], ops: list[tuple[str, int, str | None]]
) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    for name, op, value in ops:
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown broker config name: {name}")
        if op == AlterOp.DELETE:
            changes[name] = None
        elif value is None:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for: {name}")
        elif op == AlterOp.SET:
            changes[name] = value
        else:
            if definition.type is not ConfigType.LIST:
                raise ApiError(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value {AlterOp(op).name.lower()} is not allowed for config key: {name}",
                )
            base = current.get(name)
            if base is None:
                base = format_value(definition.type, ctx.config.get(name)) or ""
            items = [i.strip() for i in base.split(",") if i.strip()]
            delta = [i.strip() for i in value.split(",") if i.strip()]
            items = (
                items + [d for d in delta if d not in items]
                if op == AlterOp.APPEND
                else [i for i in items if i not in delta]
            )
            changes[name] = ",".join(items)
    return changes


def _alter_broker(
    ctx: RequestContext, changes: dict[str, str | None], cluster_default: bool, validate_only: bool
) -> None:
    new = _config_call(ctx.config.with_dynamic, changes, cluster_default=cluster_default) if changes else None
    if new is not None and not validate_only:
        ctx.metadata.alter_broker_config(new)
