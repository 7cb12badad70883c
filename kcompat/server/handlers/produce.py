"""Produce (key 0): advertised v0-13, served v3-13.

Version notes:
* v0-2: removed in Kafka 4 (KIP-896) and not declared, yet advertised (advertised_min=0) as Kafka 4
  does (KAFKA-18659: librdkafka before 2.11.1 turns gzip/snappy/lz4 off unless the range contains
  0); such a request does not decode and the connection is closed; magic 0/1 message sets are
  never written
* v1: throttle_time_ms;  v2: log_append_time_ms (-1 unless the topic uses LogAppendTime)
* v3: transactional_id; records must be exactly one magic-2 batch per partition
* v4: no change (KAFKA_STORAGE_ERROR may be returned)
* v5: log_start_offset
* v6: no change;  v7: zstd allowed (below v7 a zstd batch gets UNSUPPORTED_COMPRESSION_TYPE)
* v8: record_errors and error_message
* v9: flexible
* v10: current_leader / node_endpoints tagged fields: sent with NOT_LEADER_OR_FOLLOWER (cluster mode)
* v11: no change (KIP-951)
* v12: transactions v2 (KIP-890 part 2): a transactional batch adds its partition to the
  producer's transaction (Kafka's leader sends AddPartitionsToTxn for it; in process here). Java
  clients send v12 with transactional batches only when transaction.version >= 2 is finalized
* v13: topics by topic_id instead of name (KIP-516): an unknown id gets UNKNOWN_TOPIC_ID for each
  of its partitions (never auto-created: an id names a topic that exists)
KIP-951 leader hints (current_leader/node_endpoints) go with NOT_LEADER_OR_FOLLOWER, which only a
cluster-mode broker answers (a single node leads every partition). In cluster mode, batches are
stamped with the partition's leader epoch from the image, and acks=all first needs an ISR of at
least min.insync.replicas (NOT_ENOUGH_REPLICAS, nothing appended), then waits for the high
watermark to pass the append (REQUEST_TIMED_OUT after the request's timeout_ms): a Deferred
answer, so that the connection appends the producer's next pipelined Produce meanwhile.
Transactions: a transactional batch needs the request's transactional_id. Below v12 (v1 clients)
its partition must be in the producer's open transaction (KIP-890 part 1, checked in process on
one node): INVALID_PRODUCER_EPOCH for a fenced epoch, INVALID_TXN_STATE otherwise. From v12 it is
added (INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING or CONCURRENT_TRANSACTIONS when it may
not be; txn_service.py). In cluster mode only a leader that is also the transactional id's
coordinator can check; otherwise NOT_ENOUGH_REPLICAS (asking the coordinator's broker: not yet).

Per partition, in Kafka's order: topic and partition known (an unknown topic is auto-created when
auto.create.topics.enable is on), one whole valid batch (validate_batch: size, magic, CRC,
attributes), size within the topic's max.message.bytes (MESSAGE_TOO_LARGE) and segment.bytes
(RECORD_LIST_TOO_LARGE), then the records themselves (record_checks: keys of a compacted topic,
CreateTime timestamps within message.timestamp.before/after.max.ms; INVALID_RECORD or
INVALID_TIMESTAMP with v8's record_errors), then idempotence (the log's producer state: a retry of one of the last 5
batches is answered with its original offsets, without writing), then recompression to the topic's
compression.type when it is not `producer`, LogAppendTime stamping, and the append.
The topic (its config and compression.type) is looked up once for its partitions; a request for
hundreds of partitions lets other connections' requests in every few milliseconds (turns.py),
between two partitions' appends.
acks=0: no response at all; on any error the connection is closed so that the producer refreshes
its metadata (KafkaApis.handleProduceRequest).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, NamedTuple

from kcompat.log.config import LogConfig
from kcompat.log.errors import KafkaStorageError, LogError
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.delayed_produce import await_replicated
from kcompat.server.dispatcher import CloseConnection
from kcompat.server.errors import ApiError
from kcompat.server.log_throttle import LogThrottle
from kcompat.server.network.turns import Turns
from kcompat.server.record_checks import check_records
from kcompat.server.registry import NO_RESPONSE, Deferred, NoResponse, handles
from kcompat.server.replica_manager import UNTIMED_WAIT_S
from kcompat.storage.topic_store import TopicInfo
from kcompat.wire import compression as codecs
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.protocol import Request
from kcompat.wire.record_batch import (
    LOG_OVERHEAD,
    BatchHeader,
    RecordBatchError,
    set_log_append_time,
    validate_batch,
)
from kcompat.wire.records import LOG_APPEND_TIME, build_batch, decode_batch
from kcompat.wire.structs import Records
from kcompat.wire.types.produce import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)

log = logging.getLogger("kcompat.server")
_storage_errors = LogThrottle(log)  # a full disk fails every append: one line every 10 s says so

TOPIC_IDS = 13  # the first Produce version that names topics by id
LEADER_HINTS = 10  # current_leader / node_endpoints (KIP-951)
IMPLICIT_ADD = 12  # transactions v2: a transactional batch adds its partition (KIP-890 part 2)

# The answers' absent leader hint, shared rather than made for each partition (the hot path): a
# partition refused with NOT_LEADER_OR_FOLLOWER gets a LeaderIdAndEpoch of its own, never this one.
_NO_LEADER = LeaderIdAndEpoch()

Pending = list[
    tuple[PartitionProduceResponse, str, int, int]
]  # acks=all: answer, topic, partition, last offset


@handles(PRODUCE, "3-13", advertised_min=0)
async def produce(
    ctx: RequestContext, request: Request[ProduceRequest]
) -> ProduceResponse | Deferred | NoResponse:
    v = request.api_version
    body = request.body
    acks = body.acks
    failed = False
    responses = []
    leaders: set[int] = set()  # KIP-951: the endpoints of leaders named in NOT_LEADER_OR_FOLLOWER hints
    pending: Pending = []
    await ctx.replicas.await_logs(_named_partitions(ctx, body, v), max(body.timeout_ms, 0) / 1000)
    turns = Turns()
    for td in body.topic_data:
        parts = []
        name = td.name
        missing_id = False
        if v >= TOPIC_IDS:
            t = ctx.metadata.topics.by_id(td.topic_id) if ctx.metadata.topics is not None else None
            name, missing_id = (t.name, False) if t is not None else ("", True)
        denied = access.produce_error(ctx, name, body.transactional_id)
        topic: _Topic | None = None  # looked up when its first partition needs it, once per turn
        for pd in td.partition_data:
            if turns.due():  # let other connections' requests in (turns.py)
                await turns.give()
                topic = None  # looked up again: the topic may have gone or changed meanwhile
            resp = PartitionProduceResponse(index=pd.index, base_offset=-1, current_leader=_NO_LEADER)
            try:
                if acks not in (-1, 0, 1):
                    raise ApiError(ErrorCode.INVALID_REQUIRED_ACKS)
                if missing_id:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID)
                if denied is not None:
                    raise ApiError(denied)
                if topic is None:
                    topic = await _topic(ctx, name)
                last_offset = await _produce_partition(
                    ctx, topic, pd.index, pd.records, v, acks, body.transactional_id, resp
                )
                if last_offset >= 0:
                    pending.append((resp, name, pd.index, last_offset))
            except ApiError as e:
                failed = True
                _refused(resp, e, v, leaders)
            parts.append(resp)
        responses.append(TopicProduceResponse(name=name, topic_id=td.topic_id, partition_responses=parts))
    quotas = ctx.services.quotas
    throttle_ms = _throttle(ctx, request) if quotas.produce.on else 0
    if acks == 0:
        if failed:
            raise CloseConnection("Produce with acks=0 failed; closing so the producer refreshes metadata")
        return NO_RESPONSE
    response = ProduceResponse(responses=responses, throttle_time_ms=throttle_ms)
    if leaders:
        response.node_endpoints = _endpoints(ctx, leaders)
    if pending:  # appended: the connection may take its next Produce while this one waits for the ISR
        return Deferred(_replicated(ctx, pending, body.timeout_ms, response))
    return response


def _throttle(ctx: RequestContext, request: Request[ProduceRequest]) -> int:
    """producer_byte_rate: the request's record bytes counted against the client's quota (Kafka
    counts the request's size); the connection is muted for the throttle time (acks=0 too)."""
    size = sum(len(pd.records) for td in request.body.topic_data for pd in td.partition_data if pd.records)
    quotas = ctx.services.quotas
    return quotas.record(quotas.produce, ctx.client, request.client_id, size)


def _named_partitions(ctx: RequestContext, body: ProduceRequest, v: int) -> Iterator[tuple[str, int]]:
    """(topic name, partition) of each partition the request names: those whose logs are still to
    be made are made off the event loop before the appends (ReplicaManager.await_logs)."""
    for td in body.topic_data:
        t = ctx.metadata.topics.by_id(td.topic_id) if v >= TOPIC_IDS else None
        name = td.name if v < TOPIC_IDS else t.name if t is not None else None
        if name is not None:
            for pd in td.partition_data:
                yield name, pd.index


def _refused(resp: PartitionProduceResponse, e: ApiError, v: int, leaders: set[int]) -> None:
    """A partition's answer for its error (with the leader hint of NOT_LEADER_OR_FOLLOWER, noted in `leaders`)."""
    resp.error_code = int(e.error)
    resp.error_message = e.message
    if e.records:
        resp.record_errors = [
            BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m) for i, m in e.records
        ]
    if isinstance(e, NotLeader) and v >= LEADER_HINTS and e.leader >= 0:
        resp.current_leader = LeaderIdAndEpoch(leader_id=e.leader, leader_epoch=e.leader_epoch)
        leaders.add(e.leader)


async def _replicated(
    ctx: RequestContext, pending: Pending, timeout_ms: int, response: ProduceResponse
) -> ProduceResponse:
    await _await_replication(ctx, pending, timeout_ms)
    return response


class NotLeader(ApiError):
    """NOT_LEADER_OR_FOLLOWER, with the leader this broker knows of (KIP-951 hints)."""

    def __init__(self, leader: int, leader_epoch: int) -> None:
        super().__init__(
            ErrorCode.NOT_LEADER_OR_FOLLOWER, "This server is not the leader for that topic-partition."
        )
        self.leader = leader
        self.leader_epoch = leader_epoch


def _endpoints(ctx: RequestContext, node_ids: set[int]) -> list[NodeEndpoint]:
    listener = ctx.listener
    return [
        NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
        for b in ctx.metadata.live_brokers(listener) or ()
        if b.node_id in node_ids
    ]


async def _await_replication(ctx: RequestContext, pending: Pending, timeout_ms: int) -> None:
    """acks=all in cluster mode: each append's answer once replicated (delayed_produce.py)."""
    codes = await await_replicated(
        ctx.replicas.partitions,
        ctx.replicas.fetch_waiters,
        [((t, i), last) for _, t, i, last in pending],
        max(timeout_ms, 0) / 1000,
        ctx.clock,
    )
    for (resp, _, _, _), code in zip(pending, codes, strict=True):
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            resp.error_code = int(code)
            resp.base_offset = -1
            resp.error_message = "leadership moved before the records were replicated"
        elif code == ErrorCode.REQUEST_TIMED_OUT:
            resp.error_code = int(code)
            resp.base_offset = -1
            resp.error_message = "the records were not replicated to the ISR in time"


def _leadership(ctx: RequestContext, t: TopicInfo, partition: int, acks: int) -> tuple[int, Any]:
    """The leader epoch to stamp and the cluster-mode Partition (None on a single node), once this
    broker may take the append: NOT_LEADER_OR_FOLLOWER (with hints) or NOT_ENOUGH_REPLICAS otherwise."""
    leader, leader_epoch = ctx.metadata.leader_and_epoch(t, partition)
    if leader != ctx.identity.node_id:
        raise NotLeader(leader, leader_epoch)
    replica = ctx.replicas.partitions.get((t.name, partition)) if ctx.replicas.partitions else None
    if replica is not None:
        if not replica.is_leader:
            raise NotLeader(leader, leader_epoch)
        if acks == -1 and len(replica.state.isr) < replica.min_isr:
            raise ApiError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {list(replica.state.isr)} "
                f"is insufficient to satisfy the min.isr requirement of {replica.min_isr}",
            )
    return leader_epoch, replica


class _Topic(NamedTuple):
    """What every partition of a topic in the request shares, looked up once for them."""

    info: TopicInfo
    conf: LogConfig
    compression: int | None  # the topic's compression.type codec; None: keep the producer's


async def _topic(ctx: RequestContext, name: str) -> _Topic:
    """The topic (auto-created when auto.create.topics.enable is on), else UNKNOWN_TOPIC_OR_PARTITION."""
    t = ctx.metadata.topic(name)
    if t is None:
        if not ctx.metadata.auto_create_topics:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        t = await ctx.metadata.auto_create_topic(name)
        # Its logs come after the answer: made off the loop (await_logs), as for a created topic.
        await ctx.replicas.await_logs([(t.name, p) for p in range(t.partitions)], UNTIMED_WAIT_S)
    return _Topic(t, ctx.metadata.log_config(t), ctx.metadata.topic_compression(t))


async def _produce_partition(
    ctx: RequestContext,
    topic: _Topic,
    partition: int,
    records: Records | None,
    v: int,
    acks: int,
    txn_id: str | None,
    resp: PartitionProduceResponse,
) -> int:
    """Append, and fill in the partition's answer `resp`; the last offset to await with acks=all
    in cluster mode (else -1)."""
    t, conf, target = topic
    if not 0 <= partition < t.partitions:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    leader_epoch, replica = _leadership(ctx, t, partition, acks)
    records, h = _check_batch(records, conf, v)
    txns = ctx.transactions
    if h.is_transactional and v >= IMPLICIT_ADD and txns.transaction_version >= 2:  # joins its txn
        await txns.add_implicitly(txn_id, h.producer_id, h.producer_epoch, t.name, partition)
    elif h.is_transactional:
        await txns.verify_produce(
            txn_id, h.producer_id, h.producer_epoch, t.name, partition, transaction_abortable=v >= 11
        )
    now = ctx.now_ms
    refused = check_records(records, h, conf, now, t.name, partition)
    if refused is not None:
        raise ApiError(refused.error, refused.message, refused.records)

    # A request arrives in a bytearray of its own (framing.py): its batch is patched in place and
    # written as it is, never copied. Read-only bytes (in-process callers) are copied once.
    batch: bytearray | memoryview = records if not records.readonly else bytearray(records)
    header: BatchHeader | None = h  # the log's framing reads it again only if the batch changes
    if target is not None and target != h.compression:
        batch, header = _recompress(bytearray(records), h, target), None
    if conf.message_timestamp_type == "LogAppendTime":
        if not isinstance(batch, bytearray):
            batch = bytearray(batch)
        set_log_append_time(batch, now)
        header = None
    try:
        info = ctx.replicas.append(
            t.name, partition, batch, leader_epoch=leader_epoch, now_ms=now, header=header
        )
    except LogError as e:
        if isinstance(e, KafkaStorageError):
            _storage_errors.log(logging.ERROR, "append", "append to %s-%d failed: %s", t.name, partition, e)
        raise ApiError.from_log(e) from None
    if not info.duplicate:  # a retried batch answered with its first offsets was counted the first time
        ctx.stats.records_in(t.name, info.last_offset - info.base_offset + 1, len(batch))
    resp.base_offset = info.base_offset
    resp.log_append_time_ms = info.log_append_time_ms
    resp.log_start_offset = info.log_start_offset
    return info.last_offset if replica is not None and acks == -1 else -1


def _check_batch(records: Records | None, conf: LogConfig, v: int) -> tuple[memoryview, BatchHeader]:
    """The records (a decoded request's view of its frame) and their one batch's header, once it
    passes the checks Kafka makes before looking at records."""
    if records is None or len(records) == 0:
        raise ApiError(
            ErrorCode.INVALID_RECORD, "Produce requests with version 3+ must have exactly one record batch"
        )
    assert isinstance(records, memoryview)
    try:
        h = validate_batch(records)
    except RecordBatchError as e:
        raise ApiError(e.error, str(e)) from None
    size = len(records)
    if size > conf.max_message_bytes:
        raise ApiError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch of {size} bytes is larger than max.message.bytes={conf.max_message_bytes}",
        )
    if size > conf.segment_bytes:
        raise ApiError(
            ErrorCode.RECORD_LIST_TOO_LARGE, f"{size} bytes exceed segment.bytes={conf.segment_bytes}"
        )
    if h.compression == codecs.ZSTD and v < 7:
        raise ApiError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later")
    return records, h


def _recompress(batch: bytearray, h: BatchHeader, target: int) -> bytearray:
    """The batch rebuilt with the topic's codec: same records, producer fields and timestamp type."""
    try:
        _, recs = decode_batch(batch)
    except DecodeError as e:
        raise ApiError(ErrorCode.CORRUPT_MESSAGE, f"cannot decompress the batch: {e}") from None
    out = build_batch(
        recs,
        base_offset=h.base_offset,
        compression=target,
        timestamp_type=LOG_APPEND_TIME if h.log_append_time else 0,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
        transactional=h.is_transactional,  # or its records would leave the transaction
    )
    assert len(out) >= LOG_OVERHEAD
    return bytearray(out)
