"""`kcompat topic create|list|describe|alter-config|add-partitions|delete|trim`."""

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
from kcompat.cmd.formats import FormatError, human_bytes, parse_key_values, parse_offset, parse_partitions


def register(commands: Any) -> None:
    topic = commands.add_parser("topic", help="create, list, describe, alter, trim and delete topics")
    verbs = topic.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("create", help="create topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument(
        "-p", "--partitions", type=int, default=-1, help="partitions (default: the broker's num.partitions)"
    )
    p.add_argument(
        "-r", "--replicas", type=int, default=-1, help="replication factor (default: the broker's)"
    )
    p.add_argument(
        "-c", "--config", action="append", default=[], metavar="KEY=VALUE", help="topic config (repeatable)"
    )
    p.add_argument("--dry-run", action="store_true", help="validate only (CreateTopics validate_only)")
    add_connection_options(p)
    p.set_defaults(handler=create)

    p = verbs.add_parser("list", help="list topics with their partition and replica counts")
    p.add_argument(
        "-i", "--internal", action="store_true", help="include internal topics such as __consumer_offsets"
    )
    add_connection_options(p)
    p.set_defaults(handler=list_topics)

    p = verbs.add_parser("describe", help="partitions, leaders, replicas, ISR, offsets, sizes and configs")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    add_connection_options(p)
    p.set_defaults(handler=describe)

    p = verbs.add_parser("alter-config", help="set or delete topic configs (IncrementalAlterConfigs)")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument(
        "-s", "--set", action="append", default=[], metavar="KEY=VALUE", help="set a config (repeatable)"
    )
    p.add_argument(
        "-d", "--delete", action="append", default=[], metavar="KEY", help="back to the default (repeatable)"
    )
    add_connection_options(p)
    p.set_defaults(handler=alter_config)

    p = verbs.add_parser("add-partitions", help="add partitions to topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-n", "--num", type=int, required=True, help="how many partitions to add")
    add_connection_options(p)
    p.set_defaults(handler=add_partitions)

    p = verbs.add_parser("delete", help="delete topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    add_connection_options(p)
    p.set_defaults(handler=delete)

    p = verbs.add_parser("trim", help="delete the records before an offset (DeleteRecords)")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument(
        "-o", "--offset", required=True, help="end (everything), N, or @TIMESTAMP_MS: records below it go"
    )
    p.add_argument("-p", "--partitions", help="partitions, e.g. 0,2,4-6 (default all)")
    add_connection_options(p)
    p.set_defaults(handler=trim)


def create(args: argparse.Namespace) -> int:
    from kcompat.client import admin

    configs = dict(parse_key_values(args.config))
    results = []
    with open_cluster(args) as cluster:
        for name in args.topics:
            admin.create_topic(
                cluster, name, args.partitions, args.replicas, configs, validate_only=args.dry_run
            )
            results.append(name)
    if args.format == "json":
        print_json([{"topic": t, "created": not args.dry_run} for t in results])
    else:
        for t in results:
            print(f"{'validated' if args.dry_run else 'created'} topic {t}")
    return 0


def list_topics(args: argparse.Namespace) -> int:
    with open_cluster(args) as cluster:
        meta = cluster.metadata(None)
    rows = []
    for name in sorted(meta.topics):
        t = meta.topics[name]
        if t.internal and not args.internal:
            continue
        replicas = max((len(p.replicas) for p in t.partitions.values()), default=0)
        rows.append(
            {"topic": name, "partitions": len(t.partitions), "replicas": replicas, "internal": t.internal}
        )
    if args.format == "json":
        print_json(rows)
    else:
        print_table(
            ("TOPIC", "PARTITIONS", "REPLICAS"), [(r["topic"], r["partitions"], r["replicas"]) for r in rows]
        )
    return 0


def _describe_one(cluster: Any, name: str) -> dict[str, Any]:
    from kcompat.client import admin, offsets

    topic = cluster.topic(name)
    marks = offsets.watermarks(cluster, topic)
    sizes = admin.partition_sizes(cluster, topic)
    configs = admin.describe_configs(cluster, admin.TOPIC_RESOURCE, name)
    partitions = [
        {
            "partition": p.partition,
            "leader": p.leader,
            "leader_epoch": p.leader_epoch,
            "replicas": p.replicas,
            "isr": p.isr,
            "offline_replicas": p.offline,
            "log_start_offset": marks[p.partition][0],
            "high_watermark": marks[p.partition][1],
            "size_bytes": sizes.get(p.partition),
        }
        for p in (topic.partitions[i] for i in sorted(topic.partitions))
    ]
    return {
        "topic": name,
        "topic_id": str(topic.topic_id) if topic.topic_id is not None else None,
        "internal": topic.internal,
        "partitions": partitions,
        "configs": [
            {
                "name": c.name,
                "value": None if c.sensitive else c.value,
                "source": c.source,
                "read_only": c.read_only,
                "sensitive": c.sensitive,
            }
            for c in configs
        ],
    }


def describe(args: argparse.Namespace) -> int:
    with open_cluster(args) as cluster:
        described = [_describe_one(cluster, name) for name in args.topics]
    if args.format == "json":
        print_json(described if len(described) > 1 else described[0])
        return 0
    for i, d in enumerate(described):
        if i:
            print()
        parts = d["partitions"]
        print_pairs(
            [
                ("NAME", d["topic"]),
                ("TOPIC ID", d["topic_id"]),
                ("INTERNAL", str(d["internal"]).lower()),
                ("PARTITIONS", len(parts)),
                ("REPLICAS", max((len(p["replicas"]) for p in parts), default=0)),
                ("SIZE", human_bytes(sum(p["size_bytes"] or 0 for p in parts))),
            ]
        )
        print()
        print_table(
            ("PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START-OFFSET", "HIGH-WATERMARK", "SIZE"),
            [
                (
                    p["partition"],
                    p["leader"],
                    p["leader_epoch"],
                    _ids(p["replicas"]),
                    _ids(p["isr"]),
                    p["log_start_offset"],
                    p["high_watermark"],
                    human_bytes(p["size_bytes"]),
                )
                for p in parts
            ],
        )
        print()
        print_table(
            ("CONFIG", "VALUE", "SOURCE"),
            [(c["name"], "(sensitive)" if c["sensitive"] else c["value"], c["source"]) for c in d["configs"]],
        )
    return 0


def _ids(ids: list[int]) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"


def alter_config(args: argparse.Namespace) -> int:
    from kcompat.client import admin

    changes: list[tuple[str, str, str | None]] = [("set", k, v) for k, v in parse_key_values(args.set)]
    changes += [("delete", k, None) for k in args.delete]
    if not changes:
        raise FormatError("alter-config needs --set KEY=VALUE or --delete KEY")
    with open_cluster(args) as cluster:
        for name in args.topics:
            admin.alter_topic_configs(cluster, name, changes)
    if args.format == "json":
        print_json(
            [
                {"topic": t, "set": dict(parse_key_values(args.set)), "deleted": args.delete}
                for t in args.topics
            ]
        )
    else:
        for t in args.topics:
            print(
                f"altered topic {t}: "
                + ", ".join(f"{op} {k}" + ("" if v is None else f"={v}") for op, k, v in changes)
            )
    return 0


def add_partitions(args: argparse.Namespace) -> int:
    from kcompat.client import admin

    if args.num < 1:
        raise FormatError("--num must be at least 1")
    out = []
    with open_cluster(args) as cluster:
        for name in args.topics:
            before = len(cluster.topic(name).partitions)
            admin.add_partitions(cluster, name, before + args.num)
            out.append({"topic": name, "partitions_before": before, "partitions": before + args.num})
    if args.format == "json":
        print_json(out)
    else:
        for r in out:
            print(f"topic {r['topic']}: {r['partitions_before']} -> {r['partitions']} partitions")
    return 0


def delete(args: argparse.Namespace) -> int:
    from kcompat.client import admin
    from kcompat.client.errors import KafkaError

    with open_cluster(args) as cluster:
        results = admin.delete_topics(cluster, args.topics)
    rows = [
        {"topic": t, "error": None if not results.get(t) else KafkaError(results[t]).name}
        for t in args.topics
    ]
    if args.format == "json":
        print_json(rows)
    for t in args.topics:  # each outcome once: successes on stdout, failures on stderr
        if not results.get(t):
            if args.format != "json":
                print(f"deleted topic {t}")
        else:
            fail_kafka(KafkaError(results[t], f"topic {t}: DeleteTopics"))
    return EXIT_KAFKA_ERROR if any(results.get(t) for t in args.topics) else 0


def trim(args: argparse.Namespace) -> int:
    from kcompat.client import admin, offsets

    spec = parse_offset(args.offset)
    if spec.kind == "start" or spec.relative:
        raise FormatError("trim --offset takes end, N or @TIMESTAMP_MS")
    with open_cluster(args) as cluster:
        topic = cluster.topic(args.topic)
        chosen = parse_partitions(args.partitions) or sorted(topic.partitions)
        if spec.kind == "end":
            before = dict.fromkeys(chosen, -1)  # DeleteRecords' "up to the high watermark"
        elif spec.kind == "offset":
            before = dict.fromkeys(chosen, spec.value)
        else:
            found = offsets.list_offsets(cluster, topic, spec.value, chosen)
            ends = offsets.list_offsets(cluster, topic, offsets.LATEST, chosen)
            before = {p: found[p] if found[p] >= 0 else ends[p] for p in chosen}
        result = admin.delete_records(cluster, topic, before)
    rows = [{"partition": p, "log_start_offset": result[p]} for p in sorted(result)]
    if args.format == "json":
        print_json({"topic": args.topic, "partitions": rows})
    else:
        print_table(
            ("PARTITION", "NEW-LOG-START-OFFSET"), [(r["partition"], r["log_start_offset"]) for r in rows]
        )
    return 0
