"""FindCoordinator (key 10) v0-6: which broker coordinates a group or a transactional id.

Version notes:
* v0: one group id; this broker, which coordinates every group (__consumer_offsets is created here
  if it does not exist, as Kafka does)
* v1: key_type (0 group, 1 transaction), throttle_time_ms, error_message
* v2: no change;  v3: flexible
* v4: batched coordinator_keys, one answer per key (clients fall back to one key per request below)
* v5: no change (TRANSACTION_ABORTABLE may be returned);  v6: key_type 2 (share coordinator)
A transaction key (1) is coordinated by this node too (`__transaction_state` is created first), as
is a share key (2, "group:topicId:partition", asked by share-partition leaders, which need
CLUSTER_ACTION; `__share_group_state` is created first). Unknown key types, a share key before v6
or one not of that form get INVALID_REQUEST. In cluster mode the coordinator is the leader of the
key's partition of that topic.
"""

from __future__ import annotations

from collections.abc import Callable

from kcompat.coordinator.record_pair import offsets_partition
from kcompat.kafka_uuid import from_base64
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.errors import ApiError
from kcompat.server.registry import handles
from kcompat.storage.topic_store import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TRANSACTION_STATE
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.find_coordinator import FIND_COORDINATOR
from kcompat.wire.protocol import Request
from kcompat.wire.types.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse

GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2
_TOPICS = {GROUP_KEY: CONSUMER_OFFSETS, TRANSACTION_KEY: TRANSACTION_STATE, SHARE_KEY: SHARE_GROUP_STATE}


@handles(FIND_COORDINATOR, "0-6")
async def find_coordinator(
    ctx: RequestContext, request: Request[FindCoordinatorRequest]
) -> FindCoordinatorResponse:
    body = request.body
    if request.api_version >= 4:
        answers = [await _coordinator_for(ctx, body.key_type, key) for key in body.coordinator_keys]
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=answers)
    one = await _coordinator_for(ctx, body.key_type, body.key)
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=one.error_code,
        error_message=one.error_message,
        node_id=one.node_id,
        host=one.host,
        port=one.port,
    )


async def _coordinator_for(ctx: RequestContext, key_type: int, key: str) -> Coordinator:
    def fail(error: ErrorCode, message: str) -> Coordinator:
        return Coordinator(
            key=key, node_id=-1, host="", port=-1, error_code=int(error), error_message=message
        )

    if key_type not in _TOPICS or (key_type == SHARE_KEY and ctx.version < 6):
        return fail(
            ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type} in FindCoordinator request"
        )
    if key_type == SHARE_KEY:
        if (denied := access.cluster_error(ctx, access.CLUSTER_ACTION)) is not None:
            return fail(denied, "Not authorized to find the share coordinator (CLUSTER_ACTION)")
        if not valid_share_key(key):
            return fail(
                ErrorCode.INVALID_REQUEST, f"Share coordinator key {key!r} is not groupId:topicId:partition"
            )
    elif (denied := access.coordinator_key_error(ctx, key_type == GROUP_KEY, key)) is not None:
        return fail(denied, f"Not authorized to find the coordinator of {key}")
    if ctx.replicas.cluster_mode:
        return await _coordinator_in_cluster(ctx, key_type, key, fail)
    topic = _TOPICS[key_type]
    try:
        await _partitions(ctx, key_type)
    except ApiError as e:
        return fail(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create {topic}: {e.message or e.error.name}"
        )
    host, port = ctx.endpoint
    return Coordinator(
        key=key, node_id=ctx.identity.node_id, host=host, port=port, error_code=0, error_message=None
    )


async def _coordinator_in_cluster(
    ctx: RequestContext, key_type: int, key: str, fail: Callable[[ErrorCode, str], Coordinator]
) -> Coordinator:
    """The leader of the key's __consumer_offsets (groups) or __transaction_state partition, on the
    request's listener (the topic is created through the controller first: COORDINATOR_NOT_AVAILABLE
    meanwhile, as Kafka)."""
    topic = _TOPICS[key_type]
    try:
        n = await _partitions(ctx, key_type)
    except ApiError as e:
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic}: {e.message or e.error.name}")
    t = ctx.metadata.topic(topic)
    assert t is not None
    leader, _ = ctx.metadata.leader_and_epoch(t, offsets_partition(key, n))
    endpoint = next((b for b in ctx.metadata.live_brokers(ctx.listener) or () if b.node_id == leader), None)
    if endpoint is None:  # no leader, or a fenced one (just killed, say): the client asks again
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
    return Coordinator(
        key=key, node_id=leader, host=endpoint.host, port=endpoint.port, error_code=0, error_message=None
    )


async def _partitions(ctx: RequestContext, key_type: int) -> int:
    """The partition count of the key type's topic, creating the topic first if need be."""
    if key_type == GROUP_KEY:
        return await ctx.groups.ensure_topic()
    if key_type == TRANSACTION_KEY:
        return (await ctx.transactions.ensure_topic()).partitions
    return await ctx.share_coordinator.ensure_topic()


def valid_share_key(key: str) -> bool:
    """Kafka's SharePartitionKey form: "groupId:topicId:partition" (the group id may hold ':')."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[2].isdigit():
        return False
    try:
        from_base64(parts[1])
    except ValueError:
        return False
    return True
