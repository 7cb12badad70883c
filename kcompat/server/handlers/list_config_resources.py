"""ListConfigResources (key 74): v0-1 (`kafka-configs --describe --entity-type groups` or
`client-metrics` without a name, Admin.listConfigResources).

Version notes:
* v0 (ListClientMetricsResources before KIP-1142): the client-metrics subscriptions
* v1: resource_types; empty means every type Kafka 4.3.1 lists (topics, brokers, broker loggers,
  client metrics, groups with configs); a type it does not list answers UNSUPPORTED_VERSION
Needs DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from kcompat.config.client_metrics_config import CLIENT_METRICS
from kcompat.config.group_config import GROUP
from kcompat.server.auth import access
from kcompat.server.broker_loggers import BROKER_LOGGER
from kcompat.server.config_resources import list_names
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.list_config_resources import LIST_CONFIG_RESOURCES
from kcompat.wire.protocol import Request
from kcompat.wire.types.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)

TOPIC, BROKER = 2, 4
LISTED = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)  # Kafka's order


def _names(ctx: RequestContext, resource_type: int) -> list[str]:
    if resource_type in (BROKER, BROKER_LOGGER):
        brokers = ctx.metadata.live_brokers(ctx.listener)
        ids = [ctx.identity.node_id] if brokers is None else sorted(b.node_id for b in brokers)
        return [str(i) for i in ids]
    if resource_type == TOPIC:
        return sorted(ctx.metadata.topics.names())
    return list_names(ctx, resource_type)


@handles(LIST_CONFIG_RESOURCES, "0-1")
async def list_config_resources(
    ctx: RequestContext, request: Request[ListConfigResourcesRequest]
) -> ListConfigResourcesResponse:
    denied = access.cluster_error(ctx, access.DESCRIBE_CONFIGS)
    if denied is not None:
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=int(denied), config_resources=[])
    types = list(request.body.resource_types or ()) if request.api_version >= 1 else [CLIENT_METRICS]
    if not types:
        types = list(LISTED)
    if any(t not in LISTED for t in types):
        return ListConfigResourcesResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.UNSUPPORTED_VERSION), config_resources=[]
        )
    out = [ConfigResource(resource_name=name, resource_type=t) for t in types for name in _names(ctx, t)]
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=0, config_resources=out)
