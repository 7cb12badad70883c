"""DescribeCluster (key 60): v0-2.  DescribeLogDirs (key 35): v1-5.

DescribeCluster version notes:
* v0: cluster id, controller id (this broker on a single node; in cluster mode a live broker, as
  Kafka's KRaft brokers answer), brokers (in cluster mode every unfenced one), authorized
  operations (INT32_MIN unless asked for; everything when asked: no ACLs)
* v1: endpoint_type: 1 (brokers) answered; 2 (controllers) gets UNSUPPORTED_ENDPOINT_TYPE, as a
  broker does in Kafka
* v2: include_fenced_brokers (KIP-1073): the brokers the controllers hold fenced are listed only
  when asked, with is_fenced set (a single node serves, so it is never fenced)

DescribeLogDirs version notes:
* v0: per log dir, the topics' partitions with their size; offset_lag 0 (we are the leader), no
  future replicas
* v1: no change;  v2: flexible
* v3: top-level error_code
* v4: total_bytes and usable_bytes of each log dir's file system
* v5: is_cordoned (KIP-1066): false (log dirs cannot be cordoned here)
topics = null means every partition; unknown topics are left out, as in Kafka.
"""

from __future__ import annotations

import os

from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_OPERATIONS, brokers_of
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.describe_cluster import DESCRIBE_CLUSTER
from kcompat.wire.messages.describe_log_dirs import DESCRIBE_LOG_DIRS
from kcompat.wire.protocol import Request
from kcompat.wire.types.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from kcompat.wire.types.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
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


@handles(DESCRIBE_LOG_DIRS, "1-5")
async def describe_log_dirs(
    ctx: RequestContext, request: Request[DescribeLogDirsRequest]
) -> DescribeLogDirsResponse:
    if (denied := access.cluster_error(ctx, access.DESCRIBE)) is not None:
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=int(denied), results=[])
    await ctx.replicas.created()  # new topics' logs are made after CreateTopics answered
    logs = ctx.replicas.logs
    assert logs is not None
    wanted: set[tuple[str, int]] | None = None
    if request.body.topics is not None:
        wanted = {(t.topic, p) for t in request.body.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list[DescribeLogDirsPartition]]] = {str(d): {} for d in ctx.identity.log_dirs}
    for topic, partition in logs.partitions():
        if wanted is not None and (topic, partition) not in wanted:
            continue
        if ctx.metadata.topic(topic) is None:
            continue
        plog = logs.get(topic, partition)
        if plog is None:
            continue
        d = str(plog.directory.parent)
        by_dir.setdefault(d, {}).setdefault(topic, []).append(
            DescribeLogDirsPartition(
                partition_index=partition, partition_size=plog.size, offset_lag=0, is_future_key=False
            )
        )
    results = []
    for d, topics in by_dir.items():
        try:
            st = os.statvfs(d)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            error = 0
        except OSError:
            total = usable = -1
            error = int(ErrorCode.KAFKA_STORAGE_ERROR)
        results.append(
            DescribeLogDirsResult(
                error_code=error,
                log_dir=d,
                topics=[
                    DescribeLogDirsTopic(name=name, partitions=parts)
                    for name, parts in sorted(topics.items())
                ],
                total_bytes=total,
                usable_bytes=usable,
                is_cordoned=False,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)
