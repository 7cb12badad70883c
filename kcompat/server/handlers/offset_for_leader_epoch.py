"""OffsetForLeaderEpoch (key 23): v2-4 (v0-1 were removed in Kafka 4, KIP-896).

Version notes:
* v2: end offset and leader_epoch of the requested epoch; current_leader_epoch in the request: lower than ours is FENCED_LEADER_EPOCH, higher
  UNKNOWN_LEADER_EPOCH; throttle_time_ms
* v3: replica_id (consumers send -1; a follower's id is accepted and answered the same way)
* v4: flexible
The answer comes from the partition's leader epoch cache: the requested epoch's end offset is the
start of the next epoch, or the log end offset for the current one; an epoch newer than any known
gets -1/-1 (UNDEFINED). Every batch kcompat writes carries the topic's constant epoch.
"""

from __future__ import annotations

from kcompat.log.errors import LogError
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.epoch_fencing import leader_error
from kcompat.server.registry import handles
from kcompat.server.replica_manager import UNTIMED_WAIT_S
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.offset_for_leader_epoch import OFFSET_FOR_LEADER_EPOCH
from kcompat.wire.protocol import Request
from kcompat.wire.types.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)


@handles(OFFSET_FOR_LEADER_EPOCH, "2-4")
async def offset_for_leader_epoch(
    ctx: RequestContext, request: Request[OffsetForLeaderEpochRequest]
) -> OffsetForLeaderEpochResponse:
    body = request.body
    # new partitions' logs, made off the event loop (no timeout in this request)
    await ctx.replicas.await_logs(
        ((rt.topic, rp.partition) for rt in body.topics for rp in rt.partitions), UNTIMED_WAIT_S
    )
    topics = []
    for rt in body.topics:
        parts = []
        for rp in rt.partitions:
            out = EpochEndOffset(error_code=0, partition=rp.partition, leader_epoch=-1, end_offset=-1)
            parts.append(out)
            if (denied := access.topic_error(ctx, access.DESCRIBE, rt.topic)) is not None:
                out.error_code = int(denied)
                continue
            t = ctx.metadata.topic(rt.topic)
            if t is None or not 0 <= rp.partition < t.partitions:
                out.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            leader, epoch = ctx.metadata.leader_and_epoch(t, rp.partition)
            if (
                refused := leader_error(rp.current_leader_epoch, leader, epoch, ctx.identity.node_id)
            ) is not None:
                out.error_code = int(refused)
                continue
            try:
                plog = ctx.replicas.partition_log(rt.topic, rp.partition)
            except LogError as e:  # still being made past the wait, or refused
                out.error_code = int(ErrorCode[e.error_name])
                continue
            out.leader_epoch, out.end_offset = plog.end_offset_for_epoch(rp.leader_epoch)
        topics.append(OffsetForLeaderTopicResult(topic=rt.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
