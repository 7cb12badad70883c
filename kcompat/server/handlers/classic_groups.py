"""Classic groups (the rebalance protocol run by the clients): JoinGroup (key 11) v0-9,
SyncGroup (14) v0-5, Heartbeat (12) v0-4, LeaveGroup (13) v0-5.

JoinGroup version notes:
* v0: no rebalance_timeout_ms (the session timeout is used, as Kafka does)
* v1: rebalance_timeout_ms;  v2: throttle_time_ms;  v3: no change
* v4: an unknown member first gets MEMBER_ID_REQUIRED with its new id (KIP-394)
* v5: group_instance_id (static membership, KIP-345);  v6: flexible
* v7: protocol_type in the response, protocol_name nullable (below v7 None is sent as "")
* v8: reason (logged nowhere, as it is only informative);  v9: skip_assignment (below v9 a static
  leader that rejoins with nothing changed gets an empty member list instead)

SyncGroup version notes:
* v1: throttle_time_ms;  v2: no change;  v3: group_instance_id;  v4: flexible
* v5: protocol_type/protocol_name checked against the group's (INCONSISTENT_GROUP_PROTOCOL) and
  echoed in the response

Heartbeat version notes: v1 throttle_time_ms; v2 no change; v3 group_instance_id; v4 flexible.
In cluster mode a heartbeat for a group whose shard is still loading is answered NONE, as Kafka's
GroupCoordinatorService does; NOT_COORDINATOR where the shard is not here.

LeaveGroup version notes:
* v0-2: one member_id; the answer's error_code is the group's error, else the member's
* v1: throttle_time_ms;  v2: no change
* v3: batched members with group_instance_id, an error per member (KIP-345)
* v4: flexible;  v5: reason per member
"""

from __future__ import annotations

from kcompat.coordinator import JoinGroupProtocol, MemberIdentity, SyncGroupAssignment
from kcompat.coordinator.messages import JoinGroupResult, LeaveGroupResult
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.handlers.group_coordinator import client_host, coordinate
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.heartbeat import HEARTBEAT
from kcompat.wire.messages.join_group import JOIN_GROUP
from kcompat.wire.messages.leave_group import LEAVE_GROUP
from kcompat.wire.messages.sync_group import SYNC_GROUP
from kcompat.wire.protocol import Request
from kcompat.wire.types import heartbeat as hb
from kcompat.wire.types import join_group as jg
from kcompat.wire.types import leave_group as lg
from kcompat.wire.types import sync_group as sg


@handles(JOIN_GROUP, "0-9")
async def join_group(ctx: RequestContext, request: Request[jg.JoinGroupRequest]) -> jg.JoinGroupResponse:
    body = request.body
    v = request.api_version
    if (denied := access.group_error(ctx, access.READ, body.group_id)) is not None:
        return jg.JoinGroupResponse(error_code=int(denied), member_id=body.member_id)
    if ctx.groups.share_group(body.group_id) is not None:  # a share group's id, as Kafka answers it
        return jg.JoinGroupResponse(error_code=int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL), member_id="")
    protocols = [JoinGroupProtocol(p.name, bytes(p.metadata)) for p in body.protocols]
    host = client_host(ctx)
    resp = await coordinate(
        ctx,
        lambda now: ctx.groups.coordinator.join_group(
            now,
            group_id=body.group_id,
            member_id=body.member_id,
            protocol_type=body.protocol_type,
            protocols=protocols,
            session_timeout_ms=body.session_timeout_ms,
            rebalance_timeout_ms=body.rebalance_timeout_ms,
            group_instance_id=body.group_instance_id,
            client_id=request.client_id or "",
            client_host=host,
            require_known_member_id=v >= 4,
        ),
        group=body.group_id,
        refuse=lambda e: JoinGroupResult(int(e), member_id=body.member_id),
    )
    members = [] if resp.skip_assignment and v < 9 else resp.members
    return jg.JoinGroupResponse(
        throttle_time_ms=0,
        error_code=int(resp.error_code),
        generation_id=resp.generation_id,
        protocol_type=resp.protocol_type,
        protocol_name=resp.protocol_name if resp.protocol_name is not None or v >= 7 else "",
        leader=resp.leader,
        skip_assignment=resp.skip_assignment,
        member_id=resp.member_id,
        members=[
            jg.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in members
        ],
    )


@handles(SYNC_GROUP, "0-5")
async def sync_group(ctx: RequestContext, request: Request[sg.SyncGroupRequest]) -> sg.SyncGroupResponse:
    body = request.body
    if (denied := access.group_error(ctx, access.READ, body.group_id)) is not None:
        return sg.SyncGroupResponse(error_code=int(denied))
    assignments = [SyncGroupAssignment(a.member_id, bytes(a.assignment)) for a in body.assignments]
    return await coordinate(
        ctx,
        lambda now: ctx.groups.coordinator.sync_group(
            now,
            group_id=body.group_id,
            member_id=body.member_id,
            generation_id=body.generation_id,
            assignments=assignments,
            group_instance_id=body.group_instance_id,
            protocol_type=body.protocol_type,
            protocol_name=body.protocol_name,
        ),
        group=body.group_id,
        refuse=lambda e: sg.SyncGroupResponse(error_code=int(e)),
    )


@handles(HEARTBEAT, "0-4")
async def heartbeat(ctx: RequestContext, request: Request[hb.HeartbeatRequest]) -> hb.HeartbeatResponse:
    body = request.body
    if (denied := access.group_error(ctx, access.READ, body.group_id)) is not None:
        return hb.HeartbeatResponse(error_code=int(denied))
    return await coordinate(
        ctx,
        lambda now: ctx.groups.coordinator.heartbeat(
            now,
            group_id=body.group_id,
            member_id=body.member_id,
            generation_id=body.generation_id,
            group_instance_id=body.group_instance_id,
        ),
        creates=False,
        group=body.group_id,
        refuse=_heartbeat_refused,
    )


def _heartbeat_refused(error: ErrorCode) -> hb.HeartbeatResponse:
    """While the group's shard is loading Kafka answers a heartbeat NONE, blindly: the member keeps
    its session and its partitions until the coordinator knows it again (the loaded GroupMetadata)."""
    code = ErrorCode.NONE if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else error
    return hb.HeartbeatResponse(error_code=int(code))


@handles(LEAVE_GROUP, "0-5")
async def leave_group(ctx: RequestContext, request: Request[lg.LeaveGroupRequest]) -> lg.LeaveGroupResponse:
    body = request.body
    v = request.api_version
    if (denied := access.group_error(ctx, access.READ, body.group_id)) is not None:
        return lg.LeaveGroupResponse(error_code=int(denied))
    if v < 3:
        members = [MemberIdentity(body.member_id)]
    else:
        members = [MemberIdentity(m.member_id, m.group_instance_id, m.reason) for m in body.members]
    resp = await coordinate(
        ctx,
        lambda now: ctx.groups.coordinator.leave_group(
            now,
            group_id=body.group_id,
            members=members,
        ),
        creates=False,
        group=body.group_id,
        refuse=lambda e: LeaveGroupResult(int(e)),
    )
    if v < 3:
        return lg.LeaveGroupResponse(throttle_time_ms=0, error_code=int(resp.legacy_error_code))
    return lg.LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=int(resp.error_code),
        members=[
            lg.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=int(m.error_code)
            )
            for m in resp.members
        ],
    )
