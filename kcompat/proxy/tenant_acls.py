"""A virtual cluster's ACLs: CreateAcls, DescribeAcls and DeleteAcls with the resource names in the
upstream's names, so a tenant grants, lists and removes ACLs on its own topics, groups and
transactional ids only, and never sees another's.

    LITERAL  orders  ->  LITERAL  a.orders
    PREFIXED ord     ->  PREFIXED a.ord
    LITERAL  *       ->  PREFIXED a.        (the tenant's wildcard: every name of its own, none other)

Answers are mapped back the same way (PREFIXED `a.` is the tenant's LITERAL `*`); an ACL on
anything else (another tenant's names, the upstream's LITERAL `*`, CLUSTER, USER and delegation
token resources) is left out of listings. Entries that would reach beyond the tenant's names are
answered here, not relayed: an ACL creation on a resource that is not a topic, group or
transactional id (CLUSTER_AUTHORIZATION_FAILED: the cluster is the upstream's), and a DeleteAcls
filter without a resource name or with the MATCH pattern (INVALID_REQUEST: upstream they match
other tenants' ACLs or the upstream's own). CreateAcls and DeleteAcls answer each entry on its
own, so a request mixing both kinds relays the others and the answer gets the withheld entries'
results back in their places (merge); one withholding every entry is answered here whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.types.create_acls import AclCreationResult
from kcompat.wire.types.delete_acls import DeleteAclsFilterResult

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ACL_KEYS = frozenset({DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS})
TOPIC, GROUP, TRANSACTIONAL_ID = 2, 3, 5  # AclResourceType
ANY_TYPE = 1
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4  # PatternType
NAMED = frozenset({TOPIC, GROUP, TRANSACTIONAL_ID})
WILDCARD = "*"

# A creation or filter answered here: (its index in the request, error code, error message).
Withheld = tuple[tuple[int, int, str], ...]
CLUSTER_WHY = "a virtual cluster grants ACLs on its topics, groups and transactional ids only"
DELETE_WHY = "a virtual cluster deletes ACLs by resource name with the LITERAL, PREFIXED or ANY pattern"


class AclRefused(Exception):
    """An ACL request answered here with `code` for every entry (none is relayed)."""

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


def request(prefix: str, api_key: int, body: Any) -> Withheld:
    """Rewrite an ACL request's resources in place, leaving out the entries answered here (those
    returned); AclRefused when every entry is."""
    if api_key == CREATE_ACLS:
        withheld = tuple(
            (i, int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), CLUSTER_WHY)
            for i, c in enumerate(body.creations)
            if c.resource_type not in NAMED
        )
        body.creations = _relayed(
            body.creations, withheld, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_WHY
        )
        for c in body.creations:
            c.resource_name, c.resource_pattern_type = _upstream(
                prefix, c.resource_name, c.resource_pattern_type
            )
        return withheld
    filters = [body] if api_key == DESCRIBE_ACLS else body.filters
    withheld = ()
    if api_key == DELETE_ACLS:
        withheld = tuple(
            (i, int(ErrorCode.INVALID_REQUEST), DELETE_WHY)
            for i, f in enumerate(filters)
            if f.resource_name_filter is None or f.pattern_type_filter == MATCH
        )
        body.filters = filters = _relayed(filters, withheld, ErrorCode.INVALID_REQUEST, DELETE_WHY)
    for f in filters:
        name = f.resource_name_filter
        if name is None:
            continue  # every ACL (DescribeAcls): the answer keeps the tenant's only
        if name == WILDCARD and f.pattern_type_filter == LITERAL:
            f.resource_name_filter, f.pattern_type_filter = prefix, PREFIXED
        else:
            f.resource_name_filter = prefix if name == WILDCARD else prefix + name
    return withheld


def _relayed(entries: list[Any], withheld: Withheld, code: ErrorCode, why: str) -> list[Any]:
    """The entries not withheld; AclRefused when none is left of a request that had some."""
    if withheld and len(withheld) == len(entries):
        raise AclRefused(code, why)
    skip = {i for i, _, _ in withheld}
    return [e for i, e in enumerate(entries) if i not in skip]


def merge(api_key: int, body: Any, withheld: Withheld) -> None:
    """Put the withheld entries' results back in the upstream's answer, each in its request place."""
    field = "results" if api_key == CREATE_ACLS else "filter_results"
    relayed = iter(getattr(body, field))
    answered = {i: (code, why) for i, code, why in withheld}
    entry = _ENTRY[api_key]
    merged = []
    for i in range(len(answered) + len(getattr(body, field))):
        if i in answered:
            code, why = answered[i]
            merged.append(entry(error_code=code, error_message=why))
        else:
            merged.append(next(relayed))
    setattr(body, field, merged)


_ENTRY: dict[int, Callable[..., Any]] = {CREATE_ACLS: AclCreationResult, DELETE_ACLS: DeleteAclsFilterResult}


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
