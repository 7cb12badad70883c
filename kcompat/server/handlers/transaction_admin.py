"""What `kafka-transactions` asks: DescribeTransactions (key 65) v0 and ListTransactions (key 66)
v0-2, answered from the transaction coordinator's state; DescribeProducers (key 61) v0, from the
partitions' producer state (`find-hanging`; `abort` then sends WriteTxnMarkers).

Version notes:
* DescribeTransactions v0: an unknown transactional id gets TRANSACTIONAL_ID_NOT_FOUND
* ListTransactions v0: state and producer id filters; state names Kafka does not know come back
  in unknown_state_filters;  v1: duration_filter (only transactions started longer ago than that);
  v2: transactional_id_pattern, a regular expression the whole id must match (a bad one:
  INVALID_REGULAR_EXPRESSION)
* DescribeProducers v0: per partition, the producers the log remembers (epoch, last sequence and
  timestamp, coordinator epoch, first offset of the open transaction or -1); an unknown partition
  gets UNKNOWN_TOPIC_OR_PARTITION
"""

from __future__ import annotations

import re

from kcompat.coordinator.transaction.state import TransactionState
from kcompat.log.errors import LogError
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.server.replica_manager import UNTIMED_WAIT_S
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.describe_producers import DESCRIBE_PRODUCERS
from kcompat.wire.messages.describe_transactions import DESCRIBE_TRANSACTIONS
from kcompat.wire.messages.list_transactions import LIST_TRANSACTIONS
from kcompat.wire.protocol import Request
from kcompat.wire.types import describe_producers as dp
from kcompat.wire.types import describe_transactions as dt
from kcompat.wire.types import list_transactions as lt

STATE_NAMES = {s.kafka_name: s for s in TransactionState}


@handles(DESCRIBE_TRANSACTIONS, "0")
async def describe_transactions(
    ctx: RequestContext, request: Request[dt.DescribeTransactionsRequest]
) -> dt.DescribeTransactionsResponse:
    txns = ctx.transactions.coordinator.txns
    out = []
    for txn_id in request.body.transactional_ids:
        denied = access.transactional_id_error(ctx, access.DESCRIBE, txn_id)
        m = txns.get(txn_id) if denied is None else None
        if m is None:
            out.append(
                dt.TransactionState(
                    error_code=int(denied or ErrorCode.TRANSACTIONAL_ID_NOT_FOUND),
                    transactional_id=txn_id,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(m.partitions):
            by_topic.setdefault(topic, []).append(p)
        out.append(
            dt.TransactionState(
                error_code=0,
                transactional_id=txn_id,
                transaction_state=m.state.kafka_name,
                transaction_timeout_ms=m.txn_timeout_ms,
                transaction_start_time_ms=m.txn_start_ms,
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                topics=[dt.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
        )
    return dt.DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)


@handles(LIST_TRANSACTIONS, "0-2")
async def list_transactions(
    ctx: RequestContext, request: Request[lt.ListTransactionsRequest]
) -> lt.ListTransactionsResponse:
    body = request.body
    v = request.api_version
    unknown = [s for s in body.state_filters if s not in STATE_NAMES]
    states = {STATE_NAMES[s] for s in body.state_filters if s in STATE_NAMES}
    pids = set(body.producer_id_filters)
    duration = body.duration_filter if v >= 1 else -1
    pattern = None
    if v >= 2 and body.transactional_id_pattern:
        try:
            pattern = re.compile(body.transactional_id_pattern)
        except re.error:
            return lt.ListTransactionsResponse(
                throttle_time_ms=0,
                error_code=int(ErrorCode.INVALID_REGULAR_EXPRESSION),
                unknown_state_filters=unknown,
                transaction_states=[],
            )
    now = ctx.now_ms
    out = []
    for m in ctx.transactions.coordinator.txns.values():
        if (states and m.state not in states) or (pids and m.producer_id not in pids):
            continue
        if duration >= 0 and now - m.txn_start_ms <= duration:  # Kafka's test, start time as stored
            continue
        if pattern is not None and not pattern.fullmatch(m.transactional_id):
            continue
        if not access.allowed(ctx, access.DESCRIBE, access.TRANSACTIONAL_ID, m.transactional_id, quiet=True):
            continue
        out.append(
            lt.TransactionState(
                transactional_id=m.transactional_id,
                producer_id=m.producer_id,
                transaction_state=m.state.kafka_name,
            )
        )
    return lt.ListTransactionsResponse(
        throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=out
    )


@handles(DESCRIBE_PRODUCERS, "0")
async def describe_producers(
    ctx: RequestContext, request: Request[dp.DescribeProducersRequest]
) -> dp.DescribeProducersResponse:
    body = request.body
    await ctx.replicas.await_logs(
        ((t.name, p) for t in body.topics for p in t.partition_indexes), UNTIMED_WAIT_S
    )  # new partitions' logs, made off the event loop
    topics = []
    for t in body.topics:
        denied = access.topic_error(ctx, access.READ, t.name)
        info = ctx.metadata.topic(t.name) if denied is None else None
        parts = []
        for p in t.partition_indexes:
            if info is None or not 0 <= p < info.partitions:
                parts.append(
                    dp.PartitionResponse(
                        partition_index=p,
                        error_code=int(denied or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        active_producers=[],
                    )
                )
                continue
            try:
                producers = ctx.replicas.partition_log(t.name, p).producer_state.producers
            except LogError as e:  # still being made past the wait, or refused
                parts.append(
                    dp.PartitionResponse(
                        partition_index=p, error_code=int(ErrorCode[e.error_name]), active_producers=[]
                    )
                )
                continue
            parts.append(
                dp.PartitionResponse(
                    partition_index=p,
                    error_code=0,
                    active_producers=[
                        dp.ProducerState(
                            producer_id=e.producer_id,
                            producer_epoch=e.epoch,
                            last_sequence=e.last_seq,
                            last_timestamp=e.last_timestamp,
                            coordinator_epoch=e.coordinator_epoch,
                            current_txn_start_offset=e.current_txn_first_offset,
                        )
                        for e in sorted(producers.values(), key=lambda e: e.producer_id)
                    ],
                )
            )
        topics.append(dp.TopicResponse(name=t.name, partitions=parts))
    return dp.DescribeProducersResponse(throttle_time_ms=0, topics=topics)
