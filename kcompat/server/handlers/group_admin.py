"""Group administration: DescribeGroups (key 15) v0-6, ListGroups (16) v0-5, DeleteGroups (42) v0-2.

DescribeGroups version notes:
* v1: throttle_time_ms;  v2: no change
* v3: authorized_operations (INT32_MIN unless asked for; all group operations when asked: no ACLs)
* v4: group_instance_id of members;  v5: flexible
* v6: error_message; an unknown group, or a KIP-848 group, gets GROUP_ID_NOT_FOUND (KIP-1043)
Below v6 unknown groups and KIP-848 groups are described as Dead with no error, as Kafka does.

ListGroups version notes: v1 throttle_time_ms; v2 no change; v3 flexible; v4 states_filter and
group_state; v5 types_filter ("classic", "consumer") and group_type.

DeleteGroups version notes: v1 no change; v2 flexible. Only Empty groups (or consumer groups with no
members) can be deleted (NON_EMPTY_GROUP); their committed offsets go with them.

In cluster mode a batched request names groups of other coordinators too: those get the error this
broker's shards give them (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS).
"""

from __future__ import annotations

from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.handlers.group_coordinator import GROUP_OPERATIONS, coordinate
from kcompat.server.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.delete_groups import DELETE_GROUPS
from kcompat.wire.messages.describe_groups import DESCRIBE_GROUPS
from kcompat.wire.messages.list_groups import LIST_GROUPS
from kcompat.wire.protocol import Request
from kcompat.wire.types import delete_groups as dlg
from kcompat.wire.types import describe_groups as dg
from kcompat.wire.types import list_groups as lsg

DEAD = "Dead"  # the state DescribeGroups gives unknown groups below v6


@handles(DESCRIBE_GROUPS, "0-6")
async def describe_groups(
    ctx: RequestContext, request: Request[dg.DescribeGroupsRequest]
) -> dg.DescribeGroupsResponse:
    body = request.body
    ops = GROUP_OPERATIONS if body.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    coordinator = ctx.groups.coordinator
    groups = await coordinate(
        ctx, lambda now: coordinator.describe_groups(now, list(body.groups)), creates=False
    )
    for g in groups:
        g.authorized_operations = access.group_operations(ctx, g.group_id, ops)
    elsewhere = _not_here(ctx, body.groups)
    for name in body.groups:
        if (denied := access.group_error(ctx, access.DESCRIBE, name)) is not None:
            elsewhere[name] = denied
    groups = [
        dg.DescribedGroup(error_code=int(elsewhere[g.group_id]), group_id=g.group_id)
        if g.group_id in elsewhere
        else g
        for g in groups
    ]
    return dg.DescribeGroupsResponse(
        throttle_time_ms=0,
        groups=[
            _not_found(
                g.group_id, g.group_id in coordinator.groups or ctx.groups.share_group(g.group_id) is not None
            )
            if request.api_version >= 6 and g.error_code == 0 and g.group_state == DEAD
            else g
            for g in groups
        ],
    )


def _not_here(ctx: RequestContext, group_ids: list[str]) -> dict[str, ErrorCode]:
    """Cluster mode: the groups of a batched request this broker does not coordinate now, with the
    error each gets (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS); empty on a single node."""
    shards = ctx.groups.shards
    errors = {g: shards.error(g) for g in group_ids}
    return {g: e for g, e in errors.items() if e != ErrorCode.NONE}


def _not_found(group_id: str, exists: bool) -> dg.DescribedGroup:
    """DescribeGroups v6+ (KIP-1043): what older versions describe as a Dead group."""
    reason = "is not a classic group" if exists else "not found"
    return dg.DescribedGroup(
        error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),
        error_message=f"Group {group_id} {reason}.",
        group_id=group_id,
    )


@handles(LIST_GROUPS, "0-5")
async def list_groups(ctx: RequestContext, request: Request[lsg.ListGroupsRequest]) -> lsg.ListGroupsResponse:
    body = request.body
    v = request.api_version
    states = list(body.states_filter) if v >= 4 else []
    types = list(body.types_filter) if v >= 5 else []
    groups = await coordinate(
        ctx,
        lambda now: ctx.groups.coordinator.list_groups(
            now,
            states_filter=states,
            types_filter=types,
        ),
        creates=False,
    )
    groups = access.describable_groups(ctx, groups + _share_groups(ctx, states, types))
    return lsg.ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=groups)


def _share_groups(ctx: RequestContext, states: list[str], types: list[str]) -> list[lsg.ListedGroup]:
    """The share groups (KIP-932), listed with protocol type and group type `share`; filters match
    case-insensitively, as Kafka's."""
    if types and "share" not in {t.lower() for t in types}:
        return []
    wanted = {s.lower() for s in states}
    return [
        lsg.ListedGroup(
            group_id=g.group_id, protocol_type="share", group_state=g.state.value, group_type="share"
        )
        for g in ctx.groups.share_groups.groups.values()
        if not wanted or g.state.value.lower() in wanted
    ]


@handles(DELETE_GROUPS, "0-2")
async def delete_groups(
    ctx: RequestContext, request: Request[dlg.DeleteGroupsRequest]
) -> dlg.DeleteGroupsResponse:
    names = list(request.body.groups_names)
    denied = access.groups_denied(ctx, access.DELETE, names)
    elsewhere = _not_here(ctx, [n for n in names if n not in denied])
    here = [g for g in names if g not in elsewhere and g not in denied]
    shares = [g for g in here if ctx.groups.share_group(g) is not None]
    here = [g for g in here if g not in shares]
    results = await coordinate(
        ctx, lambda now: ctx.groups.coordinator.delete_groups(now, here), creates=False
    )
    results += [
        dlg.DeletableGroupResult(group_id=g, error_code=int(await ctx.share.delete_group(g))) for g in shares
    ]
    results += [dlg.DeletableGroupResult(group_id=g, error_code=int(e)) for g, e in elsewhere.items()]
    results += [dlg.DeletableGroupResult(group_id=n, error_code=int(e)) for n, e in denied.items()]
    return dlg.DeleteGroupsResponse(throttle_time_ms=0, results=results)
