"""Metadata (key 3): v0-13.  DescribeTopicPartitions (key 75): v0.

Metadata version notes:
* v0: topics = [] means all topics; auto-creation always allowed by the request
* v1: topics = null means all (and [] none); controller_id, is_internal, rack
* v2: cluster_id
* v3: throttle_time_ms
* v4: allow_auto_topic_creation
* v5: offline_replicas (empty on a single node; in cluster mode replicas on brokers that are not live)
* v6: no change
* v7: leader_epoch per partition (constant per partition, never decreasing, see storage/topic_store.py)
* v8: authorized operations, INT32_MIN unless asked for; when asked, what the ACLs allow (all
  without an authorizer)
* v9: flexible
* v10: topic ids, in the response and as an alternative to names in the request
* v11: cluster authorized operations removed
* v12: topic name nullable in the response (answer for an unknown topic id)
* v13: top-level error_code: always 0
With an authorizer (KafkaApis.handleTopicMetadataRequest): listing all topics lists those the
principal may DESCRIBE; a named topic it may not describe is TOPIC_AUTHORIZATION_FAILED (an id:
UNKNOWN_TOPIC_ID, so that ids do not reveal names); auto-creation needs CREATE on the cluster or
the topic, else TOPIC_AUTHORIZATION_FAILED.

Auto-creation (Kafka's rule): only when auto.create.topics.enable is on, the request allows it
(always before v4), the request names topics (never for "all topics"), and the name is valid.
The new topic is answered with its partitions at once rather than LEADER_NOT_AVAILABLE (trap 15:
both work with every client, and the direct answer saves a round trip).
"""

from __future__ import annotations

import uuid
import weakref
from typing import cast

from kcompat.kafka_uuid import ZERO_UUID
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.dispatcher import CloseConnection
from kcompat.server.errors import ApiError
from kcompat.server.metadata_view import BrokerEndpoint, PartitionDescription
from kcompat.server.registry import handles
from kcompat.storage.topic_store import TopicInfo
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.describe_topic_partitions import DESCRIBE_TOPIC_PARTITIONS
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.protocol import Request, response_codec
from kcompat.wire.structs import Struct
from kcompat.wire.types.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from kcompat.wire.types.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# Without ACLs every operation is allowed: Kafka's AclOperation codes as bits.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # READ..ALTER_CONFIGS
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # CREATE..IDEMPOTENT_WRITE


def partitions_of(
    ctx: RequestContext, t: TopicInfo, indexes: range | None = None
) -> list[MetadataResponsePartition]:
    """Each partition's leader, epoch, replicas and ISR, as Metadata and DescribeTopicPartitions give them
    (from the MetadataView: this node for everything on a single node, the KRaft image in a cluster)."""
    view = ctx.metadata
    listener = ctx.listener
    every = range(t.partitions) if indexes is None else indexes  # an empty range is a page of none
    return [_row(p, view.describe_partition(t, p, listener)) for p in every]


# Per MetadataView, per (topic, listener): the stamp the entries were made under (the topic's id
# and partitions_stamp) and the topic's entries already encoded, by (api key, api version,
# authorized operations). A Python call per partition to build and encode them was most of a
# Metadata for all topics at thousands of partitions: the encoded bytes are spliced in instead,
# and only they are kept (a few bytes per partition, no object per partition).
_Encoded = dict[tuple[int, int, int], Struct]
_CACHE: weakref.WeakKeyDictionary[object, dict[tuple[str, str], tuple[object, _Encoded]]] = (
    weakref.WeakKeyDictionary()
)


def _encoded(ctx: RequestContext, t: TopicInfo) -> _Encoded:
    view = ctx.metadata
    stamp = (t.topic_id, view.partitions_stamp(t))
    by_topic = _CACHE.get(view)
    if by_topic is None:
        by_topic = _CACHE[view] = {}
    key = (t.name, ctx.listener)
    entry = by_topic.get(key)
    if entry is None or entry[0] != stamp:
        if len(by_topic) > 2 * len(view.topics) + 64:  # deleted topics' entries: dropped wholesale
            by_topic.clear()
        entry = by_topic[key] = (stamp, {})
    elif len(entry[1]) >= 16:  # principals with many distinct operation sets: keep it bounded
        entry[1].clear()
    return entry[1]


def described_topic(ctx: RequestContext, t: TopicInfo, version: int, ops: int) -> MetadataResponseTopic:
    """Topic t's Metadata entry for an answer of `version`, encoded once per stamp, version and
    authorized operations (what the principal may do is decided per request, by the caller)."""
    encoded = _encoded(ctx, t)
    key = (METADATA.key, version, ops)
    hit = encoded.get(key)
    if hit is None:
        topic = MetadataResponseTopic(
            error_code=0,
            name=t.name,
            topic_id=t.topic_id,
            is_internal=t.internal,
            partitions=partitions_of(ctx, t),
            topic_authorized_operations=ops,
        )
        hit = encoded[key] = response_codec(METADATA.key).pre_encode(topic, version)
    return cast(MetadataResponseTopic, hit)  # stored as pre_encode typed it


def _row(p: int, d: PartitionDescription) -> MetadataResponsePartition:
    return MetadataResponsePartition(
        error_code=d.error_code,
        partition_index=p,
        leader_id=d.leader,
        leader_epoch=d.leader_epoch,
        replica_nodes=d.replicas,
        isr_nodes=d.isr,
        offline_replicas=d.offline,
    )


def brokers_of(ctx: RequestContext) -> tuple[list[BrokerEndpoint], int]:
    """The brokers a client may use (on the listener its request came in on) and the controller id to name."""
    identity = ctx.identity
    listener = ctx.listener
    brokers = ctx.metadata.live_brokers(listener)
    if brokers is None:  # single node: this broker, as its listener advertises it
        host, port = ctx.endpoint
        return [BrokerEndpoint(identity.node_id, host, port, identity.rack)], identity.node_id
    controller = ctx.metadata.controller_id(listener)
    return brokers, identity.node_id if controller is None else controller


def unknown_topic(
    name: str | None, error: ErrorCode, topic_id: uuid.UUID = ZERO_UUID
) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=int(error), name=name, topic_id=topic_id, is_internal=False, partitions=[]
    )


@handles(METADATA, "0-13")
async def metadata(ctx: RequestContext, request: Request[MetadataRequest]) -> MetadataResponse:
    body = request.body
    v = request.api_version
    topics = ctx.metadata.topics
    assert topics is not None
    all_topics = body.topics is None or (v == 0 and not body.topics)
    allow_auto = (
        ctx.metadata.auto_create_topics and (v < 4 or body.allow_auto_topic_creation) and not all_topics
    )
    ops = TOPIC_OPERATIONS if body.include_topic_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    secured = access.enabled(ctx)

    def described(t: TopicInfo) -> MetadataResponseTopic:
        return described_topic(ctx, t, v, access.topic_operations(ctx, t.name, ops) if secured else ops)

    out: list[MetadataResponseTopic] = []
    if all_topics:
        out = [
            described(t)
            for t in topics.all()
            if access.allowed(ctx, access.DESCRIBE, access.TOPIC, t.name, quiet=True)
        ]
    else:
        seen: set[str | uuid.UUID] = set()
        for rt in body.topics or ():
            if rt.name is None:
                if v < 12:  # topic ids came with v12; below it Kafka refuses a null name (InvalidRequest)
                    raise CloseConnection(f"Metadata v{v}: a topic name cannot be null before v12")
                if rt.topic_id in seen:
                    continue
                seen.add(rt.topic_id)
                t = topics.by_id(rt.topic_id)
                if t is not None and not access.allowed(ctx, access.DESCRIBE, access.TOPIC, t.name):
                    t = None  # an id the principal may not describe is not told apart from an unknown one
                out.append(
                    described(t) if t else unknown_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, rt.topic_id)
                )
                continue
            if rt.name in seen:
                continue
            seen.add(rt.name)
            t = topics.get(rt.name)
            if (denied := access.metadata_topic_error(ctx, rt.name, t is None and allow_auto)) is not None:
                out.append(unknown_topic(rt.name, denied))
                continue
            if t is None and allow_auto:
                try:
                    t = await ctx.metadata.auto_create_topic(rt.name)
                except ApiError as e:
                    out.append(unknown_topic(rt.name, e.error))
                    continue
            out.append(described(t) if t else unknown_topic(rt.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    brokers, controller_id = brokers_of(ctx)
    return MetadataResponse(
        throttle_time_ms=0,
        error_code=0,
        brokers=[
            MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack) for b in brokers
        ],
        cluster_id=ctx.identity.cluster_id,
        controller_id=controller_id,
        topics=out,
        cluster_authorized_operations=access.cluster_operations(ctx, CLUSTER_OPERATIONS)
        if body.include_cluster_authorized_operations
        else AUTHORIZED_OPERATIONS_OMITTED,
    )


# DescribeTopicPartitions version notes:
# * v0: topics by name (an empty list means all topics), paged by response_partition_limit with a
#   cursor (topic name, partition) where the next page starts; topics sorted by name, as Kafka does.
#   eligible_leader_replicas / last_known_elr: the image's (KIP-966, as KRaftMetadataCache reads
#   them from the PartitionRegistration); empty arrays without ELR, never null: the schema allows
#   null, but Java's admin client calls .stream() on both and fails with an NPE.
@handles(DESCRIBE_TOPIC_PARTITIONS, "0")
async def describe_topic_partitions(
    ctx: RequestContext, request: Request[DescribeTopicPartitionsRequest]
) -> DescribeTopicPartitionsResponse:
    body = request.body
    topics = ctx.metadata.topics
    assert topics is not None
    names = sorted({t.name for t in body.topics}) if body.topics else topics.names()
    if not body.topics:  # listing all: only what the principal may describe
        names = [n for n in names if access.allowed(ctx, access.DESCRIBE, access.TOPIC, n, quiet=True)]
    cursor = body.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    limit = max(1, min(body.response_partition_limit, 2000))
    out: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor = None
    budget = limit
    for name in names:
        denied = access.topic_error(ctx, access.DESCRIBE, name)
        t = topics.get(name) if denied is None else None
        if t is None:
            if cursor is None or name != cursor.topic_name:
                out.append(
                    DescribeTopicPartitionsResponseTopic(
                        error_code=int(denied or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        name=name,
                        is_internal=False,
                        partitions=[],
                        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                    )
                )
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if budget <= 0:
            next_cursor = Cursor(topic_name=name, partition_index=start)
            break
        end = start + budget
        stop = min(end, t.partitions)
        ops = access.topic_operations(ctx, t.name, TOPIC_OPERATIONS)
        if start == 0 and stop == t.partitions:  # the whole topic: encoded once, as for Metadata
            encoded = _encoded(ctx, t)
            key = (DESCRIBE_TOPIC_PARTITIONS.key, request.api_version, ops)
            hit = encoded.get(key)
            if hit is None:
                hit = encoded[key] = response_codec(DESCRIBE_TOPIC_PARTITIONS.key).pre_encode(
                    _paged_topic(ctx, t, range(t.partitions), ops), request.api_version
                )
            out.append(cast(DescribeTopicPartitionsResponseTopic, hit))
        else:
            out.append(_paged_topic(ctx, t, range(start, stop), ops))
        budget -= stop - start
        if end < t.partitions:
            next_cursor = Cursor(topic_name=name, partition_index=end)
            break
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=out, next_cursor=next_cursor)


def _paged_topic(
    ctx: RequestContext, t: TopicInfo, indexes: range, ops: int
) -> DescribeTopicPartitionsResponseTopic:
    view = ctx.metadata
    listener = ctx.listener
    parts = []
    for p in indexes:
        d = view.describe_partition(t, p, listener)
        part = DescribeTopicPartitionsResponsePartition(
            error_code=d.error_code,
            partition_index=p,
            leader_id=d.leader,
            leader_epoch=d.leader_epoch,
            replica_nodes=d.replicas,
            isr_nodes=d.isr,
            eligible_leader_replicas=d.elr,
            last_known_elr=d.last_known_elr,
            offline_replicas=d.offline,
        )
        parts.append(part)
    return DescribeTopicPartitionsResponseTopic(
        error_code=0,
        name=t.name,
        topic_id=t.topic_id,
        is_internal=t.internal,
        partitions=parts,
        topic_authorized_operations=ops,
    )
