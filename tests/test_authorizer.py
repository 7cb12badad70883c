"""The authorizer's decision and filters, table-driven over StandardAuthorizer's rules."""

from __future__ import annotations

import pytest

from kcompat.security.authorizer import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourceType,
    binding_error,
    filter_error,
)

T, G, C, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(
    rt: int,
    name: str,
    op: int,
    perm: int = ALLOW,
    *,
    pattern: int = LIT,
    who: str = "User:alice",
    host: str = "*",
) -> AclBinding:
    return AclBinding(rt, name, pattern, who, host, op, perm)


# (ACLs, principal, host, operation, resource type, name, expected)
CASES = [
    pytest.param([], "User:alice", "1.2.3.4", Op.READ, T, "t", False, id="no-acls-denied"),
    pytest.param([acl(T, "t", Op.READ)], "User:alice", "h", Op.READ, T, "t", True, id="literal-allow"),
    pytest.param([acl(T, "t", Op.READ)], "User:bob", "h", Op.READ, T, "t", False, id="other-principal"),
    pytest.param([acl(T, "t", Op.READ)], "User:alice", "h", Op.WRITE, T, "t", False, id="other-operation"),
    pytest.param([acl(T, "t", Op.READ)], "User:alice", "h", Op.READ, T, "t2", False, id="literal-is-exact"),
    pytest.param([acl(T, "t", Op.READ)], "User:alice", "h", Op.READ, G, "t", False, id="other-resource-type"),
    pytest.param([acl(T, "*", Op.READ)], "User:alice", "h", Op.READ, T, "any", True, id="wildcard-resource"),
    pytest.param([acl(T, "t", Op.READ, who="User:*")], "User:x", "h", Op.READ, T, "t", True, id="wildcard-principal"),
    pytest.param([acl(T, "t", Op.READ, host="10.0.0.1")], "User:alice", "10.0.0.1", Op.READ, T, "t", True, id="exact-host"),
    pytest.param([acl(T, "t", Op.READ, host="10.0.0.1")], "User:alice", "10.0.0.2", Op.READ, T, "t", False, id="other-host"),
    pytest.param([acl(T, "pay-", Op.WRITE, pattern=PRE)], "User:alice", "h", Op.WRITE, T, "pay-eu", True, id="prefixed-match"),
    pytest.param([acl(T, "pay-", Op.WRITE, pattern=PRE)], "User:alice", "h", Op.WRITE, T, "pa", False, id="prefixed-no-match"),
    pytest.param([acl(T, "pay-", Op.WRITE)], "User:alice", "h", Op.WRITE, T, "pay-eu", False, id="literal-is-not-prefix"),
    pytest.param([acl(T, "t", Op.ALL)], "User:alice", "h", Op.DELETE, T, "t", True, id="all-allows-everything"),
    pytest.param([acl(T, "t", Op.READ), acl(T, "t", Op.READ, DENY)], "User:alice", "h", Op.READ, T, "t", False, id="deny-wins"),
    pytest.param([acl(T, "t", Op.READ), acl(T, "*", Op.ALL, DENY, who="User:*")], "User:alice", "h", Op.READ, T, "t", False, id="wildcard-deny-wins"),
    pytest.param([acl(T, "t", Op.READ), acl(T, "t", Op.READ, DENY, host="9.9.9.9")], "User:alice", "h", Op.READ, T, "t", True, id="deny-of-other-host"),
    pytest.param([acl(T, "t", Op.ALL), acl(T, "t", Op.WRITE, DENY)], "User:alice", "h", Op.READ, T, "t", True, id="deny-is-per-operation"),
    pytest.param([acl(T, "t", Op.READ), acl(T, "t", Op.DESCRIBE, DENY)], "User:alice", "h", Op.READ, T, "t", True, id="deny-describe-keeps-read"),
    pytest.param([acl(T, "p", Op.READ, pattern=PRE), acl(T, "pay", Op.READ, DENY, pattern=PRE)], "User:alice", "h", Op.READ, T, "pay1", False, id="prefixed-deny-wins"),
    pytest.param([acl(T, "t", Op.READ)], "User:alice", "h", Op.DESCRIBE, T, "t", True, id="read-implies-describe"),
    pytest.param([acl(T, "t", Op.WRITE)], "User:alice", "h", Op.DESCRIBE, T, "t", True, id="write-implies-describe"),
    pytest.param([acl(T, "t", Op.DELETE)], "User:alice", "h", Op.DESCRIBE, T, "t", True, id="delete-implies-describe"),
    pytest.param([acl(T, "t", Op.ALTER)], "User:alice", "h", Op.DESCRIBE, T, "t", True, id="alter-implies-describe"),
    pytest.param([acl(T, "t", Op.CREATE)], "User:alice", "h", Op.DESCRIBE, T, "t", False, id="create-implies-nothing"),
    pytest.param([acl(T, "t", Op.DESCRIBE)], "User:alice", "h", Op.READ, T, "t", False, id="describe-implies-nothing"),
    pytest.param([acl(T, "t", Op.ALTER_CONFIGS)], "User:alice", "h", Op.DESCRIBE_CONFIGS, T, "t", True, id="alter-configs-implies-describe-configs"),
    pytest.param([acl(T, "t", Op.ALTER_CONFIGS)], "User:alice", "h", Op.DESCRIBE, T, "t", False, id="alter-configs-not-describe"),
    pytest.param([acl(T, "t", Op.READ), acl(T, "t", Op.READ, DENY)], "User:admin", "h", Op.READ, T, "t", True, id="super-user-beats-deny"),
    pytest.param([acl(C, "kafka-cluster", Op.CREATE)], "User:alice", "h", Op.CREATE, C, "kafka-cluster", True, id="cluster"),
    pytest.param([acl(TX, "tx-", Op.WRITE, pattern=PRE)], "User:alice", "h", Op.WRITE, TX, "tx-1", True, id="transactional-id"),
]  # fmt: skip


@pytest.mark.parametrize(("acls", "principal", "host", "op", "rt", "name", "expected"), CASES)
def test_authorize(
    acls: list[AclBinding], principal: str, host: str, op: int, rt: int, name: str, expected: bool
) -> None:
    auth = Authorizer(super_users=["User:admin"])
    for a in acls:
        auth.add(a)
    assert auth.authorize(principal, host, op, rt, name) is expected


# allow.everyone.if.no.acl.found applies only to resources with no ACL of anyone
NO_ACL_CASES = [
    pytest.param([], True, id="no-acl-at-all"),
    pytest.param([acl(T, "other", Op.READ)], True, id="acls-elsewhere"),
    pytest.param([acl(T, "t", Op.WRITE, who="User:bob")], False, id="acl-of-someone-else-on-resource"),
    pytest.param([acl(T, "t", Op.WRITE)], False, id="acl-of-other-operation-on-resource"),
    pytest.param([acl(T, "t", Op.READ)], True, id="own-allow"),
    pytest.param([acl(T, "*", Op.WRITE, who="User:bob")], False, id="wildcard-acl-covers-resource"),
    pytest.param([acl(T, "t-", Op.WRITE, who="User:bob", pattern=PRE)], True, id="prefix-not-covering"),
    pytest.param([acl(T, "", Op.WRITE, who="User:bob", pattern=PRE)], False, id="empty-prefix-covers"),
]


@pytest.mark.parametrize(("acls", "expected"), NO_ACL_CASES)
def test_allow_everyone_if_no_acl_found(acls: list[AclBinding], expected: bool) -> None:
    auth = Authorizer(allow_if_no_acl=True)
    for a in acls:
        auth.add(a)
    assert auth.authorize("User:alice", "h", Op.READ, T, "t") is expected


def test_add_remove_keep_indexes() -> None:
    auth = Authorizer()
    a, p = acl(T, "t", Op.READ), acl(T, "t", Op.READ, pattern=PRE)
    assert auth.add(a) and auth.add(p) and not auth.add(a)
    assert len(auth) == 2 and auth.authorize("User:alice", "h", Op.READ, T, "t")
    assert auth.remove(a) and not auth.remove(a)
    assert auth.authorize("User:alice", "h", Op.READ, T, "tx")  # the prefixed one remains
    assert auth.remove(p)
    assert not auth.authorize("User:alice", "h", Op.READ, T, "t") and auth.acls() == []


ANY_RT, ANY_PAT, MATCH = ResourceType.ANY, PatternType.ANY, PatternType.MATCH
LIT_T = acl(T, "t", Op.READ)
LIT_STAR = acl(T, "*", Op.READ)
PRE_T = acl(T, "t", Op.WRITE, DENY, pattern=PRE)
PRE_TO = acl(T, "to", Op.READ, pattern=PRE, who="User:bob")
GROUP_G = acl(G, "t", Op.READ)
ALL_ACLS = [LIT_T, LIT_STAR, PRE_T, PRE_TO, GROUP_G]


def flt(
    rt: int = ANY_RT, name: str | None = None, pattern: int = ANY_PAT, who: str | None = None,
    host: str | None = None, op: int = Op.ANY, perm: int = AclPermissionType.ANY,
) -> AclFilter:  # fmt: skip
    return AclFilter(rt, name, pattern, who, host, op, perm)


FILTER_CASES = [
    pytest.param(flt(), ALL_ACLS, id="any"),
    pytest.param(flt(rt=T), [LIT_T, LIT_STAR, PRE_T, PRE_TO], id="resource-type"),
    pytest.param(flt(name="t"), [LIT_T, PRE_T, GROUP_G], id="any-pattern-is-exact-name"),
    pytest.param(flt(rt=T, name="t", pattern=LIT), [LIT_T], id="literal"),
    pytest.param(flt(rt=T, name="t", pattern=PRE), [PRE_T], id="prefixed"),
    pytest.param(flt(rt=T, pattern=PRE), [PRE_T, PRE_TO], id="prefixed-any-name"),
    pytest.param(flt(rt=T, name="topic", pattern=MATCH), [LIT_STAR, PRE_T, PRE_TO], id="match"),
    pytest.param(flt(rt=T, name="t", pattern=MATCH), [LIT_T, LIT_STAR, PRE_T], id="match-literal-too"),
    pytest.param(flt(who="User:bob"), [PRE_TO], id="principal"),
    pytest.param(flt(op=Op.WRITE), [PRE_T], id="operation"),
    pytest.param(flt(perm=DENY), [PRE_T], id="permission"),
    pytest.param(flt(host="10.0.0.1"), [], id="host-is-exact"),
]


@pytest.mark.parametrize(("f", "expected"), FILTER_CASES)
def test_filters(f: AclFilter, expected: list[AclBinding]) -> None:
    auth = Authorizer()
    for a in ALL_ACLS:
        auth.add(a)
    assert auth.matching(f) == expected


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl(T, "t", Op.READ), None),
        (acl(ResourceType.ANY, "t", Op.READ), "Invalid resourceType"),
        (acl(T, "t", Op.READ, pattern=MATCH), "Invalid patternType"),
        (acl(T, "t", Op.ANY), "Invalid operation"),
        (acl(T, "t", Op.READ, AclPermissionType.ANY), "Invalid permissionType"),
        (acl(T, "", Op.READ), "empty resource name"),
        (acl(C, "other", Op.ALTER), "only valid name for the CLUSTER"),
        (acl(T, "t", Op.READ, who="alice"), "Could not parse principal"),
    ],
)
def test_binding_errors(binding: AclBinding, message: str | None) -> None:
    error = binding_error(binding)
    assert (error is None) if message is None else (error is not None and message in error)


def test_filter_errors() -> None:
    assert filter_error(flt()) is None
    assert filter_error(flt(pattern=PatternType.UNKNOWN)) is not None
    assert filter_error(flt(rt=ResourceType.UNKNOWN)) is not None
    assert filter_error(flt(op=Op.UNKNOWN)) is not None
    assert filter_error(flt(perm=99)) is not None


AUTHORIZE_ANY_CASES = [
    pytest.param([], False, id="nothing"),
    pytest.param([acl(T, "t", Op.WRITE)], True, id="literal-write"),
    pytest.param([acl(T, "t", Op.READ)], False, id="read-is-not-write"),
    pytest.param([acl(T, "p", Op.ALL, pattern=PRE)], True, id="prefixed-all"),
    pytest.param([acl(T, "t", Op.WRITE), acl(T, "*", Op.WRITE, DENY)], False, id="wildcard-deny"),
    pytest.param([acl(T, "t", Op.WRITE), acl(T, "t", Op.WRITE, DENY)], False, id="same-literal-deny"),
    pytest.param([acl(T, "tab", Op.WRITE, pattern=PRE), acl(T, "t", Op.WRITE, DENY, pattern=PRE)], False, id="covering-prefix-deny"),
    pytest.param([acl(T, "t", Op.WRITE), acl(T, "u", Op.WRITE, DENY)], True, id="other-deny"),
]  # fmt: skip


@pytest.mark.parametrize(("acls", "expected"), AUTHORIZE_ANY_CASES)
def test_authorize_any(acls: list[AclBinding], expected: bool) -> None:
    auth = Authorizer()
    for a in acls:
        auth.add(a)
    assert auth.authorize_any("User:alice", "h", Op.WRITE, T) is expected
