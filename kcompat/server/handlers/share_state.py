"""The share coordinator's inter-broker APIs: a share-partition leader (kcompat's or an Apache Kafka
4.3 broker's) keeps its share-partitions' state in `__share_group_state` through them.

    InitializeShareGroupState (83) v0   ReadShareGroupState (84) v0   WriteShareGroupState (85) v0-1
    DeleteShareGroupState (86) v0       ReadShareGroupStateSummary (87) v0-1

Version notes: Write v1 adds DeliveryCompleteCount (-1 in v0: unchanged); ReadSummary v1 answers it.
Every partition is one call of the share coordinator, answered once its records are stored
(replicated, in cluster mode). Errors are per partition: CLUSTER_AUTHORIZATION_FAILED without
CLUSTER_ACTION (a broker's right), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS where this broker
does not serve the share-partition's state partition (now), and the coordinator's own
(FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST: also a
Read or Write of a share-partition not initialized). A request without a group id gets no results.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from kcompat.coordinator.share_coordinator import ShareKey, ShareResult, StateBatch
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.delete_share_group_state import DELETE_SHARE_GROUP_STATE
from kcompat.wire.messages.initialize_share_group_state import INITIALIZE_SHARE_GROUP_STATE
from kcompat.wire.messages.read_share_group_state import READ_SHARE_GROUP_STATE
from kcompat.wire.messages.read_share_group_state_summary import READ_SHARE_GROUP_STATE_SUMMARY
from kcompat.wire.messages.write_share_group_state import WRITE_SHARE_GROUP_STATE
from kcompat.wire.protocol import Request
from kcompat.wire.types import delete_share_group_state as dl
from kcompat.wire.types import initialize_share_group_state as ini
from kcompat.wire.types import read_share_group_state as rd
from kcompat.wire.types import read_share_group_state_summary as sm
from kcompat.wire.types import write_share_group_state as wr


class _Partition(Protocol):
    @property
    def partition(self) -> int: ...


P = TypeVar("P", bound=_Partition)


async def _each(
    ctx: RequestContext,
    group_id: str,
    topics: list[tuple[uuid.UUID, list[P]]],
    call: Callable[[ShareKey, P], Awaitable[ShareResult]],
) -> list[tuple[uuid.UUID, list[tuple[int, ShareResult]]]]:
    """Every (topic, partition) of the request, in its order, with the coordinator's answer; none
    at all without a group id (Kafka 4.3's share coordinator answers so)."""
    if not group_id:
        return []
    denied = access.cluster_error(ctx, access.CLUSTER_ACTION)
    out = []
    for topic_id, partitions in topics:
        results = []
        for d in partitions:
            if denied is not None:
                r = ShareResult(error=denied)
            else:
                r = await call(ShareKey(group_id, topic_id, d.partition), d)
            results.append((d.partition, r))
        out.append((topic_id, results))
    return out


def _message(r: ShareResult) -> str | None:
    return r.message if r.error != ErrorCode.NONE else None


@handles(INITIALIZE_SHARE_GROUP_STATE, "0-0")
async def initialize_share_group_state(
    ctx: RequestContext, request: Request[ini.InitializeShareGroupStateRequest]
) -> ini.InitializeShareGroupStateResponse:
    body = request.body
    svc = ctx.share_coordinator
    done = await _each(
        ctx,
        body.group_id,
        [(t.topic_id, t.partitions) for t in body.topics],
        lambda key, d: svc.run(
            key, lambda shard, now: shard.initialize(now, key, d.state_epoch, d.start_offset)
        ),
    )
    return ini.InitializeShareGroupStateResponse(
        results=[
            ini.InitializeStateResult(
                topic_id=topic_id,
                partitions=[
                    ini.PartitionResult(partition=p, error_code=int(r.error), error_message=_message(r))
                    for p, r in results
                ],
            )
            for topic_id, results in done
        ]
    )


@handles(READ_SHARE_GROUP_STATE, "0-0")
async def read_share_group_state(
    ctx: RequestContext, request: Request[rd.ReadShareGroupStateRequest]
) -> rd.ReadShareGroupStateResponse:
    body = request.body
    svc = ctx.share_coordinator
    done = await _each(
        ctx,
        body.group_id,
        [(t.topic_id, t.partitions) for t in body.topics],
        lambda key, d: svc.run(key, lambda shard, now: shard.read(now, key, d.leader_epoch)),
    )
    return rd.ReadShareGroupStateResponse(
        results=[
            rd.ReadStateResult(topic_id=topic_id, partitions=[_read_result(p, r) for p, r in results])
            for topic_id, results in done
        ]
    )


def _read_result(p: int, r: ShareResult) -> rd.PartitionResult:
    s = r.state
    if r.error != ErrorCode.NONE or s is None:
        return rd.PartitionResult(
            partition=p, error_code=int(r.error), error_message=_message(r), state_epoch=0, start_offset=-1
        )
    return rd.PartitionResult(
        partition=p,
        error_code=0,
        state_epoch=s.state_epoch,
        start_offset=s.start_offset,
        state_batches=[
            rd.StateBatch(
                first_offset=b.first_offset,
                last_offset=b.last_offset,
                delivery_state=b.delivery_state,
                delivery_count=b.delivery_count,
            )
            for b in s.batches
        ],
    )


@handles(WRITE_SHARE_GROUP_STATE, "0-1")
async def write_share_group_state(
    ctx: RequestContext, request: Request[wr.WriteShareGroupStateRequest]
) -> wr.WriteShareGroupStateResponse:
    body = request.body
    svc = ctx.share_coordinator

    def write(key: ShareKey, d: wr.PartitionData) -> Awaitable[ShareResult]:
        batches = [
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in d.state_batches
        ]
        return svc.run(
            key,
            lambda shard, now: shard.write(
                now,
                key,
                state_epoch=d.state_epoch,
                leader_epoch=d.leader_epoch,
                start_offset=d.start_offset,
                delivery_complete_count=d.delivery_complete_count,
                batches=batches,
            ),
        )

    done = await _each(ctx, body.group_id, [(t.topic_id, t.partitions) for t in body.topics], write)
    return wr.WriteShareGroupStateResponse(
        results=[
            wr.WriteStateResult(
                topic_id=topic_id,
                partitions=[
                    wr.PartitionResult(partition=p, error_code=int(r.error), error_message=_message(r))
                    for p, r in results
                ],
            )
            for topic_id, results in done
        ]
    )


@handles(DELETE_SHARE_GROUP_STATE, "0-0")
async def delete_share_group_state(
    ctx: RequestContext, request: Request[dl.DeleteShareGroupStateRequest]
) -> dl.DeleteShareGroupStateResponse:
    body = request.body
    svc = ctx.share_coordinator
    done = await _each(
        ctx,
        body.group_id,
        [(t.topic_id, t.partitions) for t in body.topics],
        lambda key, d: svc.run(key, lambda shard, now: shard.delete(key)),
    )
    return dl.DeleteShareGroupStateResponse(
        results=[
            dl.DeleteStateResult(
                topic_id=topic_id,
                partitions=[
                    dl.PartitionResult(partition=p, error_code=int(r.error), error_message=_message(r))
                    for p, r in results
                ],
            )
            for topic_id, results in done
        ]
    )


@handles(READ_SHARE_GROUP_STATE_SUMMARY, "0-1")
async def read_share_group_state_summary(
    ctx: RequestContext, request: Request[sm.ReadShareGroupStateSummaryRequest]
) -> sm.ReadShareGroupStateSummaryResponse:
    body = request.body
    svc = ctx.share_coordinator
    done = await _each(
        ctx,
        body.group_id,
        [(t.topic_id, t.partitions) for t in body.topics],
        lambda key, d: svc.run(key, lambda shard, now: shard.summary(key), creates=False),
    )
    return sm.ReadShareGroupStateSummaryResponse(
        results=[
            sm.ReadStateSummaryResult(
                topic_id=topic_id, partitions=[_summary_result(p, r) for p, r in results]
            )
            for topic_id, results in done
        ]
    )


def _summary_result(p: int, r: ShareResult) -> sm.PartitionResult:
    s = r.state
    if r.error != ErrorCode.NONE or s is None:
        return sm.PartitionResult(
            partition=p,
            error_code=int(r.error),
            error_message=_message(r),
            state_epoch=0,
            leader_epoch=0,  # as Kafka answers for a share-partition not initialized
            start_offset=-1,
        )
    return sm.PartitionResult(
        partition=p,
        error_code=0,
        state_epoch=s.state_epoch,
        leader_epoch=s.leader_epoch,
        start_offset=s.start_offset,
        delivery_complete_count=s.delivery_complete_count,
    )
