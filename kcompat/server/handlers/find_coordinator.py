"""FindCoordinator (key 10) v0-6: which broker coordinates a group or a transactional id.

Version notes:
* v0: one group id; this broker, which coordinates every group (__consumer_offsets is created here
  if it does not exist, as Kafka does)
* v1: key_type (0 group, 1 transaction), throttle_time_ms, error_message
* v2: no change;  v3: flexible
* v4: batched coordinator_keys, one answer per key (clients fall back to one key per request below)
* v5: no change (TRANSACTION_ABORTABLE may be returned);  v6: key_type 2 (share groups)
A transaction key (1) is coordinated by this node too (`__transaction_state` is created first);
share-group and unknown key types get INVALID_REQUEST. In cluster mode the coordinator is the
leader of the key's partition of that topic.
"""

from __future__ import annotations

from collections.abc import Callable

from kcompat.coordinator.records import offsets_partition
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.errors import ApiError
from kcompat.server.registry import handles
from kcompat.storage.topic_store import CONSUMER_OFFSETS, TRANSACTION_STATE
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.find_coordinator import FIND_COORDINATOR
from kcompat.wire.protocol import Request
from kcompat.wire.types.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse

GROUP_KEY = 0
TRANSACTION_KEY = 1


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

    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        return fail(
            ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type} in FindCoordinator request"
        )
    if (denied := access.coordinator_key_error(ctx, key_type == GROUP_KEY, key)) is not None:
        return fail(denied, f"Not authorized to find the coordinator of {key}")
    if ctx.replicas.cluster_mode:
        return await _coordinator_in_cluster(ctx, key_type, key, fail)
    topic = CONSUMER_OFFSETS if key_type == GROUP_KEY else TRANSACTION_STATE
    try:
        if key_type == GROUP_KEY:
            await ctx.groups.ensure_topic()
        else:
            await ctx.transactions.ensure_topic()
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
    topic = CONSUMER_OFFSETS if key_type == GROUP_KEY else TRANSACTION_STATE
    try:
        if key_type == GROUP_KEY:
            n = await ctx.groups.ensure_topic()
        else:
            n = (await ctx.transactions.ensure_topic()).partitions
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
