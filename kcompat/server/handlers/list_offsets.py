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
A request for thousands of partitions lets other connections' requests in every few milliseconds
(turns.py).
"""

from __future__ import annotations

from collections import Counter

from kcompat.log.errors import LogError
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.epoch_fencing import leader_error
from kcompat.server.metadata_view import MetadataView
from kcompat.server.network.turns import Turns
from kcompat.server.registry import handles
from kcompat.server.replica_manager import UNTIMED_WAIT_S, ReplicaManager
from kcompat.storage.topic_store import TopicInfo
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
    version = request.api_version
    committed = body.isolation_level == 1
    repeated = _repeated(body)
    timeout_s = body.timeout_ms / 1000 if version >= TIMEOUT_VERSION else UNTIMED_WAIT_S
    # New partitions' logs, made off the event loop.
    await ctx.replicas.await_logs(
        ((t.name, p.partition_index) for t in body.topics for p in t.partitions), timeout_s
    )
    # Per topic name, once (a request for every partition names each topic once, with thousands of
    # partitions under it): the authorization and the topic, taken when a partition first needs them.
    topic_state: dict[str, tuple[ErrorCode | None, TopicInfo | None]] = {}
    topics = []
    metadata, replicas, node_id = ctx.metadata, ctx.replicas, ctx.identity.node_id  # once, not per partition
    turns = Turns()
    for rt in body.topics:
        parts = []
        name = rt.name
        for rp in rt.partitions:
            if turns.due():  # let other connections' requests in (turns.py)
                await turns.give()
                topic_state.clear()  # looked up again: a topic may have gone meanwhile
            out = ListOffsetsPartitionResponse(partition_index=rp.partition_index)
            parts.append(out)
            if repeated and (name, rp.partition_index) in repeated:
                out.error_code = int(ErrorCode.INVALID_REQUEST)
                continue
            if version < SENTINEL_MIN_VERSION.get(rp.timestamp, 0):
                out.error_code = int(ErrorCode.UNSUPPORTED_VERSION)
                continue
            state = topic_state.get(name)
            if state is None:
                state = topic_state[name] = (
                    access.topic_error(ctx, access.DESCRIBE, name),
                    metadata.topic(name),
                )
            denied, t = state
            if denied is not None:
                out.error_code = int(denied)
                continue
            error = _lookup(metadata, replicas, node_id, name, t, rp, out, committed)
            if error is not None:
                out.error_code = int(error)
        topics.append(ListOffsetsTopicResponse(name=name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _repeated(body: ListOffsetsRequest) -> set[tuple[str, int]]:
    """The (topic, partition) pairs named more than once (INVALID_REQUEST, as in Kafka); usually none."""
    indexes: dict[str, list[int]] = {}
    for rt in body.topics:
        indexes.setdefault(rt.name, []).extend([rp.partition_index for rp in rt.partitions])
    out: set[tuple[str, int]] = set()
    for name, ps in indexes.items():
        if len(set(ps)) != len(ps):
            out.update((name, p) for p, n in Counter(ps).items() if n > 1)
    return out


def _lookup(
    metadata: MetadataView,
    replicas: ReplicaManager,
    node_id: int,
    topic: str,
    t: TopicInfo | None,
    rp: ListOffsetsPartition,
    out: ListOffsetsPartitionResponse,
    committed: bool,
) -> ErrorCode | None:
    if t is None or not 0 <= rp.partition_index < t.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    leader, epoch = metadata.leader_and_epoch(t, rp.partition_index)
    if (refused := leader_error(rp.current_leader_epoch, leader, epoch, node_id)) is not None:
        return refused
    try:
        plog = replicas.partition_log(topic, rp.partition_index)
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
