"""ACLs and the decision on them, with the semantics of Kafka's StandardAuthorizer (no I/O here:
the file they are kept in is kcompat.storage.acl_store's, the wire APIs are handlers/acls.py's).

    AclBinding(resource_type, name, pattern, principal, host, operation, permission)
    Authorizer(super_users, allow_if_no_acl).authorize(principal, host, op, resource_type, name)

The decision, in Kafka's order (StandardAuthorizerData):
  1. a super user (super.users) is allowed everything;
  2. the ACLs that match the resource: LITERAL with its exact name or `*`, PREFIXED whose name
     starts the resource's name (KIP-290);
  3. among them, those of the principal (or `User:*`) and the host (or `*`): a DENY of the
     operation (or ALL) wins over everything; an ALLOW of the operation, of ALL, or of an
     operation implying it (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
     DESCRIBE_CONFIGS) allows;
  4. nothing matched the principal: denied, unless the resource has no ACL at all (of anyone)
     and allow.everyone.if.no.acl.found is true.
Filters (DescribeAcls, DeleteAcls) match as Kafka's AclBindingFilter: ANY matches every value,
a null string matches any, pattern MATCH matches the ACLs that would apply to the named resource.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

# The class name that turns the authorizer on (authorizer.class.name), as in Kafka 4.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_ALL = AclOperation.ALL
_RESOURCE_TYPES = frozenset(int(x) for x in ResourceType)
_PATTERNS = frozenset(int(x) for x in PatternType)
_OPERATIONS = frozenset(int(x) for x in AclOperation)
_PERMISSIONS = frozenset(int(x) for x in AclPermissionType)
_DENY, _ALLOW = AclPermissionType.DENY, AclPermissionType.ALLOW
_LITERAL, _PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
# An ALLOW of any of these operations also allows the key (AclEntry's implied operations).
_IMPLIED_BY: dict[int, frozenset[int]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            _ALL,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, _ALL}
    ),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    name: str
    pattern: int  # LITERAL or PREFIXED
    principal: str  # "User:alice", "User:*"
    host: str  # an address or "*"
    operation: int
    permission: int  # DENY or ALLOW


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls' filter and each of DeleteAcls'; None strings match anything."""

    resource_type: int
    name: str | None
    pattern: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, acl: AclBinding) -> bool:
        return (
            (self.resource_type == ResourceType.ANY or self.resource_type == acl.resource_type)
            and _pattern_matches(self.pattern, self.name, acl)
            and (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and (self.operation == AclOperation.ANY or self.operation == acl.operation)
            and (self.permission == AclPermissionType.ANY or self.permission == acl.permission)
        )


def _pattern_matches(pattern: int, name: str | None, acl: AclBinding) -> bool:
    """Kafka's ResourcePatternFilter.matches."""
    if pattern not in (PatternType.ANY, PatternType.MATCH) and pattern != acl.pattern:
        return False
    if name is None:
        return True
    if pattern in (PatternType.ANY, acl.pattern):
        return name == acl.name
    # MATCH: the ACLs that apply to a resource of this name
    if acl.pattern == _LITERAL:
        return acl.name in (name, WILDCARD)
    return acl.pattern == _PREFIXED and name.startswith(acl.name)


def binding_error(acl: AclBinding) -> str | None:
    """Why CreateAcls refuses this binding (Kafka: INVALID_REQUEST), or None."""
    if (
        acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY)
        or acl.resource_type not in _RESOURCE_TYPES
    ):
        return "Invalid resourceType " + str(acl.resource_type)
    if acl.pattern not in (_LITERAL, _PREFIXED):
        return "Invalid patternType " + str(acl.pattern)
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY) or acl.operation not in _OPERATIONS:
        return "Invalid operation " + str(acl.operation)
    if acl.permission not in (_DENY, _ALLOW):
        return "Invalid permissionType " + str(acl.permission)
    if not acl.name:
        return "Invalid empty resource name"
    if acl.resource_type == ResourceType.CLUSTER and acl.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, who = acl.principal.partition(":")
    if not sep or not kind or not who:
        return f"Could not parse principal from `{acl.principal}` (no colon is present separating the principal type from the principal name)"
    return None


def filter_error(f: AclFilter) -> str | None:
    """Why a DescribeAcls/DeleteAcls filter is refused (INVALID_REQUEST), or None."""
    if f.resource_type == ResourceType.UNKNOWN or f.resource_type not in _RESOURCE_TYPES:
        return "Filter contains UNKNOWN elements: resource type"
    if f.pattern == PatternType.UNKNOWN or f.pattern not in _PATTERNS:
        return "Filter contains UNKNOWN elements: pattern type"
    if f.operation == AclOperation.UNKNOWN or f.operation not in _OPERATIONS:
        return "Filter contains UNKNOWN elements: operation"
    if f.permission == AclPermissionType.UNKNOWN or f.permission not in _PERMISSIONS:
        return "Filter contains UNKNOWN elements: permission type"
    return None


class Authorizer:
    """The ACL set and the decision on it; Kafka's StandardAuthorizer without its plug-in API."""

    __slots__ = ("_acls", "_literal", "_prefixed", "allow_if_no_acl", "super_users")

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: dict[AclBinding, None] = {}  # insertion-ordered set
        # indexes for the decision: (type, name) -> LITERAL ACLs; type -> PREFIXED ACLs
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[int, list[AclBinding]] = {}

    def __len__(self) -> int:
        return len(self._acls)

    def acls(self) -> list[AclBinding]:
        return list(self._acls)

    def add(self, acl: AclBinding) -> bool:
        """Add one ACL; False when it was there already (Kafka answers success either way)."""
        if acl in self._acls:
            return False
        self._acls[acl] = None
        if acl.pattern == _LITERAL:
            self._literal.setdefault((acl.resource_type, acl.name), []).append(acl)
        else:
            self._prefixed.setdefault(acl.resource_type, []).append(acl)
        return True

    def remove(self, acl: AclBinding) -> bool:
        if acl not in self._acls:
            return False
        del self._acls[acl]
        if acl.pattern == _LITERAL:
            bucket = self._literal[(acl.resource_type, acl.name)]
            bucket.remove(acl)
            if not bucket:
                del self._literal[(acl.resource_type, acl.name)]
        else:
            self._prefixed[acl.resource_type].remove(acl)
        return True

    def replace(self, acls: Iterable[AclBinding]) -> None:
        """Take `acls` as the whole set (cluster mode: each new ACL set of the metadata image)."""
        self._acls.clear()
        self._literal.clear()
        self._prefixed.clear()
        for acl in acls:
            self.add(acl)

    def matching(self, f: AclFilter) -> list[AclBinding]:
        return [acl for acl in self._acls if f.matches(acl)]

    def _resource_acls(self, resource_type: int, name: str) -> list[AclBinding]:
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found += self._literal.get((resource_type, WILDCARD), ())
        found += (a for a in self._prefixed.get(resource_type, ()) if name.startswith(a.name))
        return found

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        resource_acls = self._resource_acls(resource_type, name)
        if not resource_acls:
            return self.allow_if_no_acl
        implied = _IMPLIED_BY.get(operation)
        allowed = False
        for acl in resource_acls:
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != host and acl.host != WILDCARD:
                continue
            if acl.permission == _DENY:
                if acl.operation == operation or acl.operation == _ALL:
                    return False
            elif (
                acl.operation == operation or acl.operation == _ALL or (implied and acl.operation in implied)
            ):
                allowed = True
        return allowed

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Whether `principal` may do `operation` on some resource of the type (Kafka's
        authorizeByResourceType: an idempotent producer without IDEMPOTENT_WRITE on the cluster
        needs WRITE on some topic). An ALLOW counts unless a DENY of the principal covers its
        resource: a literal `*`, the same literal name, or a prefix of its name."""
        if principal in self.super_users:
            return True
        ops = (operation, _ALL)
        mine = [
            a
            for a in self._acls
            if a.resource_type == resource_type
            and a.operation in ops
            and a.principal in (principal, WILDCARD_PRINCIPAL)
            and a.host in (host, WILDCARD)
        ]
        denies = [a for a in mine if a.permission == _DENY]
        for a in mine:
            if a.permission != _ALLOW:
                continue
            if not any(
                (
                    d.pattern == _LITERAL
                    and d.name in (WILDCARD, a.name)
                    and (d.name == WILDCARD or a.pattern == _LITERAL)
                )
                or (d.pattern == _PREFIXED and a.name.startswith(d.name))
                for d in denies
            ):
                return True
        if self.allow_if_no_acl:
            return not any(a.resource_type == resource_type for a in self._acls)
        return False
