"""`kcompat config get|set`: a topic's or a broker's configs, through DescribeConfigs and
IncrementalAlterConfigs (as kafka-configs --describe / --alter). `--broker ID` is one broker,
`--broker-default` the cluster-wide default every broker inherits (kafka-configs --entity-default).
"""

from __future__ import annotations

import argparse
from typing import Any

from kcompat.cmd.common import add_connection_options, open_cluster, print_json, print_table
from kcompat.cmd.formats import FormatError, parse_key_values


def _target(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--topic", metavar="TOPIC")
    g.add_argument("--broker", metavar="ID", help="one broker, by node id")
    g.add_argument("--broker-default", action="store_true", help="the cluster-wide broker default")


def register(commands: Any) -> None:
    config = commands.add_parser("config", help="get and set topic and broker configs")
    verbs = config.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("get", help="configs with their values and sources")
    _target(p)
    p.add_argument("names", nargs="*", metavar="NAME", help="only these configs (default all)")
    p.add_argument("--changed", action="store_true", help="only configs set away from the default")
    add_connection_options(p)
    p.set_defaults(handler=get)

    p = verbs.add_parser("set", help="set or delete configs (IncrementalAlterConfigs)")
    _target(p)
    p.add_argument("pairs", nargs="*", metavar="KEY=VALUE", help="configs to set")
    p.add_argument(
        "--delete", action="append", default=[], metavar="KEY", help="back to the default (repeatable)"
    )
    add_connection_options(p)
    p.set_defaults(handler=set_configs)


def _resource(args: argparse.Namespace) -> tuple[int, str]:
    from kcompat.client.admin import BROKER_RESOURCE, TOPIC_RESOURCE

    if args.topic is not None:
        return TOPIC_RESOURCE, args.topic
    if args.broker_default:
        return BROKER_RESOURCE, ""
    if not args.broker.isdigit():
        raise FormatError(
            f"--broker {args.broker}: give the broker's node id (kcompat cluster info lists them)"
        )
    return BROKER_RESOURCE, args.broker


def get(args: argparse.Namespace) -> int:
    from kcompat.client import admin

    rtype, name = _resource(args)
    with open_cluster(args) as cluster:
        entries = admin.describe_configs(cluster, rtype, name)
    wanted = set(args.names)
    unknown = wanted - {e.name for e in entries}
    if unknown:
        raise FormatError(
            f"no config {', '.join(sorted(unknown))} on {'topic' if args.topic else 'broker'} {name}"
        )
    rows = [
        {
            "name": e.name,
            "value": None if e.sensitive else e.value,
            "source": e.source,
            "read_only": e.read_only,
            "sensitive": e.sensitive,
        }
        for e in entries
        if (not wanted or e.name in wanted) and (not args.changed or e.source != "DEFAULT_CONFIG")
    ]
    if args.format == "json":
        print_json(rows)
    else:
        print_table(
            ("NAME", "VALUE", "SOURCE"),
            [(r["name"], "(sensitive)" if r["sensitive"] else r["value"], r["source"]) for r in rows],
        )
    return 0


def set_configs(args: argparse.Namespace) -> int:
    from kcompat.client import admin

    rtype, name = _resource(args)
    changes: list[tuple[str, str, str | None]] = [("set", k, v) for k, v in parse_key_values(args.pairs)]
    changes += [("delete", k, None) for k in args.delete]
    if not changes:
        raise FormatError("nothing to change: give KEY=VALUE or --delete KEY")
    with open_cluster(args) as cluster:
        admin.alter_configs(cluster, rtype, name, changes)
    target = f"topic {name}" if args.topic is not None else f"broker {name or 'default'}"
    rows = [{"operation": op, "name": k, "value": v} for op, k, v in changes]
    if args.format == "json":
        print_json({"resource": target, "changes": rows})
    else:
        for op, k, v in changes:
            print(f"{target}: set {k}={v}" if op == "set" else f"{target}: deleted {k} (back to its default)")
    return 0
