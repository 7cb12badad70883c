"""Share groups (KIP-932), resetting where a group reads: AlterShareGroupOffsets (key 91) v0 and
DeleteShareGroupOffsets (92) v0, as `kafka-share-groups --reset-offsets / --delete-offsets` use them.

Both need the group to have no members (NON_EMPTY_GROUP otherwise), as in Kafka. Alter sets each
named share-partition's start offset afresh (the persister's state is initialized again with the
next state epoch: what was in flight is forgotten); an unknown group is created, so that offsets can
be set before its consumers start. Delete forgets the topics' share-partition state: the next fetch
starts at share.auto.offset.reset again.
"""

from __future__ import annotations

from kcompat.kafka_uuid import ZERO_UUID
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.server.share.persister import SharePartitionKey
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_share_group_offsets import ALTER_SHARE_GROUP_OFFSETS
from kcompat.wire.messages.delete_share_group_offsets import DELETE_SHARE_GROUP_OFFSETS
from kcompat.wire.protocol import Request
from kcompat.wire.types import alter_share_group_offsets as asgo
from kcompat.wire.types import delete_share_group_offsets as dsgo


def _group_error(ctx: RequestContext, group_id: str, create: bool) -> ErrorCode | None:
    if (denied := access.group_error(ctx, access.READ, group_id)) is not None:
        return denied
    if (elsewhere := ctx.groups.shards.error(group_id)) != ErrorCode.NONE:
        return elsewhere  # cluster mode: the leader of the group's __consumer_offsets partition
    if group_id in ctx.groups.coordinator.groups:
        return ErrorCode.GROUP_ID_NOT_FOUND  # a classic or consumer group
    g = ctx.share.groups.get_or_create(group_id) if create else ctx.share.group(group_id)
    if g is None:
        return ErrorCode.GROUP_ID_NOT_FOUND
    return ErrorCode.NON_EMPTY_GROUP if g.members else None


@handles(ALTER_SHARE_GROUP_OFFSETS, "0-0")
async def alter_share_group_offsets(
    ctx: RequestContext, request: Request[asgo.AlterShareGroupOffsetsRequest]
) -> asgo.AlterShareGroupOffsetsResponse:
    body = request.body
    if (err := _group_error(ctx, body.group_id, create=True)) is not None:
        return asgo.AlterShareGroupOffsetsResponse(error_code=int(err))
    manager = ctx.share.partitions
    responses = []
    for rt in body.topics:
        t = ctx.metadata.topic(rt.topic_name)
        denied = access.topic_error(ctx, access.READ, rt.topic_name) if t is not None else None
        parts = []
        done: set[int] = set()
        for rp in rt.partitions:
            row = asgo.AlterShareGroupOffsetsResponsePartition(partition_index=rp.partition_index)
            parts.append(row)
            if t is None or not 0 <= rp.partition_index < t.partitions:
                row.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            if denied is not None:
                row.error_code = int(denied)
                continue
            key = SharePartitionKey(body.group_id, t.topic_id.bytes, rp.partition_index)
            summary = await manager.persister.read_summary(key, -1)
            epoch = summary.state_epoch + 1 if summary.error_code == ErrorCode.NONE else 0
            row.error_code = int(
                await manager.persister.initialize_state(key, epoch, max(rp.start_offset, 0))
            )
            manager.drop((body.group_id, t.topic_id, rp.partition_index))
            if row.error_code == ErrorCode.NONE:
                done.add(rp.partition_index)
        if t is not None and done:
            await ctx.share.offsets_set(body.group_id, t.topic_id, t.name, done)
        responses.append(
            asgo.AlterShareGroupOffsetsResponseTopic(
                topic_name=rt.topic_name,
                topic_id=t.topic_id if t is not None else ZERO_UUID,
                partitions=parts,
            )
        )
    return asgo.AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0, responses=responses)


@handles(DELETE_SHARE_GROUP_OFFSETS, "0-0")
async def delete_share_group_offsets(
    ctx: RequestContext, request: Request[dsgo.DeleteShareGroupOffsetsRequest]
) -> dsgo.DeleteShareGroupOffsetsResponse:
    body = request.body
    if (err := _group_error(ctx, body.group_id, create=False)) is not None:
        return dsgo.DeleteShareGroupOffsetsResponse(error_code=int(err))
    manager = ctx.share.partitions
    responses = []
    for rt in body.topics:
        t = ctx.metadata.topic(rt.topic_name)
        row = dsgo.DeleteShareGroupOffsetsResponseTopic(topic_name=rt.topic_name)
        responses.append(row)
        if t is None:
            row.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            continue
        if (denied := access.topic_error(ctx, access.READ, rt.topic_name)) is not None:
            row.error_code = int(denied)
            continue
        row.topic_id = t.topic_id
        for p in range(t.partitions):
            code = await manager.persister.delete_state(SharePartitionKey(body.group_id, t.topic_id.bytes, p))
            if code != ErrorCode.NONE:
                row.error_code = code
            manager.drop((body.group_id, t.topic_id, p))
        if row.error_code == ErrorCode.NONE:  # initialized again when a member is assigned the topic
            await ctx.share.offsets_set(body.group_id, t.topic_id, t.name, None)
    return dsgo.DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0, responses=responses)
