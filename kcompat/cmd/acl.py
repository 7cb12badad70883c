"""`kcompat acl create|list|delete`: ACLs through CreateAcls, DescribeAcls and DeleteAcls, named as
kafka-acls names them. A resource is one of --topic, --group, --transactional-id or --cluster;
list and delete take the same options as filters, where anything left out matches everything.
"""

from __future__ import annotations

import argparse
from typing import Any

from kcompat.cmd.common import add_connection_options, open_cluster, print_json, print_table
from kcompat.cmd.formats import FormatError

OPERATIONS = (
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "CREATE_TOKENS",
    "DESCRIBE_TOKENS",
    "TWO_PHASE_COMMIT",
)


def _upper(text: str) -> str:
    return text.strip().upper().replace("-", "_")


def _options(p: argparse.ArgumentParser, *, creating: bool) -> None:
    r = p.add_argument_group("resource")
    r.add_argument("--topic", metavar="NAME")
    r.add_argument("--group", metavar="NAME")
    r.add_argument("--transactional-id", metavar="ID")
    r.add_argument("--cluster", action="store_true", help="the cluster resource (kafka-cluster)")
    r.add_argument(
        "--pattern",
        type=_upper,
        choices=("LITERAL", "PREFIXED") + (() if creating else ("ANY", "MATCH")),
        default="LITERAL" if creating else "ANY",
        help="how the name matches (default " + ("LITERAL)" if creating else "ANY)"),
    )
    p.add_argument(
        "--principal",
        metavar="User:NAME",
        required=creating,
        help="whose ACL it is, e.g. User:alice (User:* for everyone)",
    )
    p.add_argument("--host", default="*" if creating else None, help="client host (default *)")
    p.add_argument(
        "--operation",
        type=_upper,
        choices=OPERATIONS + (() if creating else ("ANY",)),
        action="append",
        required=creating,
        help="READ, WRITE, ... (repeatable)",
    )
    p.add_argument(
        "--permission",
        type=_upper,
        choices=("ALLOW", "DENY") + (() if creating else ("ANY",)),
        default="ALLOW" if creating else "ANY",
    )
    add_connection_options(p)


def register(commands: Any) -> None:
    acl = commands.add_parser("acl", help="create, list and delete ACLs")
    verbs = acl.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("create", help="allow (or deny) a principal operations on a resource")
    _options(p, creating=True)
    p.set_defaults(handler=create)
    p = verbs.add_parser("list", help="ACLs matching the options (all without any)")
    _options(p, creating=False)
    p.set_defaults(handler=list_acls)
    p = verbs.add_parser("delete", help="delete the ACLs matching the options")
    _options(p, creating=False)
    p.add_argument("--all", action="store_true", help="allow a filter that matches every ACL")
    p.set_defaults(handler=delete)


def _resource(args: argparse.Namespace, *, creating: bool) -> tuple[str, str | None]:
    given = [
        ("TOPIC", args.topic),
        ("GROUP", args.group),
        ("TRANSACTIONAL_ID", args.transactional_id),
        ("CLUSTER", "kafka-cluster" if args.cluster else None),
    ]
    chosen = [(t, n) for t, n in given if n is not None]
    if len(chosen) > 1:
        raise FormatError("name one resource: --topic, --group, --transactional-id or --cluster")
    if not chosen:
        if creating:
            raise FormatError(
                "acl create needs a resource: --topic, --group, --transactional-id or --cluster"
            )
        return "ANY", None
    return chosen[0]


def _bindings(args: argparse.Namespace, *, creating: bool) -> list[Any]:
    from kcompat.client.security_admin import Acl

    rtype, name = _resource(args, creating=creating)
    if args.principal is not None and ":" not in args.principal:
        raise FormatError(f"--principal {args.principal}: write it as User:NAME")
    return [
        Acl(rtype, name, args.pattern, args.principal, args.host, op, args.permission)
        for op in (args.operation or ["ANY"])
    ]


def _rows(acls: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "principal": a.principal,
            "host": a.host,
            "operation": a.operation,
            "permission": a.permission,
            "resource_type": a.resource_type,
            "resource_name": a.resource_name,
            "pattern": a.pattern_type,
        }
        for a in acls
    ]


def _print(args: argparse.Namespace, acls: list[Any], verb: str) -> None:
    rows = _rows(acls)
    if args.format == "json":
        print_json(rows)
        return
    if verb:
        print(f"{verb} {len(rows)} ACL{'s' if len(rows) != 1 else ''}")
    if rows:
        print_table(
            ("PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN"),
            [tuple(r.values()) for r in rows],
        )


def create(args: argparse.Namespace) -> int:
    from kcompat.client import security_admin

    acls = _bindings(args, creating=True)
    with open_cluster(args) as cluster:
        security_admin.create_acls(cluster, acls)
    _print(args, acls, "created")
    return 0


def list_acls(args: argparse.Namespace) -> int:
    from kcompat.client import security_admin

    found = []
    with open_cluster(args) as cluster:
        for flt in _bindings(args, creating=False):
            found.extend(security_admin.describe_acls(cluster, flt))
    _print(args, found, "")
    return 0


def delete(args: argparse.Namespace) -> int:
    from kcompat.client import security_admin

    filters = _bindings(args, creating=False)
    if not args.all and _resource(args, creating=False)[0] == "ANY" and args.principal is None:
        raise FormatError("this filter matches every ACL: name a resource or --principal, or add --all")
    gone = []
    with open_cluster(args) as cluster:
        for flt in filters:
            gone.extend(security_admin.delete_acls(cluster, flt))
    _print(args, gone, "deleted")
    return 0
