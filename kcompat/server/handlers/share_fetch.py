"""Share groups (KIP-932), the partition leader's side: ShareFetch (key 78) v1-2 and
ShareAcknowledge (79) v1-2.

ShareFetch: the share session (epoch 0 opens, -1 closes, otherwise the next epoch), the
piggy-backed acknowledgements applied and made durable first, then records acquired from every
partition of the session, up to MaxRecords, waiting up to MaxWaitMs when there is nothing to
acquire. Each partition answers with the stored batches (file slices, sent with sendfile as a
Fetch's are) and the AcquiredRecords ranges (with their delivery counts) a client may deliver;
AcquisitionLockTimeoutMs is the group's lock duration.
MaxRecords is a soft limit (batch_optimized, KIP-1206): the log batch holding the last record it
allows is acquired to its end, as Kafka does, so a client is not sent one large batch again and
again for a few hundred records of it each time; nothing new is acquired once the in-flight
window (share.partition.max.record.locks) is full, but the batch begun may carry past it, as
Kafka's does. v2 adds ShareAcquireMode (1, record_limit: never past MaxRecords nor the window) and
IsRenewAck (RENEW acknowledgements, type 4).
ShareAcknowledge: acknowledgements only; epoch 0 is INVALID_SHARE_SESSION_EPOCH, -1 closes the session.
"""

from __future__ import annotations

import uuid
from typing import Any

from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.server.share.share_sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.share_acknowledge import SHARE_ACKNOWLEDGE
from kcompat.wire.messages.share_fetch import SHARE_FETCH
from kcompat.wire.protocol import Request
from kcompat.wire.types import share_acknowledge as sa
from kcompat.wire.types import share_fetch as sf

DEFAULT_MAX_RECORDS = 500
RECORD_LIMIT = 1  # ShareAcquireMode; 0 (batch_optimized) is v1's and the default


def _session(
    ctx: RequestContext, group: str, member: str, epoch: int, opening_allowed: bool
) -> ShareSession | ErrorCode:
    sessions = ctx.share.partitions.sessions
    if epoch == INITIAL_EPOCH:
        # As Kafka's SharePartitionManager: membership is the group coordinator's business, not
        # checked here (a member that left has its records released and its session closed).
        if not opening_allowed:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return sessions.open(group, member, ctx.share.is_member, getattr(ctx.client, "connection_id", ""))
    return sessions.next(group, member, epoch)


def _leader_error(ctx: RequestContext, t: Any, partition: int) -> tuple[ErrorCode, int, int] | None:
    """NOT_LEADER_OR_FOLLOWER (with the leader to name) when this broker does not lead the partition."""
    leader, epoch = ctx.metadata.leader_and_epoch(t, partition)
    if leader != ctx.identity.node_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, leader, epoch
    if ctx.replicas.cluster_mode:
        p = ctx.replicas.partitions.get((t.name, partition))
        if p is None or not p.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, leader, epoch
    return None


def _topic(ctx: RequestContext, topic_id: uuid.UUID, partition: int) -> tuple[Any, ErrorCode]:
    t = ctx.metadata.topics.by_id(topic_id)
    if t is None:
        return None, ErrorCode.UNKNOWN_TOPIC_ID
    if not 0 <= partition < t.partitions:
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if (denied := access.topic_error(ctx, access.READ, t.name)) is not None:
        return None, denied
    return t, ErrorCode.NONE


async def _acknowledge(
    ctx: RequestContext, group: str, member: str, topic_id: uuid.UUID, partition: int, batches: list[Any]
) -> ErrorCode:
    t, err = _topic(ctx, topic_id, partition)
    if t is None:
        return err
    if (refused := _leader_error(ctx, t, partition)) is not None:
        return refused[0]
    acks = [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches]
    return await ctx.share.partitions.acknowledge(group, member, t, partition, acks)


def _update_session(session: ShareSession, body: sf.ShareFetchRequest) -> None:
    """The request's partitions join the session; its forgotten ones leave it."""
    for ft in body.forgotten_topics_data:
        for p in ft.partitions:
            session.partitions.pop((ft.topic_id, p), None)
    if body.share_session_epoch != FINAL_EPOCH:
        for ftopic in body.topics:
            for fp in ftopic.partitions:
                session.partitions[(ftopic.topic_id, fp.partition_index)] = None


@handles(SHARE_FETCH, "1-2")
async def share_fetch(ctx: RequestContext, request: Request[sf.ShareFetchRequest]) -> sf.ShareFetchResponse:
    body = request.body
    group, member, epoch = body.group_id or "", body.member_id or "", body.share_session_epoch
    manager = ctx.share.partitions
    settings = manager.settings(group)
    lock_ms = settings.limits.lock_duration_ms

    def refuse(err: ErrorCode, message: str | None = None) -> sf.ShareFetchResponse:
        return sf.ShareFetchResponse(
            error_code=int(err), error_message=message, acquisition_lock_timeout_ms=lock_ms
        )

    if (denied := access.group_error(ctx, access.READ, group)) is not None:
        return refuse(denied)
    has_acks = any(p.acknowledgement_batches for t in body.topics for p in t.partitions)
    if epoch == INITIAL_EPOCH and has_acks:
        return refuse(
            ErrorCode.INVALID_REQUEST, "Acknowledgements are not allowed when opening a share session."
        )
    session = _session(ctx, group, member, epoch, True)
    if isinstance(session, ErrorCode):
        return refuse(session)
    _update_session(session, body)
    answers: dict[tuple[uuid.UUID, int], sf.PartitionData] = {}
    endpoints: set[int] = set()

    def answer(topic_id: uuid.UUID, partition: int) -> sf.PartitionData:
        pd = answers.get((topic_id, partition))
        if pd is None:
            pd = answers[(topic_id, partition)] = sf.PartitionData(
                partition_index=partition,
                current_leader=sf.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                records=b"",
            )
        return pd

    for ftopic in body.topics:
        for fp in ftopic.partitions:
            if fp.acknowledgement_batches:
                err = await _acknowledge(
                    ctx, group, member, ftopic.topic_id, fp.partition_index, fp.acknowledgement_batches
                )
                answer(ftopic.topic_id, fp.partition_index).acknowledge_error_code = int(err)
    if epoch == FINAL_EPOCH:
        await manager.release_member(group, member)
    else:
        await _acquire_all(ctx, body, session, settings.read_committed, answer, endpoints, wait=not has_acks)
    return sf.ShareFetchResponse(
        throttle_time_ms=0,
        error_code=0,
        acquisition_lock_timeout_ms=lock_ms,
        responses=_by_topic(answers),
        node_endpoints=_endpoints(ctx, endpoints, sf.NodeEndpoint),
    )


async def _acquire_all(
    ctx: RequestContext,
    body: sf.ShareFetchRequest,
    session: ShareSession,
    read_committed: bool,
    answer: Any,
    endpoints: set[int],
    *,
    wait: bool,
) -> None:
    manager = ctx.share.partitions
    group, member = session.group_id, session.member_id
    max_records = body.max_records if body.max_records > 0 else DEFAULT_MAX_RECORDS
    strict = body.share_acquire_mode == RECORD_LIMIT
    deadline = ctx.now_ms + body.max_wait_ms
    keys = list(session.partitions)
    if keys:  # start at a different partition each time, so none is starved by MaxRecords
        k = session.epoch % len(keys)
        keys = keys[k:] + keys[:k]
    while True:
        records_left, bytes_left = max_records, body.max_bytes
        parked: list[tuple[str, int]] = []
        for topic_id, partition in keys:
            t, err = _topic(ctx, topic_id, partition)
            if t is None:
                answer(topic_id, partition).error_code = int(err)
                continue
            if (refused := _leader_error(ctx, t, partition)) is not None:
                pd = answer(topic_id, partition)
                pd.error_code = int(refused[0])
                pd.current_leader = sf.LeaderIdAndEpoch(leader_id=refused[1], leader_epoch=refused[2])
                if refused[1] >= 0:
                    endpoints.add(refused[1])
                continue
            parked.append((t.name, partition))
            if records_left <= 0 or bytes_left <= 0:
                continue
            sp = await manager.share_partition(group, t, partition)
            if isinstance(sp, ErrorCode):
                answer(topic_id, partition).error_code = int(sp)
                continue
            acquired, data = manager.acquire(
                sp, member, t, partition, records_left, bytes_left, read_committed, strict=strict
            )
            if acquired:
                pd = answer(topic_id, partition)
                pd.records = data
                pd.acquired_records = [
                    sf.AcquiredRecords(
                        first_offset=a.first, last_offset=a.last, delivery_count=a.delivery_count
                    )
                    for a in acquired
                ]
                records_left -= sum(a.last - a.first + 1 for a in acquired)
                bytes_left -= len(data)
        remaining = (deadline - ctx.now_ms) / 1000
        waiters = ctx.replicas.fetch_waiters
        if records_left < max_records or not wait or remaining <= 0 or not parked or waiters.closed:
            break
        await waiters.wait(parked, remaining)


def _by_topic(answers: dict[tuple[uuid.UUID, int], Any]) -> list[sf.ShareFetchableTopicResponse]:
    out: dict[uuid.UUID, sf.ShareFetchableTopicResponse] = {}
    for (tid, _), pd in answers.items():
        out.setdefault(tid, sf.ShareFetchableTopicResponse(topic_id=tid)).partitions.append(pd)
    return list(out.values())


def _endpoints(ctx: RequestContext, ids: set[int], cls: Any) -> list[Any]:
    if not ids:
        return []
    brokers = ctx.metadata.live_brokers(ctx.listener)
    if brokers is None:
        host, port = ctx.endpoint
        return [cls(node_id=ctx.identity.node_id, host=host, port=port, rack=ctx.identity.rack)]
    return [
        cls(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack) for b in brokers if b.node_id in ids
    ]


@handles(SHARE_ACKNOWLEDGE, "1-2")
async def share_acknowledge(
    ctx: RequestContext, request: Request[sa.ShareAcknowledgeRequest]
) -> sa.ShareAcknowledgeResponse:
    body = request.body
    group, member, epoch = body.group_id or "", body.member_id or "", body.share_session_epoch
    manager = ctx.share.partitions
    lock_ms = manager.settings(group).limits.lock_duration_ms
    if (denied := access.group_error(ctx, access.READ, group)) is not None:
        return sa.ShareAcknowledgeResponse(error_code=int(denied), acquisition_lock_timeout_ms=lock_ms)
    session = _session(ctx, group, member, epoch, False)
    if isinstance(session, ErrorCode):
        return sa.ShareAcknowledgeResponse(error_code=int(session), acquisition_lock_timeout_ms=lock_ms)
    responses = []
    for atopic in body.topics:
        parts = []
        for ap in atopic.partitions:
            err = await _acknowledge(
                ctx, group, member, atopic.topic_id, ap.partition_index, ap.acknowledgement_batches
            )
            parts.append(
                sa.PartitionData(
                    partition_index=ap.partition_index,
                    error_code=int(err),
                    current_leader=sa.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                )
            )
        responses.append(sa.ShareAcknowledgeTopicResponse(topic_id=atopic.topic_id, partitions=parts))
    if epoch == FINAL_EPOCH:
        await manager.release_member(group, member)
    return sa.ShareAcknowledgeResponse(
        throttle_time_ms=0, error_code=0, acquisition_lock_timeout_ms=lock_ms, responses=responses
    )
