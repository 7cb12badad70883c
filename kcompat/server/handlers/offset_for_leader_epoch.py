"""OffsetForLeaderEpoch (key 23): v0-4.

Version notes:
* v0: end offset of the requested epoch
* v1: leader_epoch in the response
* v2: current_leader_epoch in the request: lower than ours is FENCED_LEADER_EPOCH, higher
  UNKNOWN_LEADER_EPOCH; throttle_time_ms
* v3: replica_id (consumers send -1; a follower's id is accepted and answered the same way)
* v4: flexible
The answer comes from the partition's leader epoch cache: the requested epoch's end offset is the
start of the next epoch, or the log end offset for the current one; an epoch newer than any known
gets -1/-1 (UNDEFINED). Every batch kcompat writes carries the topic's constant epoch.
"""

from __future__ import annotations

from kcompat.server.broker import RequestContext
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.offset_for_leader_epoch import OFFSET_FOR_LEADER_EPOCH
from kcompat.wire.protocol import Request
from kcompat.wire.types.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)


@handles(OFFSET_FOR_LEADER_EPOCH, "0-4")
async def offset_for_leader_epoch(
    ctx: RequestContext, request: Request[OffsetForLeaderEpochRequest]
) -> OffsetForLeaderEpochResponse:
    broker = ctx.broker
    topics = []
    for rt in request.body.topics:
        parts = []
        for rp in rt.partitions:
            out = EpochEndOffset(error_code=0, partition=rp.partition, leader_epoch=-1, end_offset=-1)
            parts.append(out)
            t = broker.topic(rt.topic)
            if t is None or not 0 <= rp.partition < t.partitions:
                out.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            if rp.current_leader_epoch >= 0 and rp.current_leader_epoch != t.leader_epoch:
                stale = rp.current_leader_epoch < t.leader_epoch
                out.error_code = int(ErrorCode.FENCED_LEADER_EPOCH if stale else ErrorCode.UNKNOWN_LEADER_EPOCH)
                continue
            plog = broker.partition_log(rt.topic, rp.partition)
            out.leader_epoch, out.end_offset = plog.end_offset_for_epoch(rp.leader_epoch)
        topics.append(OffsetForLeaderTopicResult(topic=rt.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
