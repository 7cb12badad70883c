"""DescribeLogDirs (key 35): v1-5.  AlterReplicaLogDirs (key 34): v1-2.

DescribeLogDirs version notes:
* v0: per log dir, the topics' partitions with their size and offset lag (0 for the current log;
  for a future log, how far its copy is behind the current one), is_future_key for a future log
* v1: no change;  v2: flexible
* v3: top-level error_code
* v4: total_bytes and usable_bytes of each log dir's file system
* v5: is_cordoned (KIP-1066): false (log dirs cannot be cordoned here)
topics = null means every partition; unknown topics are left out, as in Kafka. An offline log dir
is listed with KAFKA_STORAGE_ERROR and nothing else, as Kafka's broker answers.

AlterReplicaLogDirs (v0 has no different fields; v2 flexible): each partition moved to the named
dir (log/log_dirs.py). Errors as Kafka's ReplicaManager.alterReplicaLogDirs answers them:
LOG_DIR_NOT_FOUND (not one of log.dirs), KAFKA_STORAGE_ERROR (that dir or the partition's is
offline), UNKNOWN_TOPIC_OR_PARTITION (no such partition here), CLUSTER_AUTHORIZATION_FAILED
without ALTER on the cluster.
"""

from __future__ import annotations

import os
from pathlib import Path

from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_replica_log_dirs import ALTER_REPLICA_LOG_DIRS
from kcompat.wire.messages.describe_log_dirs import DESCRIBE_LOG_DIRS
from kcompat.wire.protocol import Request
from kcompat.wire.types.alter_replica_log_dirs import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from kcompat.wire.types.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
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
    by_dir: dict[str, dict[str, list[DescribeLogDirsPartition]]] = {str(d): {} for d in logs.log_dirs}

    def add(d: str, topic: str, partition: int, size: int, lag: int, future: bool) -> None:
        by_dir.setdefault(d, {}).setdefault(topic, []).append(
            DescribeLogDirsPartition(
                partition_index=partition, partition_size=size, offset_lag=lag, is_future_key=future
            )
        )

    for topic, partition in logs.partitions():
        if wanted is not None and (topic, partition) not in wanted:
            continue
        if ctx.metadata.topic(topic) is None:
            continue
        plog = logs.get(topic, partition)
        if plog is None:
            continue
        add(str(plog.directory.parent), topic, partition, plog.size, 0, False)
        if (future := logs.future_of(topic, partition)) is not None:
            lag = max(0, plog.log_end_offset - future.log_end_offset)
            add(str(future.directory.parent), topic, partition, future.size, lag, True)
    results = []
    for d, topics in by_dir.items():
        if Path(d) in logs.offline_dirs:
            results.append(DescribeLogDirsResult(error_code=int(ErrorCode.KAFKA_STORAGE_ERROR), log_dir=d))
            continue
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


@handles(ALTER_REPLICA_LOG_DIRS, "1-2")
async def alter_replica_log_dirs(
    ctx: RequestContext, request: Request[AlterReplicaLogDirsRequest]
) -> AlterReplicaLogDirsResponse:
    denied = access.cluster_error(ctx, access.ALTER)
    await ctx.replicas.created()
    results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for d in request.body.dirs:
        for t in d.topics:
            for p in t.partitions:
                code = int(denied or ErrorCode[ctx.replicas.mover.alter(t.name, p, d.path)])
                results.setdefault(t.name, []).append(
                    AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code)
                )
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[AlterReplicaLogDirTopicResult(topic_name=n, partitions=ps) for n, ps in results.items()],
    )
