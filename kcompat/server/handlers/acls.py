"""DescribeAcls (key 29), CreateAcls (key 30), DeleteAcls (key 31): v1-3 each (v0 is gone from
Kafka 4; v1 added the pattern type, KIP-290; v2 flexible; v3 no change).

Without an authorizer (authorizer.class.name empty) each answers SECURITY_DISABLED, as Kafka does.
DescribeAcls needs DESCRIBE on the cluster, Create/DeleteAcls ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise). Creating an ACL that exists succeeds and changes
nothing; a binding Kafka would refuse (UNKNOWN/ANY values, an empty name, a CLUSTER resource not
named kafka-cluster, a principal without "Type:") gets INVALID_REQUEST and the others are applied.
The ACL set is saved (kcompat.storage.acl_store) before the answer.
In cluster mode Create/DeleteAcls are forwarded to the controller (forwarding_manager) and never
reach these handlers; the ACLs are the metadata image's (AccessControlEntryRecord), which
DescribeAcls reads through the same authorizer.
"""

from __future__ import annotations

from collections.abc import Iterable

from kcompat.security.authorizer import AclBinding, AclFilter, binding_error, filter_error
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_acls import CREATE_ACLS
from kcompat.wire.messages.delete_acls import DELETE_ACLS
from kcompat.wire.messages.describe_acls import DESCRIBE_ACLS
from kcompat.wire.protocol import Request
from kcompat.wire.types.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse
from kcompat.wire.types.delete_acls import (
    DeleteAclsFilter,
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from kcompat.wire.types.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)

_DISABLED = "No Authorizer is configured."


def _filter(f: DescribeAclsRequest | DeleteAclsFilter) -> AclFilter:
    return AclFilter(
        f.resource_type_filter,
        f.resource_name_filter,
        f.pattern_type_filter,
        f.principal_filter,
        f.host_filter,
        f.operation,
        f.permission_type,
    )


def _by_resource(acls: Iterable[AclBinding]) -> list[DescribeAclsResource]:
    out: dict[tuple[int, str, int], DescribeAclsResource] = {}
    for a in acls:
        key = (a.resource_type, a.name, a.pattern)
        res = out.get(key)
        if res is None:
            res = out[key] = DescribeAclsResource(
                resource_type=a.resource_type, resource_name=a.name, pattern_type=a.pattern
            )
        res.acls.append(
            AclDescription(
                principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission
            )
        )
    return list(out.values())


def _refused(ctx: RequestContext) -> tuple[ErrorCode, str | None] | None:
    """Why Create/DeleteAcls change nothing: no authorizer, or no ALTER on the cluster."""
    if ctx.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, _DISABLED
    error = access.cluster_error(ctx, access.ALTER)
    return None if error is None else (error, None)


@handles(DESCRIBE_ACLS, "1-3")
async def describe_acls(ctx: RequestContext, request: Request[DescribeAclsRequest]) -> DescribeAclsResponse:
    auth = ctx.authorizer
    if auth is None:
        return DescribeAclsResponse(error_code=int(ErrorCode.SECURITY_DISABLED), error_message=_DISABLED)
    if (error := access.cluster_error(ctx, access.DESCRIBE)) is not None:
        return DescribeAclsResponse(error_code=int(error), error_message=None)
    f = _filter(request.body)
    if (message := filter_error(f)) is not None:
        return DescribeAclsResponse(error_code=int(ErrorCode.INVALID_REQUEST), error_message=message)
    return DescribeAclsResponse(error_code=0, error_message=None, resources=_by_resource(auth.matching(f)))


@handles(CREATE_ACLS, "1-3")
async def create_acls(ctx: RequestContext, request: Request[CreateAclsRequest]) -> CreateAclsResponse:
    creations = request.body.creations
    auth = ctx.authorizer
    refused = _refused(ctx)
    if auth is None or refused is not None:
        code, message = refused or (ErrorCode.SECURITY_DISABLED, _DISABLED)
        return CreateAclsResponse(
            results=[AclCreationResult(error_code=int(code), error_message=message) for _ in creations]
        )
    results = []
    changed = False
    for c in creations:
        binding = AclBinding(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        if (message := binding_error(binding)) is not None:
            results.append(
                AclCreationResult(error_code=int(ErrorCode.INVALID_REQUEST), error_message=message)
            )
            continue
        changed |= auth.add(binding)
        results.append(AclCreationResult(error_code=0, error_message=None))
    if changed:
        ctx.access.save()
    return CreateAclsResponse(results=results)


@handles(DELETE_ACLS, "1-3")
async def delete_acls(ctx: RequestContext, request: Request[DeleteAclsRequest]) -> DeleteAclsResponse:
    filters = request.body.filters
    auth = ctx.authorizer
    refused = _refused(ctx)
    if auth is None or refused is not None:
        code, message = refused or (ErrorCode.SECURITY_DISABLED, _DISABLED)
        return DeleteAclsResponse(
            filter_results=[
                DeleteAclsFilterResult(error_code=int(code), error_message=message) for _ in filters
            ]
        )
    results = []
    changed = False
    for wire in filters:
        f = _filter(wire)
        if (message := filter_error(f)) is not None:
            results.append(
                DeleteAclsFilterResult(error_code=int(ErrorCode.INVALID_REQUEST), error_message=message)
            )
            continue
        matched = auth.matching(f)
        for a in matched:
            changed |= auth.remove(a)
        results.append(
            DeleteAclsFilterResult(
                error_code=0,
                error_message=None,
                matching_acls=[
                    DeleteAclsMatchingAcl(
                        error_code=0,
                        error_message=None,
                        resource_type=a.resource_type,
                        resource_name=a.name,
                        pattern_type=a.pattern,
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission,
                    )
                    for a in matched
                ],
            )
        )
    if changed:
        ctx.access.save()
    return DeleteAclsResponse(filter_results=results)
