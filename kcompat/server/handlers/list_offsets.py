"""ListOffsets (key 2): v1-11.

Version notes:
* v0: not advertised (old_style_offsets; Kafka 4 dropped it too)
* v1: one offset and its timestamp per partition; a timestamp with no record at or after it gets
  offset -1, timestamp -1 (Spark then applies its own strategy)
* v2: isolation_level: LATEST under read_committed (1) is the last stable offset (the first
  offset of the oldest open transaction), under read_uncommitted the high watermark
* v3: no change;  v4: current_leader_epoch in (fencing as Fetch), leader_epoch out
* v5: no change;  v6: flexible
* v7: -3 MAX_TIMESTAMP: the record with the largest timestamp (-1/-1 for an empty log)
* v8: -4 EARLIEST_LOCAL_TIMESTAMP: the log start offset (no tiered storage: all of it is local)
* v9: -5 LATEST_TIERED_TIMESTAMP: offset -1 (nothing is tiered), as Kafka answers without remote storage
* v10: timeout_ms (nothing to wait for: one replica)
* v11: -6 EARLIEST_PENDING_UPLOAD_TIMESTAMP (KIP-1023): offset -1 (no remote storage), as Kafka
A sentinel newer than the request's version (-3 below v7, -4 below v8, -5 below v9, -6 below v11)
gets UNSUPPORTED_VERSION for its partition, as Kafka's ReplicaManager answers.
A partition named twice in one request gets INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

from collections import Counter

from kcompat.log.errors import LogError
from kcompat.server import access
from kcompat.server.broker import RequestContext
from kcompat.server.epoch_fencing import leader_error
from kcompat.server.registry import handles
from kcompat.server.replica_manager import UNTIMED_WAIT_S
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.list_offsets import LIST_OFFSETS
from kcompat.wire.protocol import Request
from kcompat.wire.types.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
TIMEOUT_VERSION = 10
# The first version that carries each newer sentinel.
SENTINEL_MIN_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}


@handles(LIST_OFFSETS, "1-11")
async def list_offsets(ctx: RequestContext, request: Request[ListOffsetsRequest]) -> ListOffsetsResponse:
    body = request.body
    counts = Counter((t.name, p.partition_index) for t in body.topics for p in t.partitions)
    timeout_s = body.timeout_ms / 1000 if request.api_version >= TIMEOUT_VERSION else UNTIMED_WAIT_S
    await ctx.replicas.await_logs(counts, timeout_s)  # new partitions' logs, made off the event loop
    topics = []
    for rt in body.topics:
        parts = []
        for rp in rt.partitions:
            out = ListOffsetsPartitionResponse(
                partition_index=rp.partition_index, error_code=0, timestamp=-1, offset=-1, leader_epoch=-1
            )
            parts.append(out)
            if counts[(rt.name, rp.partition_index)] > 1:
                out.error_code = int(ErrorCode.INVALID_REQUEST)
                continue
            if request.api_version < SENTINEL_MIN_VERSION.get(rp.timestamp, 0):
                out.error_code = int(ErrorCode.UNSUPPORTED_VERSION)
                continue
            error = _lookup(ctx, rt.name, rp, out, body.isolation_level == 1)
            if error is not None:
                out.error_code = int(error)
        topics.append(ListOffsetsTopicResponse(name=rt.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _lookup(
    ctx: RequestContext,
    topic: str,
    rp: ListOffsetsPartition,
    out: ListOffsetsPartitionResponse,
    committed: bool,
) -> ErrorCode | None:
    if (denied := access.topic_error(ctx, access.DESCRIBE, topic)) is not None:
        return denied
    t = ctx.metadata.topic(topic)
    if t is None or not 0 <= rp.partition_index < t.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    leader, epoch = ctx.metadata.leader_and_epoch(t, rp.partition_index)
    if (refused := leader_error(rp.current_leader_epoch, leader, epoch, ctx.broker.node_id)) is not None:
        return refused
    try:
        plog = ctx.replicas.partition_log(topic, rp.partition_index)
    except LogError as e:  # still being made past the timeout, or refused (KAFKA_STORAGE_ERROR)
        return ErrorCode[e.error_name]
    ts = rp.timestamp
    if ts == LATEST:
        out.offset, out.leader_epoch = plog.last_stable_offset if committed else plog.high_watermark, epoch
    elif ts in (EARLIEST, EARLIEST_LOCAL):
        out.offset, out.leader_epoch = plog.log_start_offset, epoch
    elif ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        out.offset, out.leader_epoch = -1, -1
    elif ts == MAX_TIMESTAMP:
        offset, max_ts = plog.max_timestamp_offset()
        if offset >= 0:
            out.offset, out.timestamp, out.leader_epoch = offset, max_ts, epoch
    elif ts < 0:
        return ErrorCode.INVALID_REQUEST
    else:
        found = plog.offset_for_timestamp(ts)
        if found is not None:
            offset, found_ts = found
            out.offset, out.timestamp, out.leader_epoch = offset, found_ts, epoch
    return None
