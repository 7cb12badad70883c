"""A virtual cluster's ACLs: CreateAcls, DescribeAcls and DeleteAcls with the resource names in the
upstream's names, so a tenant grants, lists and removes ACLs on its own topics, groups and
transactional ids only, and never sees another's.

    LITERAL  orders  ->  LITERAL  a.orders
    PREFIXED ord     ->  PREFIXED a.ord
    LITERAL  *       ->  PREFIXED a.        (the tenant's wildcard: every name of its own, none other)

Answers are mapped back the same way (PREFIXED `a.` is the tenant's LITERAL `*`); an ACL on
anything else (another tenant's names, the upstream's LITERAL `*`, CLUSTER, USER and delegation
token resources) is left out of listings. Requests that would reach beyond the tenant's names are
answered here, not relayed: an ACL on a resource that is not a topic, group or transactional id
(CLUSTER_AUTHORIZATION_FAILED: the cluster is the upstream's), and a DeleteAcls filter without a
resource name or with the MATCH pattern (INVALID_REQUEST: upstream they match other tenants' ACLs
or the upstream's own).
"""

from __future__ import annotations

from typing import Any

from kcompat.wire.error_codes import ErrorCode

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ACL_KEYS = frozenset({DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS})
TOPIC, GROUP, TRANSACTIONAL_ID = 2, 3, 5  # AclResourceType
ANY_TYPE = 1
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4  # PatternType
NAMED = frozenset({TOPIC, GROUP, TRANSACTIONAL_ID})
WILDCARD = "*"


class AclRefused(Exception):
    """An ACL request answered here with `code` for every entry."""

    def __init__(self, code: ErrorCode, why: str) -> None:
        super().__init__(why)
        self.code = code
        self.why = why


def _upstream(prefix: str, name: str, pattern: int) -> tuple[str, int]:
    if name == WILDCARD and pattern == LITERAL:
        return prefix, PREFIXED
    return prefix + name, pattern


def _tenant(prefix: str, name: str, pattern: int) -> tuple[str, int]:
    if name == prefix and pattern == PREFIXED:
        return WILDCARD, LITERAL
    return name.removeprefix(prefix), pattern


def _ours(prefix: str, resource_type: int, name: Any) -> bool:
    return resource_type in NAMED and isinstance(name, str) and name.startswith(prefix)


def request(prefix: str, api_key: int, body: Any) -> None:
    """Rewrite an ACL request's resources in place; AclRefused when it must be answered here."""
    if api_key == CREATE_ACLS:
        for c in body.creations:
            if c.resource_type not in NAMED:
                raise AclRefused(
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    "a virtual cluster grants ACLs on its topics, groups and transactional ids only",
                )
            c.resource_name, c.resource_pattern_type = _upstream(
                prefix, c.resource_name, c.resource_pattern_type
            )
        return
    filters = [body] if api_key == DESCRIBE_ACLS else body.filters
    for f in filters:
        name = f.resource_name_filter
        if api_key == DELETE_ACLS and (name is None or f.pattern_type_filter == MATCH):
            raise AclRefused(
                ErrorCode.INVALID_REQUEST,
                "a virtual cluster deletes ACLs by resource name with the LITERAL, PREFIXED or ANY pattern",
            )
        if name is None:
            continue  # every ACL: the answer keeps the tenant's only
        if name == WILDCARD and f.pattern_type_filter == LITERAL:
            f.resource_name_filter, f.pattern_type_filter = prefix, PREFIXED
        else:
            f.resource_name_filter = prefix if name == WILDCARD else prefix + name


def answer(prefix: str, api_key: int, body: Any) -> None:
    """The tenant's ACLs of an answer, in its names; every other ACL left out."""
    if api_key == DESCRIBE_ACLS:
        body.resources = [r for r in body.resources if _ours(prefix, r.resource_type, r.resource_name)]
        for r in body.resources:
            r.resource_name, r.pattern_type = _tenant(prefix, r.resource_name, r.pattern_type)
    elif api_key == DELETE_ACLS:
        for result in body.filter_results:
            acls = [a for a in result.matching_acls if _ours(prefix, a.resource_type, a.resource_name)]
            for a in acls:
                a.resource_name, a.pattern_type = _tenant(prefix, a.resource_name, a.pattern_type)
            result.matching_acls = acls


def refused_body(api_key: int, body: Any, code: int, why: str) -> dict[str, Any]:
    """The answer to an ACL request refused here: `code` for each of its entries."""
    if api_key == CREATE_ACLS:
        return {"results": [{"error_code": code, "error_message": why} for _ in body.creations]}
    entries = body.filters if api_key == DELETE_ACLS else [body]
    return {"filter_results": [{"error_code": code, "error_message": why} for _ in entries]}
