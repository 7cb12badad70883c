"""Users and ACLs: DescribeUserScramCredentials / AlterUserScramCredentials (the salted password is
computed here, as Kafka's admin client does, so the password never crosses the wire) and
DescribeAcls / CreateAcls / DeleteAcls with Kafka's enum names.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

from kcompat.client.cluster import Cluster
from kcompat.client.errors import check
from kcompat.security.authorizer import AclOperation, AclPermissionType, PatternType, ResourceType

DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_USER_SCRAM = 50
ALTER_USER_SCRAM = 51
SCRAM_MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_NAMES = {v: k for k, v in SCRAM_MECHANISMS.items()}
DEFAULT_ITERATIONS = 8192  # what kafka-configs --add-config 'SCRAM-SHA-256=[password=...]' uses


def describe_users(cluster: Cluster, users: list[str] | None = None) -> dict[str, list[tuple[str, int]]]:
    """user -> [(mechanism, iterations)]; every user with a credential when `users` is None."""
    wanted = None if users is None else [{"name": u} for u in users]
    _, answer = cluster.any_node().request(DESCRIBE_USER_SCRAM, {"users": wanted})
    check(answer.error_code, "DescribeUserScramCredentials", answer.error_message)
    out: dict[str, list[tuple[str, int]]] = {}
    for r in answer.results:
        check(r.error_code, f"user {r.user}: DescribeUserScramCredentials", r.error_message)
        out[r.user] = [
            (SCRAM_NAMES.get(c.mechanism, str(c.mechanism)), c.iterations) for c in r.credential_infos
        ]
    return out


def upsert_user(
    cluster: Cluster, user: str, password: str, mechanism: str, iterations: int = DEFAULT_ITERATIONS
) -> None:
    algorithm = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    salt = os.urandom(32)
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), salt, iterations)
    body = {
        "deletions": [],
        "upsertions": [
            {
                "name": user,
                "mechanism": SCRAM_MECHANISMS[mechanism],
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted,
            }
        ],
    }
    _alter_users(cluster, body)


def delete_user(cluster: Cluster, user: str, mechanism: str) -> None:
    body = {"deletions": [{"name": user, "mechanism": SCRAM_MECHANISMS[mechanism]}], "upsertions": []}
    _alter_users(cluster, body)


def _alter_users(cluster: Cluster, body: dict[str, Any]) -> None:
    _, answer = cluster.any_node().request(ALTER_USER_SCRAM, body)
    for r in answer.results:
        check(r.error_code, f"user {r.user}: AlterUserScramCredentials", r.error_message)


@dataclass(frozen=True, slots=True)
class Acl:
    resource_type: str
    resource_name: str | None
    pattern_type: str
    principal: str | None
    host: str | None
    operation: str
    permission: str

    def body(self, *, as_filter: bool = False) -> dict[str, Any]:
        """The wire fields with Kafka's codes: an AclCreation, or a filter (names ending _filter)."""
        f = "_filter" if as_filter else ""
        return {
            f"resource_type{f}": int(ResourceType[self.resource_type]),
            f"resource_name{f}": self.resource_name,
            "pattern_type_filter" if as_filter else "resource_pattern_type": int(
                PatternType[self.pattern_type]
            ),
            f"principal{f}": self.principal,
            f"host{f}": self.host,
            "operation": int(AclOperation[self.operation]),
            "permission_type": int(AclPermissionType[self.permission]),
        }


def _acl_from(resource_type: int, name: str, pattern: int, a: Any) -> Acl:
    return Acl(
        ResourceType(resource_type).name,
        name,
        PatternType(pattern).name,
        a.principal,
        a.host,
        AclOperation(a.operation).name,
        AclPermissionType(a.permission_type).name,
    )


def describe_acls(cluster: Cluster, flt: Acl) -> list[Acl]:
    _, answer = cluster.any_node().request(DESCRIBE_ACLS, flt.body(as_filter=True))
    check(answer.error_code, "DescribeAcls", answer.error_message)
    return [
        _acl_from(r.resource_type, r.resource_name, r.pattern_type, a)
        for r in answer.resources
        for a in r.acls
    ]


def create_acls(cluster: Cluster, acls: list[Acl]) -> None:
    _, answer = cluster.any_node().request(CREATE_ACLS, {"creations": [a.body() for a in acls]})
    for acl, r in zip(acls, answer.results, strict=False):
        check(
            r.error_code,
            f"ACL {acl.principal} {acl.operation} {acl.resource_type}:{acl.resource_name}: CreateAcls",
            r.error_message,
        )


def delete_acls(cluster: Cluster, flt: Acl) -> list[Acl]:
    _, answer = cluster.any_node().request(DELETE_ACLS, {"filters": [flt.body(as_filter=True)]})
    out = []
    for r in answer.filter_results:
        check(r.error_code, "DeleteAcls", r.error_message)
        for m in r.matching_acls:
            check(m.error_code, "DeleteAcls", m.error_message)
            out.append(_acl_from(m.resource_type, m.resource_name, m.pattern_type, m))
    return out
