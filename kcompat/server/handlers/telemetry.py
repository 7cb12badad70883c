"""GetTelemetrySubscriptions (key 71) and PushTelemetry (key 72), v0 each: the KIP-714 receiver.

Kafka advertises these only with a receiver plugin configured; kcompat is its own receiver (the
admin listener's /metrics and console show what clients push), so it always does. Without a
client-metrics subscription a client gets the empty one (no metrics, the default interval) and
pushes nothing.

The subscriptions are the client-metrics config resources (ConfigResource 16) as the MetadataView
holds them: a single node's file, or in cluster mode the metadata image's ConfigRecords, so a
subscription set through any broker reaches every broker. They are read again at each request
(a client asks once per push interval, so this costs nothing that matters) and a change makes
each client re-evaluate, as Kafka's subscription version does.

PushTelemetry answers with Kafka's errors (kcompat.telemetry.client_metrics: INVALID_REQUEST,
THROTTLING_QUOTA_EXCEEDED, UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE,
TELEMETRY_TOO_LARGE); an accepted payload that does not decompress or is not OTLP metrics is
INVALID_RECORD, what Kafka answers when its receiver plugin fails, with one rate-limited log line.
"""

from __future__ import annotations

import logging

from kcompat.config.client_metrics_config import CLIENT_METRICS
from kcompat.server.context import RequestContext
from kcompat.server.log_throttle import LogThrottle
from kcompat.server.registry import handles
from kcompat.telemetry.client_metrics import ACCEPTED_COMPRESSION, ClientMetricsManager, Peer, Rejected
from kcompat.telemetry.otlp import OtlpError, decode_metrics_data
from kcompat.wire.compression import decompress
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages.get_telemetry_subscriptions import GET_TELEMETRY_SUBSCRIPTIONS
from kcompat.wire.messages.push_telemetry import PUSH_TELEMETRY
from kcompat.wire.protocol import Request
from kcompat.wire.types.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from kcompat.wire.types.push_telemetry import PushTelemetryRequest, PushTelemetryResponse

log = logging.getLogger("kcompat.telemetry")
_bad_payloads = LogThrottle(log)  # one line per client address every 10 s
EXPANSION = 32  # a payload may decompress to this many times telemetry.max.bytes, no more


def _manager(ctx: RequestContext) -> ClientMetricsManager:
    manager = ctx.telemetry.manager
    names = ctx.metadata.resource_names(CLIENT_METRICS)
    manager.update_subscriptions({n: ctx.metadata.resource_configs(CLIENT_METRICS, n) for n in names})
    return manager


def _peer(ctx: RequestContext) -> Peer:
    client = ctx.client
    return Peer(
        client_id=ctx.request.client_id or "",
        connection_id=getattr(client, "connection_id", ""),
        host=getattr(client, "host", ""),
        port=getattr(client, "port", -1),
    )


@handles(GET_TELEMETRY_SUBSCRIPTIONS, "0")
async def get_telemetry_subscriptions(
    ctx: RequestContext, request: Request[GetTelemetrySubscriptionsRequest]
) -> GetTelemetrySubscriptionsResponse:
    manager = _manager(ctx)
    try:
        inst = manager.get(request.body.client_instance_id, _peer(ctx), ctx.now_ms)
    except Rejected as e:
        log.debug("GetTelemetrySubscriptions refused: %s", e)
        return GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=int(e.code))
    return GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0,
        error_code=0,
        client_instance_id=inst.instance_id,
        subscription_id=inst.subscription_id,
        accepted_compression_types=[int(c) for c in ACCEPTED_COMPRESSION],
        push_interval_ms=inst.interval_ms,
        telemetry_max_bytes=manager.max_bytes(),
        delta_temporality=True,
        requested_metrics=list(inst.metrics),
    )


@handles(PUSH_TELEMETRY, "0")
async def push_telemetry(
    ctx: RequestContext, request: Request[PushTelemetryRequest]
) -> PushTelemetryResponse:
    manager = _manager(ctx)
    body = request.body
    payload = body.metrics or b""
    now = ctx.now_ms
    try:
        inst = manager.push(
            body.client_instance_id,
            body.subscription_id,
            body.terminating,
            body.compression_type,
            len(payload),
            _peer(ctx),
            now,
        )
    except Rejected as e:
        log.debug("PushTelemetry refused: %s", e)
        return PushTelemetryResponse(throttle_time_ms=0, error_code=int(e.code))
    if payload:
        try:
            raw = decompress(body.compression_type, payload, EXPANSION * manager.max_bytes())
            manager.record(inst, decode_metrics_data(raw), now)
        except (DecodeError, OtlpError):
            manager.invalid_payload(inst)
            _bad_payloads.log(
                logging.WARNING,
                f"telemetry {getattr(ctx.client, 'host', '')}",
                "PushTelemetry from client %s (instance %s) answered INVALID_RECORD: its metrics do "
                "not decompress as compression type %d or are not OTLP metrics data; check the "
                "client's telemetry reporter",
                ctx.request.client_id,
                inst.instance_id,
                body.compression_type,
            )
            return PushTelemetryResponse(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_RECORD))
    return PushTelemetryResponse(throttle_time_ms=0, error_code=0)
