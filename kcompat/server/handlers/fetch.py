"""Fetch (key 1): v4-18.

Version notes:
* v4: isolation_level, last_stable_offset, aborted_transactions. read_committed (1) reads only
  below the last stable offset (the first offset of the oldest open transaction), still as file
  slices, with the aborted transactions of the range from the `.txnindex` (the client drops their
  batches); its long poll counts only those bytes. read_uncommitted reads to the high watermark
  and gets no aborted transactions
* v5: log_start_offset
* v6: no change
* v7: incremental fetch sessions (KIP-227): session_id, session_epoch, forgotten_topics_data; the
  rules and the session cache are in fetch_session.py
* v8: no change
* v9: current_leader_epoch (older: FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH)
* v10: no change (zstd)
* v11: rack_id and preferred_read_replica (KIP-392, cluster mode; see "Reading from followers")
* v12: flexible; last_fetched_epoch and diverging_epoch (cluster mode; a single node has no
  follower); snapshot_id not sent
* v13: topics by id, in the request (an unknown id: UNKNOWN_TOPIC_ID) and in the response
* v14: no change
* v15: replica_id moves into the tagged replica_state (KIP-903)
* v16: KIP-951 leader hints: current_leader and node_endpoints on NOT_LEADER_OR_FOLLOWER and
  FENCED_LEADER_EPOCH
* v17: replica_directory_id (replicas only; accepted)
* v18: the follower's high_watermark (replicas only; accepted)
Not advertised: v0-3 (magic 0/1 formats, which Kafka 4 dropped too).

A fetch from a replica (replica_id >= 0) on a single node is answered as a single-node Kafka broker
answers a replica it does not know: each known partition gets UNKNOWN_LEADER_EPOCH when the request
carries a leader epoch, else NOT_LEADER_OR_FOLLOWER. In cluster mode only the partition's leader
answers (NOT_LEADER_OR_FOLLOWER elsewhere, with the leader as hint); a follower's fetch first
checks its LastFetchedEpoch against the leader-epoch cache (DivergingEpoch when its log went on in
an epoch this leader ended earlier), then records its fetch offset as its log end offset (which
may move the high watermark and wake acks=all produces), then reads up to the log end. Consumers
read below the high watermark.

Reading from followers (KIP-392, cluster mode), as Kafka's ReplicaManager:
* A consumer's Fetch v11+ may read from any replica hosted here, leader or follower; older
  versions and other brokers' fetches only from the leader (NOT_LEADER_OR_FOLLOWER elsewhere).
  A broker that no longer hosts the partition answers NOT_LEADER_OR_FOLLOWER; the leader epoch
  is checked against the epoch this broker knows (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
* A follower serves up to its own high watermark (the leader's, as last fetched, capped by its log
  end), read_committed up to its own last stable offset; an offset between its high watermark and
  its log end reads nothing, one past its log end is OFFSET_OUT_OF_RANGE (the Java consumer then
  goes back to the leader rather than resetting). Kafka's Fetch never answers OFFSET_NOT_AVAILABLE.
* With `replica.selector.class` set, the leader asks the selector for each partition of a Fetch
  v11+ from a consumer that sends its rack; when it names a follower, that partition's answer has
  preferred_read_replica, the leader's offsets and no records, and the Fetch answers at once. No
  selector (the default): nothing of this runs, the leader serves.
* ListOffsets and OffsetForLeaderEpoch stay the leader's (their handlers refuse followers).

Reading: records go out as the log's file slices (whole batches), sent with sendfile by the
transport. Kafka's limits (KIP-74): the response's max_bytes (capped by fetch.max.bytes) and each
partition's partition_max_bytes bound the data, but the first partition that has data returns at
least its first whole batch even when it is larger. A full fetch answers every requested
partition once, in request order; an incremental one only the partitions of its session with
something new, in session order.

A fetch of hundreds of partitions lets other connections' requests in every few milliseconds
(turns.py), between two partitions' reads.

Long polling: with less than min_bytes available and max_wait_ms > 0, the fetch parks on its
partitions (for an incremental fetch, every partition of the session; delayed_fetch.py) until an
append wakes it or the wait ends (on the broker's clock), then reads again. Errors answer at once.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.epoch_fencing import leader_epoch_error
from kcompat.server.isr_port import ReadReplicaSelector
from kcompat.server.network.turns import Turns
from kcompat.server.registry import handles
from kcompat.server.replica_manager import UNTIMED_WAIT_S
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.protocol import Request
from kcompat.wire.types.fetch import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    SnapshotId,
)

log = logging.getLogger("kcompat.server.fetch")

RACK_VERSION = 11
TOPIC_IDS_VERSION = 13
REPLICA_STATE_VERSION = 15
LEADER_HINTS_VERSION = 16
NO_LEADER_EPOCH = -1
_UNKNOWN_ID, _DENIED = ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED

# The tagged fields' absent values, shared by every partition's answer rather than made for each
# (the hot path); an answer that has one gets an instance of its own, these are never changed.
_NO_DIVERGING_EPOCH = EpochEndOffset()
_NO_LEADER = LeaderIdAndEpoch()
_NO_SNAPSHOT = SnapshotId()
_NO_RACKS: dict[int, str | None] = {}  # never written: no selector, no racks looked up


@handles(FETCH, "4-18")
async def fetch(ctx: RequestContext, request: Request[FetchRequest]) -> FetchResponse:
    body = request.body
    version = request.api_version
    by_id = version >= TOPIC_IDS_VERSION
    replica_id = body.replica_state.replica_id if version >= REPLICA_STATE_VERSION else body.replica_id
    replica_epoch = body.replica_state.replica_epoch if version >= REPLICA_STATE_VERSION else -1
    # Kafka's ClientMetadata: a consumer's v11+ Fetch may read from a follower (None: the leader only)
    client_rack = (body.rack_id or "") if replica_id < 0 and version >= RACK_VERSION else None

    # Partitions by (topic id or name, partition); a repeated one keeps its first position.
    fetch_data: dict[tuple[Any, int], FetchPartition] = {}
    for ft in body.topics:
        tkey = ft.topic_id if by_id else ft.topic
        for fp in ft.partitions:
            fetch_data.setdefault((tkey, fp.partition), fp)
    forgotten = [
        (ft.topic_id if by_id else ft.topic, p) for ft in body.forgotten_topics_data for p in ft.partitions
    ]
    context = ctx.fetch_sessions.new_context(
        version, body.session_id, body.session_epoch, replica_id >= 0, fetch_data, forgotten, ctx.now_ms
    )
    if context.kind == "error":
        log.debug(
            "Fetch v%d session %d epoch %d: %s",
            version,
            body.session_id,
            body.session_epoch,
            ErrorCode.of(context.error).name,
        )
        return FetchResponse(throttle_time_ms=0, error_code=context.error, session_id=0, responses=[])

    # (key, topic name or None, partition, request partition) for what the context reads.
    reads = [(key, _topic_name(ctx.metadata, key[0], by_id), key[1], fp) for key, fp in context.partitions]
    # Topics the principal may not read (all of them for a replica without CLUSTER_ACTION).
    denied = access.fetch_denied(ctx, reads, replica_id >= 0)
    tps = [(name, p) for _, name, p, _ in reads if name is not None and name not in denied]
    clock = ctx.clock
    # New partitions' logs, made off the event loop (waited for at least as long as an untimed request).
    await ctx.replicas.await_logs(tps, max(body.max_wait_ms / 1000, UNTIMED_WAIT_S))
    deadline = clock() + max(body.max_wait_ms, 0) / 1000
    max_bytes = min(body.max_bytes, ctx.fetch_max_bytes)
    quota_on = ctx.services.quotas.fetch.on and replica_id < 0  # consumer_byte_rate (not followers)
    if quota_on:
        max_bytes = _quota_bytes(ctx, request, max_bytes)
    hints = version >= LEADER_HINTS_VERSION
    first = True
    while True:
        results, total, errors, hinted = await _read_all(
            ctx,
            reads,
            max_bytes,
            (replica_id, replica_epoch),
            hints,
            first,
            body.isolation_level == 1,
            denied,
            client_rack,
        )
        first = False
        remaining = deadline - clock()
        waiters = ctx.replicas.fetch_waiters
        if total >= body.min_bytes or errors or remaining <= 0 or not tps or waiters.closed:
            break
        await waiters.wait(tps, remaining)
        if waiters.closed:
            break  # shutting down: answer with what was read

    throttle_ms = 0
    if quota_on and total:
        throttle_ms, total = _throttle(ctx, request, results, total)
    if total:
        stats = ctx.stats
        for (_, name, _, _), out in zip(reads, results, strict=True):
            if name is not None and out.records:
                stats.bytes_out(name, len(out.records), replica_id >= 0)
    error, session_id, sent = context.respond(
        list(zip([r[0] for r in reads], results, strict=True)), ctx.now_ms
    )
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "Fetch v%d session %d epoch %d (%s): %d partition(s) in the request, %d read, %d in the response "
            "(session %d)",
            version,
            body.session_id,
            body.session_epoch,
            context.kind,
            len(fetch_data),
            len(reads),
            len(sent),
            session_id,
        )

    topics = _by_topic(sent, by_id)
    response = FetchResponse(
        throttle_time_ms=throttle_ms, error_code=error, session_id=session_id, responses=topics
    )
    if hinted and sent:  # errors are always sent (unless the whole answer is an error), so is their leader
        known = ctx.metadata.live_brokers(ctx.listener)
        if known is None:
            host, port = ctx.endpoint
            identity = ctx.identity
            response.node_endpoints = [
                NodeEndpoint(node_id=identity.node_id, host=host, port=port, rack=identity.rack)
            ]
        else:
            response.node_endpoints = [
                NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                for b in known
                if b.node_id in hinted
            ]
    return response


def _quota_bytes(ctx: RequestContext, request: Request[FetchRequest], max_bytes: int) -> int:
    """No more than the quota window may carry (ClientQuotaManager.getMaxValueInQuotaWindow)."""
    most = ctx.services.quotas.max_fetch_bytes(ctx.client, request.client_id)
    return max_bytes if most is None else max(min(max_bytes, int(most)), 1)


def _throttle(
    ctx: RequestContext, request: Request[FetchRequest], results: list[PartitionData], total: int
) -> tuple[int, int]:
    """consumer_byte_rate: (throttle ms, bytes answered). Over the quota the answer is empty and
    its bytes are not counted, as KafkaApis answers a throttled consumer."""
    quotas = ctx.services.quotas
    throttle_ms = quotas.record(quotas.fetch, ctx.client, request.client_id, total)
    if not throttle_ms:
        return 0, total
    quotas.unrecord(quotas.fetch, ctx.client, request.client_id, total)
    for out in results:
        out.records = b""
    return throttle_ms, 0


def _by_topic(sent: list[tuple[tuple[Any, int], PartitionData]], by_id: bool) -> list[FetchableTopicResponse]:
    """Kafka groups consecutive partitions of a topic; a topic interleaved with another repeats."""
    topics: list[FetchableTopicResponse] = []
    last: Any = None
    parts: list[PartitionData] = []
    for (tkey, _), part in sent:
        if not topics or tkey != last:
            last = tkey
            parts = []
            if by_id:
                topics.append(FetchableTopicResponse(topic_id=tkey, partitions=parts))
            else:
                topics.append(FetchableTopicResponse(topic=tkey, partitions=parts))
        parts.append(part)
    return topics


def _topic_name(metadata: Any, tkey: Any, by_id: bool) -> str | None:
    if not by_id:
        return str(tkey)
    t = metadata.topics.by_id(tkey) if isinstance(tkey, uuid.UUID) else None
    return t.name if t is not None else None


async def _read_all(
    ctx: RequestContext,
    reads: list[tuple[Any, str | None, int, FetchPartition]],
    max_bytes: int,
    replica: tuple[int, int],
    hints: bool,
    first: bool,
    committed: bool,
    denied: frozenset[str] = frozenset(),
    client_rack: str | None = None,
) -> tuple[list[PartitionData], int, bool, set[int]]:
    """Each partition's answer, the record bytes read, whether to answer at once (an error, a
    diverging epoch, a preferred read replica), the leaders named in hints.
    A follower's fetch state is taken when its request arrives (`first`), not again when a parked
    fetch wakes, as Kafka's DelayedFetch does: a stalled follower's old fetch cannot rejoin the ISR.
    `committed`: read_committed, below the last stable offset. Between two partitions' reads other
    connections' requests get turns (turns.py); each partition's facts are looked up as it is read.
    `client_rack`: a consumer's v11+ Fetch (None: the leader serves only), its rack for the selector."""
    replicas, metadata = ctx.replicas, ctx.metadata  # once, not per partition
    replica_id = replica[0]
    cluster = replicas.cluster_mode
    select = replicas.read_replica if client_rack else None
    # each live broker's rack on the client's listener, for the selector (once per request)
    racks = {b.node_id: b.rack for b in metadata.live_brokers(ctx.listener) or ()} if select else _NO_RACKS
    results = []
    total = 0
    errors = False
    hinted: set[int] = set()
    min_one = True
    turns = Turns()
    for _, topic, partition, fp in reads:
        if turns.due():
            await turns.give()
        out = PartitionData(
            partition_index=partition,
            high_watermark=-1,
            diverging_epoch=_NO_DIVERGING_EPOCH,
            current_leader=_NO_LEADER,
            snapshot_id=_NO_SNAPSHOT,
            records=b"",
        )
        results.append(out)
        if topic is None or topic in denied:
            out.error_code = int(_UNKNOWN_ID if topic is None else _DENIED)
            errors = True
            continue
        t = metadata.topic(topic)
        if t is None or not 0 <= partition < t.partitions:
            out.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            errors = True
            continue
        p = replicas.partitions.get((topic, partition)) if cluster else None
        refused = _refusal(ctx, t, partition, fp.current_leader_epoch, replica_id, p, client_rack is not None)
        if refused is not None:
            error, hint = refused
            out.error_code = int(error)
            if hints and hint is not None:
                out.current_leader = LeaderIdAndEpoch(leader_id=hint[0], leader_epoch=hint[1])
                hinted.add(hint[0])
            errors = True
            continue
        if (
            select is not None
            and p is not None
            and _sent_elsewhere(ctx, select, p, str(client_rack), racks, fp, out)
        ):
            errors = True  # answered at once, as Kafka does once it names a preferred replica
            continue
        plog = replicas.partition_log(topic, partition)
        if p is not None and replica_id >= 0 and first and _follower_fetched(ctx, p, plog, fp, replica, out):
            errors = True  # diverged: answered at once, the follower truncates first
            continue
        start, hwm, leo, lso = (
            plog.log_start_offset,
            plog.high_watermark,
            plog.log_end_offset,
            plog.last_stable_offset,
        )
        # followers read to the log end, consumers below the HW (read_committed: below the LSO)
        end = leo if replica_id >= 0 else (lso if committed else hwm)
        out.high_watermark, out.last_stable_offset, out.log_start_offset = hwm, lso, start
        # Out of range only outside the log: a consumer between the HW and the log end (a new
        # leader whose HW has not caught up yet) reads nothing, as Kafka answers.
        if not start <= fp.fetch_offset <= leo:
            out.error_code = int(ErrorCode.OFFSET_OUT_OF_RANGE)
            errors = True
            continue
        limit = min(fp.partition_max_bytes, max_bytes - total)
        if fp.fetch_offset >= end or (limit <= 0 and not min_one):
            continue
        if end < leo:
            data = plog.read(fp.fetch_offset, max(limit, 0), min_one_batch=min_one, max_offset=end)
        else:
            data = plog.read(fp.fetch_offset, max(limit, 0), min_one_batch=min_one)
        n = len(data)
        if n:
            if committed:
                out.aborted_transactions = [
                    AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                    for a in plog.aborted_transactions(fp.fetch_offset, lso)
                ]
            out.records = data
            total += n
            min_one = False
    return results, total, errors, hinted


def _sent_elsewhere(
    ctx: RequestContext,
    select: ReadReplicaSelector,
    p: Any,
    client_rack: str,
    racks: dict[int, str | None],
    fp: FetchPartition,
    out: PartitionData,
) -> bool:
    """As leader: True when the selector sends this consumer to a follower (the answer names it as
    preferred_read_replica, with the leader's offsets and no records)."""
    if not p.is_leader:
        return False
    preferred = select(p, client_rack, fp.fetch_offset, racks, ctx.now_ms)
    if preferred < 0:
        return False
    plog = p.log
    out.preferred_read_replica = preferred
    out.high_watermark, out.last_stable_offset = plog.high_watermark, plog.last_stable_offset
    out.log_start_offset = plog.log_start_offset
    return True


def _follower_fetched(
    ctx: RequestContext, p: Any, plog: Any, fp: FetchPartition, replica: tuple[int, int], out: PartitionData
) -> bool:
    """A follower's fetch as it arrives: True when its log diverged (answered with DivergingEpoch);
    else its fetch offset is recorded (which may move the HW) and the ISR may take it back."""
    if _diverged(plog, fp, out):
        return True
    replicas, replica_id = ctx.replicas, replica[0]
    if p.update_follower(replica_id, fp.fetch_offset, replica[1], ctx.now_ms, fp.log_start_offset):
        replicas.fetch_waiters.notify((p.topic, p.index))  # acks=all and consumers waiting on the HW
    if replicas.isr_manager is not None:
        replicas.isr_manager.maybe_expand(p, replica_id)
    return False


def _refusal(
    ctx: RequestContext, t: Any, partition: int, epoch: int, replica_id: int, p: Any, any_replica: bool
) -> tuple[ErrorCode, tuple[int, int] | None] | None:
    """Why this broker does not serve the partition (error, the (leader, epoch) to hint), or None.
    `any_replica`: a consumer's v11+ Fetch, which a follower hosting the partition serves too."""
    leader, leader_epoch = ctx.metadata.leader_and_epoch(t, partition)
    hint = (leader, leader_epoch) if leader >= 0 else None
    if (fenced := leader_epoch_error(epoch, leader_epoch)) is not None:
        return fenced, hint if fenced == ErrorCode.FENCED_LEADER_EPOCH else None
    if ctx.replicas.cluster_mode:
        if p is None or not (any_replica or (p.is_leader and leader == ctx.identity.node_id)):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, hint
    elif replica_id >= 0:  # a single node: no replica but itself, as Kafka answers a stranger
        if epoch != NO_LEADER_EPOCH:
            return ErrorCode.UNKNOWN_LEADER_EPOCH, None
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, (ctx.identity.node_id, leader_epoch)
    # a new partition's log still being made past the wait, or refused, or in a failed log dir
    # (KAFKA_STORAGE_ERROR)
    unready = ctx.replicas.log_error(t.name, partition)
    return (ErrorCode[unready.error_name], None) if unready is not None else None


def _diverged(plog: Any, fp: FetchPartition, out: PartitionData) -> bool:
    """A follower whose last fetched epoch ends earlier here (or is unknown here) gets DivergingEpoch
    {the largest epoch here not above it, where that epoch ends} and truncates (KIP-595 for Fetch)."""
    last_epoch = fp.last_fetched_epoch
    if last_epoch < 0:
        return False
    epoch, end_offset = plog.end_offset_for_epoch(last_epoch)
    if epoch == last_epoch and end_offset >= fp.fetch_offset:
        return False
    out.high_watermark = plog.high_watermark
    out.last_stable_offset = plog.high_watermark
    out.log_start_offset = plog.log_start_offset
    out.diverging_epoch = EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return True
