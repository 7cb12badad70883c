"""Committed offsets: OffsetCommit (key 8) v2-10, OffsetFetch (key 9) v1-10, OffsetDelete (key 47) v0.

Offsets live in the group coordinator and in `__consumer_offsets` (Kafka's OffsetCommit record
formats), stored before the commit is answered (group_service.py), so they survive a restart,
clean or kill -9.

OffsetCommit version notes (v0-1 were removed in Kafka 4, KIP-896):
* v2: generation_id -1 and member_id "" make a "simple" commit (an admin tool, an assign() consumer);
  retention_time_ms (-1 = offsets.retention.minutes; v2-4 only), commit_timestamp gone
* v3: throttle_time_ms;  v4: no change;  v5: retention_time_ms gone
* v6: committed_leader_epoch;  v7: group_instance_id;  v8: flexible
* v9: KIP-848: generation_id_or_member_epoch is the member epoch for consumer groups
  (STALE_MEMBER_EPOCH / FENCED_MEMBER_EPOCH); a classic group of a missing group gets GROUP_ID_NOT_FOUND
* v10: topics by topic_id instead of name (KIP-848); an unknown id gets UNKNOWN_TOPIC_ID for each
  of its partitions, and the answer names topics by id
An unknown topic or partition gets UNKNOWN_TOPIC_OR_PARTITION for that partition, as in Kafka; the
others are committed.

OffsetFetch version notes:
* v1: the group's error (if any) is on every partition (v0 was removed in Kafka 4);  v2: null topics = every committed
  partition, top-level error_code;  v3: throttle_time_ms;  v4: no change
* v5: committed_leader_epoch;  v6: flexible
* v7: require_stable: an offset pending in an open transaction (TxnOffsetCommit) is answered
  UNSTABLE_OFFSET_COMMIT for its partition; without it the last committed offset is answered
* v8: several groups per request;  v9: member_id/member_epoch (KIP-848 members are checked)
* v10: topics by topic_id (KIP-848): an unknown id gets UNKNOWN_TOPIC_ID on each requested
  partition; "every committed partition" leaves out topics that no longer exist (they have no id)
An offset never committed comes back as -1 with metadata "" and no error.

OffsetDelete version notes: v0 only. Offsets of topics the group is subscribed to get
GROUP_SUBSCRIBED_TO_TOPIC; an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from kcompat.coordinator import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetDeleteRequestTopic,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
)
from kcompat.coordinator.messages import OffsetFetchGroupResult, OffsetFetchTopicResult
from kcompat.server.auth import access, offset_acl
from kcompat.server.context import RequestContext
from kcompat.server.handlers.group_coordinator import coordinate
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.offset_commit import OFFSET_COMMIT
from kcompat.wire.messages.offset_delete import OFFSET_DELETE
from kcompat.wire.messages.offset_fetch import OFFSET_FETCH
from kcompat.wire.protocol import Request
from kcompat.wire.types import offset_commit as oc
from kcompat.wire.types import offset_delete as od
from kcompat.wire.types import offset_fetch as of

R = TypeVar("R")

TOPIC_IDS = 10  # the first OffsetCommit/OffsetFetch version that names topics by id
REQUIRE_STABLE = 7


def _commit_topic(t: oc.OffsetCommitRequestTopic) -> OffsetCommitRequestTopic:
    parts = [
        OffsetCommitRequestPartition(
            p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata
        )
        for p in t.partitions
    ]
    return OffsetCommitRequestTopic(t.name, parts)


@handles(OFFSET_COMMIT, "2-10")
async def offset_commit(
    ctx: RequestContext, request: Request[oc.OffsetCommitRequest]
) -> oc.OffsetCommitResponse:
    body = request.body
    v = request.api_version
    service = ctx.groups
    refused: list[oc.OffsetCommitResponseTopic] = []
    if access.enabled(ctx):  # READ on the group, then on each topic (KafkaApis.handleOffsetCommitRequest)
        refused = offset_acl.commit_refusals(ctx, body, by_id=v >= TOPIC_IDS)
        if not body.topics:
            return oc.OffsetCommitResponse(throttle_time_ms=0, topics=refused)
    if v >= TOPIC_IDS:
        answer = await _offset_commit_by_id(ctx, request)
        answer.topics += refused
        return answer
    topics = [_commit_topic(t) for t in body.topics]
    result = await coordinate(
        ctx,
        lambda now: service.coordinator.commit_offsets(
            now,
            group_id=body.group_id,
            topics=topics,
            generation_id_or_member_epoch=body.generation_id_or_member_epoch if v >= 1 else -1,
            member_id=body.member_id if v >= 1 else "",
            group_instance_id=body.group_instance_id,
            retention_time_ms=body.retention_time_ms if 2 <= v <= 4 else -1,
            api_version=v,
            partition_exists=service.partition_exists,
        ),
        group=body.group_id,
        refuse=lambda e: _commit_refused(topics, e),
    )
    return oc.OffsetCommitResponse(throttle_time_ms=0, topics=result + refused)


def _commit_refused(
    topics: list[OffsetCommitRequestTopic], error: ErrorCode
) -> list[oc.OffsetCommitResponseTopic]:
    """Cluster mode: this broker does not coordinate the group; every partition gets `error`."""
    return [
        oc.OffsetCommitResponseTopic(
            name=t.name,
            partitions=[
                oc.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(error))
                for p in t.partitions
            ],
        )
        for t in topics
    ]


async def _offset_commit_by_id(
    ctx: RequestContext, request: Request[oc.OffsetCommitRequest]
) -> oc.OffsetCommitResponse:
    """v10+: resolve topic ids to names first; unknown ids are answered without the coordinator."""
    body = request.body
    service = ctx.groups
    topics = ctx.metadata.topics
    assert topics is not None
    known: list[OffsetCommitRequestTopic] = []
    ids: dict[str, uuid.UUID] = {}
    unknown: list[oc.OffsetCommitResponseTopic] = []
    for t in body.topics:
        info = topics.by_id(t.topic_id)
        if info is None:
            code = int(ErrorCode.UNKNOWN_TOPIC_ID)
            unknown.append(
                oc.OffsetCommitResponseTopic(
                    topic_id=t.topic_id,
                    partitions=[
                        oc.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                        for p in t.partitions
                    ],
                )
            )
            continue
        ids[info.name] = info.topic_id
        known.append(OffsetCommitRequestTopic(info.name, _commit_topic(t).partitions))
    result = await coordinate(
        ctx,
        lambda now: service.coordinator.commit_offsets(
            now,
            group_id=body.group_id,
            topics=known,
            generation_id_or_member_epoch=body.generation_id_or_member_epoch,
            member_id=body.member_id,
            group_instance_id=body.group_instance_id,
            retention_time_ms=-1,
            api_version=request.api_version,
            partition_exists=service.partition_exists,
        ),
        group=body.group_id,
        refuse=lambda e: _commit_refused(known, e),
    )
    for answered in result:
        answered.topic_id = ids[answered.name]  # v10 answers by id (the name is not in its layout)
    return oc.OffsetCommitResponse(throttle_time_ms=0, topics=result + unknown)


def _topics(
    topics: list[of.OffsetFetchRequestTopic] | list[of.OffsetFetchRequestTopics] | None,
) -> list[OffsetFetchRequestTopic] | None:
    if topics is None:
        return None
    return [OffsetFetchRequestTopic(t.name, list(t.partition_indexes)) for t in topics]


def _partitions(
    t: OffsetFetchTopicResult, row: Callable[..., R], ctx: RequestContext | None = None, group_id: str = ""
) -> list[R]:
    """The partition rows of the v0-7 (OffsetFetchResponsePartition) or v8+ (...Partitions) layout;
    with `ctx` (require_stable), offsets pending in a transaction are UNSTABLE_OFFSET_COMMIT (KIP-447:
    the consumer retries until the transaction ends)."""
    pending = ctx.groups.coordinator.txn_offsets.has_pending if ctx is not None else None
    out = []
    for p in t.partitions:
        if pending is not None and pending(group_id, t.name, p.partition_index):
            out.append(
                row(
                    partition_index=p.partition_index,
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    metadata="",
                    error_code=int(ErrorCode.UNSTABLE_OFFSET_COMMIT),
                )
            )
            continue
        out.append(
            row(
                partition_index=p.partition_index,
                committed_offset=p.committed_offset,
                committed_leader_epoch=p.committed_leader_epoch,
                metadata=p.metadata,
                error_code=int(p.error_code),
            )
        )
    return out


async def _fetch_offsets(
    ctx: RequestContext, wanted: list[OffsetFetchRequestGroup]
) -> list[OffsetFetchGroupResult]:
    """The committed offsets of `wanted`; in cluster mode a group this broker does not coordinate
    gets NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS), and only replicated offsets are shown."""
    coordinator = ctx.groups.coordinator
    if ctx.groups.shards.coordinates_all:  # a single node coordinates every group
        return await coordinate(ctx, lambda now: coordinator.fetch_offsets(now, wanted), creates=False)
    if len(wanted) == 1:  # the usual case: one group, refused as a whole
        g = wanted[0]
        return await coordinate(
            ctx,
            lambda now: coordinator.fetch_offsets(now, wanted),
            creates=False,
            group=g.group_id,
            committed=True,
            refuse=lambda e: [OffsetFetchGroupResult(g.group_id, [], int(e))],
        )
    out = []
    for g in wanted:
        out.extend(await _fetch_offsets(ctx, [g]))
    return out


@handles(OFFSET_FETCH, "1-10")
async def offset_fetch(
    ctx: RequestContext, request: Request[of.OffsetFetchRequest]
) -> of.OffsetFetchResponse:
    if access.enabled(ctx):  # DESCRIBE on the group (first, as KafkaApis) and on each topic
        if request.api_version < 8 and (
            denied := access.group_error(ctx, access.DESCRIBE, request.body.group_id)
        ):
            return _group_error(request, int(denied))
        answer = await _offset_fetch(ctx, request)
        offset_acl.filter_fetched(ctx, request, answer)
        return answer
    return await _offset_fetch(ctx, request)


def _group_error(request: Request[of.OffsetFetchRequest], code: int) -> of.OffsetFetchResponse:
    """The single group's error (v1-7): at the top level from v2; v1 has no top-level error code, so
    every requested partition carries it (OffsetFetchRequest.getErrorResponse's shape)."""
    topics = []
    if request.api_version < 2:
        topics = [
            of.OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    of.OffsetFetchResponsePartition(
                        partition_index=p, committed_offset=-1, metadata="", error_code=code
                    )
                    for p in t.partition_indexes
                ],
            )
            for t in request.body.topics or []
        ]
    return of.OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=topics)


async def _offset_fetch(
    ctx: RequestContext, request: Request[of.OffsetFetchRequest]
) -> of.OffsetFetchResponse:
    body = request.body
    v = request.api_version
    stable = ctx if v >= REQUIRE_STABLE and body.require_stable else None
    if v >= TOPIC_IDS:
        return await _offset_fetch_by_id(ctx, request)
    if v >= 8:
        wanted = [
            OffsetFetchRequestGroup(g.group_id, _topics(g.topics), g.member_id, g.member_epoch)
            for g in body.groups
        ]
        groups = await _fetch_offsets(ctx, wanted)
        return of.OffsetFetchResponse(
            throttle_time_ms=0,
            groups=[
                of.OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=int(g.error_code),
                    topics=[
                        of.OffsetFetchResponseTopics(
                            name=t.name,
                            partitions=_partitions(t, of.OffsetFetchResponsePartitions, stable, g.group_id),
                        )
                        for t in g.topics
                    ],
                )
                for g in groups
            ],
        )
    one = OffsetFetchRequestGroup(body.group_id, _topics(body.topics))
    got = (await _fetch_offsets(ctx, [one]))[0]
    topics = [
        of.OffsetFetchResponseTopic(
            name=t.name, partitions=_partitions(t, of.OffsetFetchResponsePartition, stable, body.group_id)
        )
        for t in got.topics
    ]
    if v < 2 and got.error_code != ErrorCode.NONE:
        return _group_error(request, int(got.error_code))
    return of.OffsetFetchResponse(throttle_time_ms=0, error_code=int(got.error_code), topics=topics)


async def _offset_fetch_by_id(
    ctx: RequestContext, request: Request[of.OffsetFetchRequest]
) -> of.OffsetFetchResponse:
    """v10+: topics by id in and out; unknown ids get UNKNOWN_TOPIC_ID without asking the coordinator."""
    stable = ctx if request.body.require_stable else None
    topics = ctx.metadata.topics
    assert topics is not None
    wanted: list[OffsetFetchRequestGroup] = []
    unknown: dict[str, list[of.OffsetFetchResponseTopics]] = {}
    for rg in request.body.groups:
        if rg.topics is None:
            wanted.append(OffsetFetchRequestGroup(rg.group_id, None, rg.member_id, rg.member_epoch))
            continue
        named = []
        for rt in rg.topics:
            info = topics.by_id(rt.topic_id)
            if info is None:
                code = int(ErrorCode.UNKNOWN_TOPIC_ID)
                unknown.setdefault(rg.group_id, []).append(
                    of.OffsetFetchResponseTopics(
                        topic_id=rt.topic_id,
                        partitions=[
                            of.OffsetFetchResponsePartitions(
                                partition_index=p,
                                committed_offset=-1,
                                committed_leader_epoch=-1,
                                metadata="",
                                error_code=code,
                            )
                            for p in rt.partition_indexes
                        ],
                    )
                )
            else:
                named.append(OffsetFetchRequestTopic(info.name, list(rt.partition_indexes)))
        wanted.append(OffsetFetchRequestGroup(rg.group_id, named, rg.member_id, rg.member_epoch))
    groups = await _fetch_offsets(ctx, wanted)
    out = []
    for g in groups:
        answered = []
        for t in g.topics:
            info = topics.get(t.name)
            if info is not None:  # a committed topic deleted since has no id to answer with
                answered.append(
                    of.OffsetFetchResponseTopics(
                        topic_id=info.topic_id,
                        partitions=_partitions(t, of.OffsetFetchResponsePartitions, stable, g.group_id),
                    )
                )
        out.append(
            of.OffsetFetchResponseGroup(
                group_id=g.group_id,
                error_code=int(g.error_code),
                topics=answered + unknown.get(g.group_id, []),
            )
        )
    return of.OffsetFetchResponse(throttle_time_ms=0, groups=out)


@handles(OFFSET_DELETE, "0-0")
async def offset_delete(
    ctx: RequestContext, request: Request[od.OffsetDeleteRequest]
) -> od.OffsetDeleteResponse:
    body = request.body
    if (denied := access.group_error(ctx, access.DELETE, body.group_id)) is not None:
        return od.OffsetDeleteResponse(error_code=int(denied), throttle_time_ms=0, topics=[])
    known = [
        OffsetDeleteRequestTopic(t.name, [p.partition_index for p in t.partitions])
        for t in body.topics
        if ctx.metadata.topic(t.name) is not None
    ]
    resp = await coordinate(
        ctx,
        lambda now: ctx.groups.coordinator.delete_offsets(
            now,
            group_id=body.group_id,
            topics=known,
        ),
        creates=False,
        group=body.group_id,
        refuse=lambda e: od.OffsetDeleteResponse(error_code=int(e)),
    )
    if resp.error_code != ErrorCode.NONE:
        return od.OffsetDeleteResponse(error_code=int(resp.error_code), throttle_time_ms=0, topics=[])
    answered = {t.name: t for t in resp.topics}
    unknown = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    topics = [
        answered.get(t.name)
        or od.OffsetDeleteResponseTopic(
            name=t.name,
            partitions=[
                od.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=unknown)
                for p in t.partitions
            ],
        )
        for t in body.topics
    ]
    return od.OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=topics)
