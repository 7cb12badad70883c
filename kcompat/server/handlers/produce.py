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
* v10: current_leader / node_endpoints tagged fields: not sent (only for NOT_LEADER_OR_FOLLOWER)
* v11: no change (KIP-951)
* v12: no change without transactions (KIP-890 part 2 adds the implicit AddPartitionsToTxn of
  transactions v2, which needs a finalized transaction.version >= 2 that we never report)
* v13: topics by topic_id instead of name (KIP-516): an unknown id gets UNKNOWN_TOPIC_ID for each
  of its partitions (never auto-created: an id names a topic that exists)
KIP-951 leader hints (current_leader/node_endpoints) go with NOT_LEADER_OR_FOLLOWER, which this
single leader of every partition never answers, so they are never sent.
Transactions (v1): a transactional batch needs the request's transactional_id, and its partition
must be in the producer's open transaction (KIP-890 part 1, checked in process on one node):
INVALID_PRODUCER_EPOCH for a fenced epoch, INVALID_TXN_STATE for a partition not added
(txn_service.py). v12's implicit add (transactions v2) is not implemented.

Per partition, in Kafka's order: topic and partition known (an unknown topic is auto-created when
auto.create.topics.enable is on), one whole valid batch (validate_batch: size, magic, CRC,
attributes), size within the topic's max.message.bytes (MESSAGE_TOO_LARGE) and segment.bytes
(RECORD_LIST_TOO_LARGE), then the records themselves (record_checks: keys of a compacted topic,
CreateTime timestamps within message.timestamp.before/after.max.ms; INVALID_RECORD or
INVALID_TIMESTAMP with v8's record_errors), then idempotence (the log's producer state: a retry of one of the last 5
batches is answered with its original offsets, without writing), then recompression to the topic's
compression.type when it is not `producer`, LogAppendTime stamping, and the append.
acks=0: no response at all; on any error the connection is closed so that the producer refreshes
its metadata (KafkaApis.handleProduceRequest).
"""

from __future__ import annotations

import logging
from typing import Any

from kcompat.log.config import LogConfig
from kcompat.log.errors import KafkaStorageError, LogError
from kcompat.server.broker import RequestContext
from kcompat.server.dispatcher import CloseConnection
from kcompat.server.errors import ApiError
from kcompat.server.log_throttle import LogThrottle
from kcompat.server.record_checks import check_records
from kcompat.server.registry import NO_RESPONSE, handles
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

log = logging.getLogger("kcompat.server")
_storage_errors = LogThrottle(log)  # a full disk fails every append: one line every 10 s says so

TOPIC_IDS = 13  # the first Produce version that names topics by id


@handles(PRODUCE, "3-13", advertised_min=0)
async def produce(ctx: RequestContext, request: Request) -> Any:
    v = request.api_version
    body = request.body
    acks = body.acks
    failed = False
    responses = []
    for td in body.topic_data:
        parts = []
        name = td.name
        missing_id = False
        if v >= TOPIC_IDS:
            t = ctx.metadata.topics.by_id(td.topic_id) if ctx.metadata.topics is not None else None
            name, missing_id = (t.name, False) if t is not None else ("", True)
        for pd in td.partition_data:
            resp: dict[str, Any] = {"index": pd.index, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}
            try:
                if acks not in (-1, 0, 1):
                    raise ApiError(ErrorCode.INVALID_REQUIRED_ACKS)
                if missing_id:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID)
                resp.update(await _produce_partition(ctx, name, pd.index, pd.records, v, body.transactional_id))
            except ApiError as e:
                failed = True
                resp["error_code"] = int(e.error)
                resp["error_message"] = e.message
                if e.records:
                    resp["record_errors"] = [{"batch_index": i, "batch_index_error_message": m} for i, m in e.records]
            parts.append(resp)
        responses.append({"name": name, "topic_id": td.topic_id, "partition_responses": parts})
    if acks == 0:
        if failed:
            raise CloseConnection("Produce with acks=0 failed; closing so the producer refreshes metadata")
        return NO_RESPONSE
    return {"responses": responses, "throttle_time_ms": 0}


async def _produce_partition(
    ctx: RequestContext, topic: str, partition: int, records: Any, v: int, txn_id: str | None
) -> dict[str, Any]:
    t = ctx.metadata.topic(topic)
    if t is None:
        if not ctx.metadata.auto_create_topics:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        t = await ctx.metadata.auto_create_topic(topic)
    if not 0 <= partition < t.partitions:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    conf = ctx.metadata.log_config(t)
    h = _check_batch(records, conf, v)
    if h.is_transactional:
        ctx.broker.txn_service.verify_produce(txn_id, h.producer_id, h.producer_epoch, t.name, partition)
    now = ctx.now_ms
    refused = check_records(records, h, conf, now, t.name, partition)
    if refused is not None:
        raise ApiError(refused.error, refused.message, refused.records)

    # A large request arrives in a buffer of its own (writable): its batch is patched in place and
    # written as it is, never copied. A small one is a view of read-only bytes: copied (cheaply).
    batch: bytearray | memoryview = records if not records.readonly else bytearray(records)
    target = ctx.metadata.topic_compression(t)
    if target is not None and target != h.compression:
        batch = _recompress(bytearray(records), h, target)
    if conf.message_timestamp_type == "LogAppendTime":
        if not isinstance(batch, bytearray):
            batch = bytearray(batch)
        set_log_append_time(batch, now)
    try:
        info = ctx.replicas.append(t.name, partition, batch, leader_epoch=t.leader_epoch, now_ms=now)
    except LogError as e:
        if isinstance(e, KafkaStorageError):
            _storage_errors.log(logging.ERROR, "append", "append to %s-%d failed: %s", topic, partition, e)
        raise ApiError.from_log(e) from None
    if not info.duplicate:  # a retried batch answered with its first offsets was counted the first time
        ctx.broker.stats.records_in(t.name, info.last_offset - info.base_offset + 1, len(batch))
    return {"error_code": 0, "base_offset": info.base_offset, "log_append_time_ms": info.log_append_time_ms,
            "log_start_offset": info.log_start_offset}  # fmt: skip


def _check_batch(records: Any, conf: LogConfig, v: int) -> BatchHeader:
    """The one batch's header, once it passes the checks Kafka makes before looking at records."""
    if records is None or len(records) == 0:
        raise ApiError(ErrorCode.INVALID_RECORD, "Produce requests with version 3+ must have exactly one record batch")
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
        raise ApiError(ErrorCode.RECORD_LIST_TOO_LARGE, f"{size} bytes exceed segment.bytes={conf.segment_bytes}")
    if h.compression == codecs.ZSTD and v < 7:
        raise ApiError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later")
    return h


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
