"""`kcompat user create|delete|list`: SCRAM users, through AlterUserScramCredentials and
DescribeUserScramCredentials (KIP-554), which Kafka and kcompat both serve. The salted password is
made here, so the password itself never reaches the broker.
"""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from kcompat.cmd.common import add_connection_options, open_cluster, print_json, print_table
from kcompat.cmd.formats import FormatError

MECHANISM_CHOICES = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def register(commands: Any) -> None:
    user = commands.add_parser("user", help="create, delete and list SCRAM users")
    verbs = user.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("create", help="create a SCRAM user, or change its password")
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--new-password", metavar="SECRET", help="the user's password (default: asked on the terminal)"
    )
    p.add_argument(
        "--mechanism",
        type=str.upper,
        choices=MECHANISM_CHOICES,
        default="SCRAM-SHA-256",
        help="default SCRAM-SHA-256",
    )
    p.add_argument(
        "--iterations", type=int, default=8192, help="PBKDF2 iterations (default 8192, at least 4096)"
    )
    add_connection_options(p)
    p.set_defaults(handler=create)

    p = verbs.add_parser("delete", help="delete a user's SCRAM credentials")
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--mechanism",
        type=str.upper,
        choices=MECHANISM_CHOICES,
        help="only this one (default: every one it has)",
    )
    add_connection_options(p)
    p.set_defaults(handler=delete)

    p = verbs.add_parser("list", help="users with SCRAM credentials, and their mechanisms")
    add_connection_options(p)
    p.set_defaults(handler=list_users)


def create(args: argparse.Namespace) -> int:
    from kcompat.client import security_admin

    password = args.new_password
    if password is None:
        password = getpass.getpass(f"password for {args.name}: ")
    if not password:
        raise FormatError("the password must not be empty")
    if args.iterations < 4096:
        raise FormatError("--iterations must be at least 4096 (Kafka's minimum)")
    with open_cluster(args) as cluster:
        security_admin.upsert_user(cluster, args.name, password, args.mechanism, args.iterations)
    if args.format == "json":
        print_json({"user": args.name, "mechanism": args.mechanism, "iterations": args.iterations})
    else:
        print(f"created user {args.name} ({args.mechanism})")
    return 0


def delete(args: argparse.Namespace) -> int:
    from kcompat.client import security_admin

    with open_cluster(args) as cluster:
        if args.mechanism:
            mechanisms = [args.mechanism]
        else:
            known = security_admin.describe_users(cluster, [args.name])
            mechanisms = sorted(m for m, _ in known.get(args.name, []))
        for m in mechanisms:
            security_admin.delete_user(cluster, args.name, m)
    if args.format == "json":
        print_json({"user": args.name, "deleted": mechanisms})
    else:
        print(f"deleted user {args.name} ({', '.join(mechanisms)})")
    return 0


def list_users(args: argparse.Namespace) -> int:
    from kcompat.client import security_admin

    with open_cluster(args) as cluster:
        users = security_admin.describe_users(cluster)
    if args.format == "json":
        print_json(
            [
                {"user": u, "mechanisms": [{"mechanism": m, "iterations": i} for m, i in creds]}
                for u, creds in sorted(users.items())
            ]
        )
    else:
        print_table(
            ("USER", "MECHANISMS"),
            [(u, ", ".join(f"{m} ({i})" for m, i in creds)) for u, creds in sorted(users.items())],
        )
    return 0
