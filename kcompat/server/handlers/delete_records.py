"""DeleteRecords (key 21): v0-2.

Version notes:
* v0: move each partition's log start offset up to the given offset (-1: the high watermark);
  whole segments below it are deleted, and ListOffsets earliest / Fetch log_start_offset follow
* v1: no change
* v2: flexible
An offset above the high watermark gets OFFSET_OUT_OF_RANGE; one below the current log start
offset leaves it where it is (the answer carries the current low watermark), as in Kafka.
"""

from __future__ import annotations

from kcompat.log.errors import LogError
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.errors import ApiError
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.delete_records import DELETE_RECORDS
from kcompat.wire.protocol import Request
from kcompat.wire.types.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)


@handles(DELETE_RECORDS, "0-2")
async def delete_records(
    ctx: RequestContext, request: Request[DeleteRecordsRequest]
) -> DeleteRecordsResponse:
    body = request.body
    await ctx.replicas.await_logs(
        ((rt.name, rp.partition_index) for rt in body.topics for rp in rt.partitions),
        max(body.timeout_ms, 0) / 1000,
    )  # new partitions' logs, off the event loop
    topics = []
    for rt in body.topics:
        parts = []
        for rp in rt.partitions:
            out = DeleteRecordsPartitionResult(
                partition_index=rp.partition_index, low_watermark=-1, error_code=0
            )
            parts.append(out)
            if (denied := access.topic_error(ctx, access.DELETE, rt.name)) is not None:
                out.error_code = int(denied)
                continue
            t = ctx.metadata.topic(rt.name)
            if t is None or not 0 <= rp.partition_index < t.partitions:
                out.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            if rp.offset < -1:
                out.error_code = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                continue
            try:
                out.low_watermark = ctx.replicas.delete_records(rt.name, rp.partition_index, rp.offset)
            except LogError as e:
                out.error_code = int(ApiError.from_log(e).error)
                continue
        topics.append(DeleteRecordsTopicResult(name=rt.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
