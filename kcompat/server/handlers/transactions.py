"""Transactions: AddPartitionsToTxn (24) v0-5, AddOffsetsToTxn (25) v0-4, EndTxn (26) v0-5,
TxnOffsetCommit (28) v0-5; InitProducerId with a transactional id is in init_producer_id.py and
FindCoordinator key type 1 in groups.py. The decisions are the TransactionCoordinator's
(kcompat.coordinator.transaction), applied by txn_service.py.

Version notes:
* PRODUCER_FENCED exists from v2 of AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit
  (KIP-588); older versions get INVALID_PRODUCER_EPOCH for it, as Kafka answers them
* AddPartitionsToTxn v3: flexible;  v4: several transactions per request and VerifyOnly (KIP-890
  part 1: the answer says, per partition, whether it is in the open transaction; nothing changes),
  with a top-level error code;  v5: TRANSACTION_ABORTABLE may be returned (never here)
* AddOffsetsToTxn v3: flexible;  v4: TRANSACTION_ABORTABLE may be returned (never here)
* EndTxn v3: flexible;  v4: TRANSACTION_ABORTABLE;  v5: transactions v2 (KIP-890 part 2): the
  epoch is bumped on every commit and abort, and the answer carries the producer id and epoch to
  go on with (a new id once the epoch is exhausted)
* TxnOffsetCommit v2: committed_leader_epoch;  v3: generation_id/member_id/group_instance_id
  (KIP-447: a zombie's commit is refused as OffsetCommit's would be);  v4: TRANSACTION_ABORTABLE;
  v5: transactions v2: the group's `__consumer_offsets` partition is added to the transaction
  first (the implicit AddOffsetsToTxn; Kafka's broker sends AddPartitionsToTxn for it)
* WriteTxnMarkers (27) v1-2 (v0 is gone in Kafka 4): markers written straight into the partitions,
  as AdminClient.abortTransaction does for a hanging transaction; in cluster mode also the
  coordinator's markers from another broker (txn_channels.py), answered once replicated. A marker older than the partition's producer epoch: INVALID_PRODUCER_EPOCH;
  an unknown partition: UNKNOWN_TOPIC_OR_PARTITION. v2's transaction_version is accepted.
"""

from __future__ import annotations

from collections.abc import Sequence

from kcompat.coordinator import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kcompat.coordinator.transaction.coordinator import TV2
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.dispatcher import CloseConnection
from kcompat.server.groups.group_service import CoordinatorUnavailable
from kcompat.server.registry import handles
from kcompat.storage.topic_store import CONSUMER_OFFSETS
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.add_offsets_to_txn import ADD_OFFSETS_TO_TXN
from kcompat.wire.messages.add_partitions_to_txn import ADD_PARTITIONS_TO_TXN
from kcompat.wire.messages.end_txn import END_TXN
from kcompat.wire.messages.txn_offset_commit import TXN_OFFSET_COMMIT
from kcompat.wire.messages.write_txn_markers import WRITE_TXN_MARKERS
from kcompat.wire.protocol import Request
from kcompat.wire.types import txn_offset_commit as toc
from kcompat.wire.types.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kcompat.wire.types.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
)
from kcompat.wire.types.end_txn import EndTxnRequest, EndTxnResponse
from kcompat.wire.types.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

FENCED_CODE_VERSION = 2  # the first version of these APIs that knows PRODUCER_FENCED
BATCHED = 4  # AddPartitionsToTxn: several transactions, VerifyOnly
TV2_END_TXN = 5  # EndTxn of transactions v2: the epoch bump
TRANSACTION_ABORTABLE_TXN_OFFSET_COMMIT = 4  # the first TxnOffsetCommit that knows TRANSACTION_ABORTABLE
TV2_TXN_OFFSET_COMMIT = 5  # TxnOffsetCommit of transactions v2: the implicit AddOffsetsToTxn


def fenced_as(error: ErrorCode, version: int, since: int = FENCED_CODE_VERSION) -> int:
    if error == ErrorCode.PRODUCER_FENCED and version < since:
        return int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return int(error)


# --- AddPartitionsToTxn ------------------------------------------------------------------------


@handles(ADD_PARTITIONS_TO_TXN, "0-5")
async def add_partitions_to_txn(
    ctx: RequestContext, request: Request[AddPartitionsToTxnRequest]
) -> AddPartitionsToTxnResponse:
    body = request.body
    v = request.api_version
    if v < BATCHED:
        results = await _add_partitions(
            ctx,
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            body.v3_and_below_topics,
            False,
            v,
        )
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)
    out = []
    for txn in body.transactions:
        results = await _add_partitions(
            ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, txn.verify_only, v
        )
        out.append(AddPartitionsToTxnResult(transactional_id=txn.transactional_id, topic_results=results))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=out)


async def _add_partitions(
    ctx: RequestContext,
    txn_id: str,
    pid: int,
    epoch: int,
    topics: list[AddPartitionsToTxnTopic],
    verify_only: bool,
    v: int,
) -> list[AddPartitionsToTxnTopicResult]:
    svc = ctx.transactions
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    codes: dict[tuple[str, int], int] = {}
    unknown = [tp for tp in wanted if not _partition_exists(ctx, *tp)]
    if denied := access.txn_partitions_denied(ctx, txn_id, wanted):
        codes = {tp: int(denied.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED)) for tp in wanted}
    elif verify_only and (here := svc.not_here(txn_id)):
        codes = dict.fromkeys(wanted, int(here))
    elif verify_only:
        codes = {tp: int(code) for tp, code in svc.coordinator.verify(txn_id, pid, epoch, wanted).items()}
    elif unknown:
        # Kafka adds nothing when a partition is unknown: those get the error, the others OPERATION_NOT_ATTEMPTED.
        for tp in wanted:
            codes[tp] = int(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
            )
    else:  # v4+ comes from a partition leader adding for a transactions v2 producer (KIP-890 part 2)
        tv = TV2 if v >= BATCHED else 0
        r = await svc.run(
            lambda now: svc.coordinator.add_partitions(
                txn_id, pid, epoch, wanted, now, client_transaction_version=tv
            ),
            txn_id,
        )
        codes = dict.fromkeys(wanted, fenced_as(r.error, v))
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
        )
    return [
        AddPartitionsToTxnTopicResult(name=t, results_by_partition=parts) for t, parts in by_topic.items()
    ]


def _partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    t = ctx.metadata.topic(topic)
    return t is not None and 0 <= partition < t.partitions


# --- AddOffsetsToTxn ---------------------------------------------------------------------------


@handles(ADD_OFFSETS_TO_TXN, "0-4")
async def add_offsets_to_txn(
    ctx: RequestContext, request: Request[AddOffsetsToTxnRequest]
) -> AddOffsetsToTxnResponse:
    body = request.body
    svc = ctx.transactions
    if (denied := access.txn_group_error(ctx, body.transactional_id, body.group_id)) is not None:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=int(denied))
    await ctx.groups.ensure_topic()
    tp = (CONSUMER_OFFSETS, svc.offsets_partition_of(body.group_id))
    r = await svc.run(
        lambda now: svc.coordinator.add_partitions(
            body.transactional_id, body.producer_id, body.producer_epoch, [tp], now
        ),
        body.transactional_id,
    )
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=fenced_as(r.error, request.api_version))


# --- EndTxn ------------------------------------------------------------------------------------


@handles(END_TXN, "0-5")
async def end_txn(ctx: RequestContext, request: Request[EndTxnRequest]) -> EndTxnResponse:
    body = request.body
    svc = ctx.transactions
    if (denied := access.transactional_id_error(ctx, access.WRITE, body.transactional_id)) is not None:
        return EndTxnResponse(throttle_time_ms=0, error_code=int(denied))
    tv = TV2 if request.api_version >= TV2_END_TXN else 0
    r = await svc.run(
        lambda now: svc.coordinator.end_txn(
            body.transactional_id,
            body.producer_id,
            body.producer_epoch,
            body.committed,
            now,
            client_transaction_version=tv,
            new_producer_id=svc.new_producer_id,
        ),
        body.transactional_id,
    )
    ok = r.error == ErrorCode.NONE
    return EndTxnResponse(
        throttle_time_ms=0,
        error_code=fenced_as(r.error, request.api_version),
        producer_id=r.producer_id if ok else -1,
        producer_epoch=r.producer_epoch if ok else -1,
    )


# --- TxnOffsetCommit ---------------------------------------------------------------------------


def _refused(
    topics: Sequence[toc.TxnOffsetCommitRequestTopic], code: int
) -> list[toc.TxnOffsetCommitResponseTopic]:
    return [
        toc.TxnOffsetCommitResponseTopic(
            name=t.name,
            partitions=[
                toc.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                for p in t.partitions
            ],
        )
        for t in topics
    ]


@handles(TXN_OFFSET_COMMIT, "0-5")
async def txn_offset_commit(
    ctx: RequestContext, request: Request[toc.TxnOffsetCommitRequest]
) -> toc.TxnOffsetCommitResponse:
    """KafkaApis' order: WRITE on the transactional id and READ on the group refuse every
    partition; then READ on each topic: a refused topic's partitions are answered
    TOPIC_AUTHORIZATION_FAILED and left out of what the coordinator sees."""
    body = request.body
    if (denied := access.txn_group_error(ctx, body.transactional_id, body.group_id)) is not None:
        return toc.TxnOffsetCommitResponse(throttle_time_ms=0, topics=_refused(body.topics, int(denied)))
    names = access.topics_denied(ctx, access.READ, [t.name for t in body.topics])
    if not names:
        return await _txn_offset_commit(ctx, request)
    refused = _refused([t for t in body.topics if t.name in names], int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    body.topics = [t for t in body.topics if t.name not in names]
    if not body.topics:
        return toc.TxnOffsetCommitResponse(throttle_time_ms=0, topics=refused)
    answer = await _txn_offset_commit(ctx, request)
    answer.topics.extend(refused)
    return answer


async def _txn_offset_commit(
    ctx: RequestContext, request: Request[toc.TxnOffsetCommitRequest]
) -> toc.TxnOffsetCommitResponse:
    body = request.body
    v = request.api_version
    svc = ctx.transactions
    groups = ctx.groups

    def answer(code: int) -> toc.TxnOffsetCommitResponse:
        return toc.TxnOffsetCommitResponse(throttle_time_ms=0, topics=_refused(body.topics, code))

    if not body.group_id:
        return answer(int(ErrorCode.INVALID_GROUP_ID))
    await groups.ensure_topic()
    tp = (CONSUMER_OFFSETS, svc.offsets_partition_of(body.group_id))
    if svc.not_here(body.transactional_id):
        # Cluster mode, the transaction coordinator on another broker: ask it whether the group's
        # partition is in the transaction (v5, transactions v2: add it there), as Kafka 4.3 does.
        code, _ = await svc.verify_elsewhere(
            body.transactional_id,
            body.producer_id,
            body.producer_epoch,
            tp,
            transaction_abortable=v >= TRANSACTION_ABORTABLE_TXN_OFFSET_COMMIT,
            add=v >= TV2_TXN_OFFSET_COMMIT,
        )
        if code:
            return answer(_verification_code(code, v))
    elif v >= TV2_TXN_OFFSET_COMMIT:  # transactions v2: the implicit AddOffsetsToTxn
        r = await svc.run(
            lambda now: svc.coordinator.add_partitions(
                body.transactional_id,
                body.producer_id,
                body.producer_epoch,
                [tp],
                now,
                client_transaction_version=TV2,
            )
        )
        if r.error:
            return answer(int(r.error))
    if not svc.not_here(body.transactional_id):
        m = svc.coordinator.txns.get(body.transactional_id)
        if m is None or m.producer_id != body.producer_id:
            return answer(int(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        error = svc.coordinator.in_transaction(body.producer_id, body.producer_epoch, tp)
        if error == ErrorCode.INVALID_PRODUCER_EPOCH:
            return answer(fenced_as(ErrorCode.PRODUCER_FENCED, v))
        if error:  # AddOffsetsToTxn did not come first (or the transaction is ending)
            return answer(int(ErrorCode.INVALID_TXN_STATE))
    topics = [
        OffsetCommitRequestTopic(
            t.name,
            [
                OffsetCommitRequestPartition(
                    p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata
                )
                for p in t.partitions
            ],
        )
        for t in body.topics
    ]
    try:
        resp = await groups.run(
            lambda now: groups.coordinator.txn_commit_offsets(
                now,
                group_id=body.group_id,
                producer_id=body.producer_id,
                topics=topics,
                generation_id=body.generation_id,
                member_id=body.member_id,
                group_instance_id=body.group_instance_id,
                partition_exists=groups.partition_exists,
            ),
            producer=(body.producer_id, body.producer_epoch),
            # Cluster mode: only while the group's shard is loaded here (NOT_COORDINATOR,
            # COORDINATOR_LOAD_IN_PROGRESS otherwise), as for any group write.
            group=body.group_id,
            refuse=lambda code: answer(int(code)),
        )
    except CoordinatorUnavailable:
        raise CloseConnection("the group coordinator is shutting down") from None
    if isinstance(resp, toc.TxnOffsetCommitResponse):
        return resp  # refused
    return toc.TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            toc.TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    toc.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=int(p.error_code)
                    )
                    for p in t.partitions
                ],
            )
            for t in resp
        ],
    )


def _verification_code(code: ErrorCode, v: int) -> int:
    """TxnOffsetCommit's code for a failed verification at a remote coordinator (Produce's codes
    come back from the verifier): the retriable ones as COORDINATOR_NOT_AVAILABLE, a fenced epoch
    as PRODUCER_FENCED."""
    if code == ErrorCode.NOT_ENOUGH_REPLICAS:
        return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if code == ErrorCode.INVALID_PRODUCER_EPOCH:
        return fenced_as(ErrorCode.PRODUCER_FENCED, v)
    return int(code)


# --- WriteTxnMarkers ---------------------------------------------------------------------------


@handles(WRITE_TXN_MARKERS, "1-2")
async def write_txn_markers(
    ctx: RequestContext, request: Request[WriteTxnMarkersRequest]
) -> WriteTxnMarkersResponse:
    svc = ctx.transactions
    denied = access.cluster_error(ctx, access.CLUSTER_ACTION)  # a broker's (or an admin's abort) right
    out = []
    for m in request.body.markers:
        tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        if denied:
            codes = dict.fromkeys(tps, denied)
        else:  # cluster mode: each answered once replicated (acks=all)
            codes = await svc.writes.write_markers_request(
                tps, m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch
            )
        topics = [
            WritableTxnMarkerTopicResult(
                name=t.name,
                partitions=[
                    WritableTxnMarkerPartitionResult(partition_index=p, error_code=int(codes[(t.name, p)]))
                    for p in t.partition_indexes
                ],
            )
            for t in m.topics
        ]
        out.append(WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=out)
