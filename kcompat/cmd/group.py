"""`kcompat group list|describe|seek|delete`.

describe lists EVERY partition the group's members are assigned, plus any other partition it has a
commit on, with the committed offset ('-' without a commit), the log start and end offsets, and the
lag (end - committed; '-' without a commit, as kafka-consumer-groups shows it). seek commits new
offsets as an admin does, which Kafka allows only while the group has no members.
"""

from __future__ import annotations

import argparse
from typing import Any

from kcompat.cmd.common import (
    EXIT_KAFKA_ERROR,
    add_connection_options,
    fail_kafka,
    open_cluster,
    print_json,
    print_pairs,
    print_table,
)
from kcompat.cmd.formats import FormatError, lag, parse_offset, parse_partitions

EMPTY_STATES = ("Empty", "Dead")


def register(commands: Any) -> None:
    group = commands.add_parser("group", help="list, describe, seek and delete consumer groups")
    verbs = group.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("list", help="list groups with their state")
    add_connection_options(p)
    p.set_defaults(handler=list_groups)

    p = verbs.add_parser(
        "describe",
        help="members, assignments, committed and end offsets, lag",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("groups", nargs="+", metavar="GROUP")
    add_connection_options(p)
    p.set_defaults(handler=describe)

    p = verbs.add_parser("seek", help="move an empty group's committed offsets")
    p.add_argument("group", metavar="GROUP")
    p.add_argument("--to", required=True, help="start, end, N, or @TIMESTAMP_MS")
    p.add_argument(
        "-t",
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="topic to seek (repeatable; default: the topics the group has commits on)",
    )
    p.add_argument("-p", "--partitions", help="only these partitions of the topics, e.g. 0,2,4-6")
    add_connection_options(p)
    p.set_defaults(handler=seek)

    p = verbs.add_parser(
        "delete-offsets",
        help="delete a group's commits on topics (OffsetDelete), e.g. ones it stopped reading",
    )
    p.add_argument("group", metavar="GROUP")
    p.add_argument("-t", "--topic", action="append", required=True, metavar="TOPIC", help="repeatable")
    p.add_argument("-p", "--partitions", help="only these partitions, e.g. 0,2,4-6")
    add_connection_options(p)
    p.set_defaults(handler=delete_offsets)

    p = verbs.add_parser("delete", help="delete empty groups")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    add_connection_options(p)
    p.set_defaults(handler=delete)


def list_groups(args: argparse.Namespace) -> int:
    from kcompat.client import groups

    with open_cluster(args) as cluster:
        listed = groups.list_groups(cluster)
    rows = [
        {"group": g, "state": s or None, "protocol_type": pt, "type": gt or None} for g, s, pt, gt in listed
    ]
    if args.format == "json":
        print_json(rows)
    else:
        print_table(
            ("GROUP", "STATE", "PROTOCOL-TYPE"), [(r["group"], r["state"], r["protocol_type"]) for r in rows]
        )
    return 0


def group_report(cluster: Any, group_id: str) -> dict[str, Any]:
    """The group's state, members and one row per assigned or committed partition, lag included."""
    from kcompat.client import groups, offsets

    g = groups.describe_group(cluster, group_id)
    committed = groups.committed_offsets(cluster, group_id)
    owner: dict[tuple[str, int], Any] = {}
    for m in g.members:
        for topic, parts in m.assignment.items():
            for p in parts:
                owner[(topic, p)] = m
    partitions = sorted(set(owner) | set(committed))
    marks: dict[tuple[str, int], tuple[int, int]] = {}
    for topic_name in sorted({t for t, _ in partitions}):
        wanted = sorted(p for t, p in partitions if t == topic_name)
        meta = cluster.metadata([topic_name]).topics.get(topic_name)
        if meta is None or meta.error_code:
            continue  # a deleted topic's commits still show, without offsets
        known = [p for p in wanted if p in meta.partitions]
        for p, mark in offsets.watermarks(cluster, meta, known).items():
            marks[(topic_name, p)] = mark
    rows = []
    for key in partitions:
        start, end = marks.get(key, (None, None))
        c = committed.get(key)
        who = owner.get(key)
        rows.append(
            {
                "topic": key[0],
                "partition": key[1],
                "committed_offset": c,
                "log_start_offset": start,
                "log_end_offset": end,
                "lag": None if end is None else lag(c, end),
                "member_id": who.member_id if who else None,
                "client_id": who.client_id if who else None,
                "host": who.host if who else None,
            }
        )
    known_lags = [r["lag"] for r in rows if r["lag"] is not None]
    return {
        "group": g.group_id,
        "state": g.state,
        "protocol_type": g.protocol_type,
        "protocol": g.protocol,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": [{"topic": t, "partitions": ps} for t, ps in sorted(m.assignment.items())],
            }
            for m in g.members
        ],
        "partitions": rows,
        "total_lag": sum(known_lags),
    }


def describe(args: argparse.Namespace) -> int:
    with open_cluster(args) as cluster:
        reports = [group_report(cluster, g) for g in args.groups]
    if args.format == "json":
        print_json(reports if len(reports) > 1 else reports[0])
        return 0
    for i, r in enumerate(reports):
        if i:
            print()
        print_pairs(
            [
                ("GROUP", r["group"]),
                ("STATE", r["state"]),
                ("PROTOCOL", r["protocol"] or "-"),
                ("MEMBERS", len(r["members"])),
                ("TOTAL-LAG", r["total_lag"]),
            ]
        )
        print()
        print_table(
            (
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-START-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "MEMBER-ID",
                "CLIENT-ID",
                "HOST",
            ),
            [
                (
                    p["topic"],
                    p["partition"],
                    p["committed_offset"],
                    p["log_start_offset"],
                    p["log_end_offset"],
                    p["lag"],
                    p["member_id"],
                    p["client_id"],
                    p["host"],
                )
                for p in r["partitions"]
            ],
        )
        if r["members"]:
            print()
            print_table(
                ("MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"),
                [
                    (
                        m["member_id"],
                        m["client_id"],
                        m["host"],
                        " ".join(
                            f"{a['topic']}[{','.join(map(str, a['partitions']))}]" for a in m["assignment"]
                        )
                        or "-",
                    )
                    for m in r["members"]
                ],
            )
    return 0


def seek(args: argparse.Namespace) -> int:
    from kcompat.client import groups, offsets
    from kcompat.client.errors import KafkaError
    from kcompat.wire.error_codes import ErrorCode

    spec = parse_offset(args.to)
    if spec.relative:
        raise FormatError("seek --to takes start, end, N or @TIMESTAMP_MS")
    only = parse_partitions(args.partitions)
    with open_cluster(args) as cluster:
        g = groups.describe_group(cluster, args.group)
        if g.state not in EMPTY_STATES:
            raise KafkaError(
                ErrorCode.NON_EMPTY_GROUP,
                f"group {args.group}",
                f"state is {g.state}; offsets can be moved only while the group has no members",
            )
        committed = groups.committed_offsets(cluster, args.group)
        topics = args.topic or sorted({t for t, _ in committed})
        if not topics:
            raise FormatError(f"group {args.group} has no commits: name the topics with --topic")
        new: dict[tuple[str, int], int] = {}
        for name in topics:
            meta = cluster.topic(name)
            chosen = [p for p in sorted(meta.partitions) if only is None or p in only]
            marks = offsets.watermarks(cluster, meta, chosen)
            found = (
                offsets.list_offsets(cluster, meta, spec.value, chosen) if spec.kind == "timestamp" else {}
            )
            for p in chosen:
                start, end = marks[p]
                if spec.kind == "start":
                    target = start
                elif spec.kind == "end":
                    target = end
                elif spec.kind == "timestamp":
                    target = end if found[p] < 0 else found[p]
                else:
                    target = min(max(spec.value, start), end)
                new[(name, p)] = target
        groups.commit_offsets(cluster, args.group, new)
    rows = [
        {"topic": t, "partition": p, "previous_offset": committed.get((t, p)), "new_offset": o}
        for (t, p), o in sorted(new.items())
    ]
    if args.format == "json":
        print_json({"group": args.group, "partitions": rows})
    else:
        print_table(
            ("TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"),
            [(r["topic"], r["partition"], r["previous_offset"], r["new_offset"]) for r in rows],
        )
    return 0


def delete(args: argparse.Namespace) -> int:
    from kcompat.client import groups
    from kcompat.client.errors import KafkaError

    with open_cluster(args) as cluster:
        results = groups.delete_groups(cluster, args.groups)
    rows = [
        {"group": g, "error": KafkaError(results[g]).name if results.get(g) else None} for g in args.groups
    ]
    if args.format == "json":
        print_json(rows)
    for g in args.groups:  # each outcome once: successes on stdout, failures on stderr
        if not results.get(g):
            if args.format != "json":
                print(f"deleted group {g}")
        else:
            fail_kafka(KafkaError(results[g], f"group {g}: DeleteGroups"))
    return EXIT_KAFKA_ERROR if any(results.get(g) for g in args.groups) else 0


def delete_offsets(args: argparse.Namespace) -> int:
    from kcompat.client import groups
    from kcompat.client.errors import KafkaError

    only = parse_partitions(args.partitions)
    with open_cluster(args) as cluster:
        wanted: dict[str, list[int]] = {}
        for name in args.topic:
            meta = cluster.topic(name)
            wanted[name] = [p for p in sorted(meta.partitions) if only is None or p in only]
        results = groups.delete_offsets(cluster, args.group, wanted)
    rows = [
        {"topic": t, "partition": p, "error": KafkaError(code).name if code else None}
        for (t, p), code in sorted(results.items())
    ]
    if args.format == "json":
        print_json({"group": args.group, "partitions": rows})
    else:
        done = [r for r in rows if r["error"] is None]
        print(f"deleted the commits of group {args.group} on {len(done)} partition(s)")
    for (t, p), code in sorted(results.items()):
        if code:
            fail_kafka(KafkaError(code, f"group {args.group} {t}[{p}]: OffsetDelete"))
    return EXIT_KAFKA_ERROR if any(r["error"] for r in rows) else 0
