"""DescribeCluster (key 60): v0-2.  (DescribeLogDirs: log_dirs.py.)

DescribeCluster version notes:
* v0: cluster id, controller id (this broker on a single node; in cluster mode a live broker, as
  Kafka's KRaft brokers answer), brokers (in cluster mode every unfenced one), authorized
  operations (INT32_MIN unless asked for; everything when asked: no ACLs)
* v1: endpoint_type: 1 (brokers) answered; 2 (controllers) gets UNSUPPORTED_ENDPOINT_TYPE, as a
  broker does in Kafka
* v2: include_fenced_brokers (KIP-1073): the brokers the controllers hold fenced are listed only
  when asked, with is_fenced set (a single node serves, so it is never fenced)
"""

from __future__ import annotations

from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_OPERATIONS, brokers_of
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.describe_cluster import DESCRIBE_CLUSTER
from kcompat.wire.protocol import Request
from kcompat.wire.types.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)

BROKERS_ENDPOINT = 1


@handles(DESCRIBE_CLUSTER, "0-2")
async def describe_cluster(
    ctx: RequestContext, request: Request[DescribeClusterRequest]
) -> DescribeClusterResponse:
    body = request.body
    identity = ctx.identity
    if body.endpoint_type != BROKERS_ENDPOINT:
        return DescribeClusterResponse(
            error_code=int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
            endpoint_type=body.endpoint_type,
            cluster_id=identity.cluster_id,
        )
    brokers, controller_id = brokers_of(ctx)
    fenced = ctx.metadata.fenced_brokers(ctx.listener) if body.include_fenced_brokers else []
    listed = sorted([(b, False) for b in brokers] + [(b, True) for b in fenced], key=lambda e: e[0].node_id)
    return DescribeClusterResponse(
        endpoint_type=BROKERS_ENDPOINT,
        cluster_id=identity.cluster_id,
        controller_id=controller_id,
        brokers=[
            DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=f)
            for b, f in listed
        ],
        cluster_authorized_operations=access.cluster_operations(ctx, CLUSTER_OPERATIONS)
        if body.include_cluster_authorized_operations
        else AUTHORIZED_OPERATIONS_OMITTED,
    )
