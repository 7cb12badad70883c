"""`kcompat cluster info|health`: brokers, controller, cluster id, the features from ApiVersions;
and health from Metadata: brokers that replicas name but Metadata does not list are down, a
partition without a leader is leaderless, one whose ISR is smaller than its replicas is
under-replicated."""

from __future__ import annotations

import argparse
from typing import Any

from kcompat.cmd.common import add_connection_options, open_cluster, print_json, print_pairs, print_table


def register(commands: Any) -> None:
    cluster = commands.add_parser("cluster", help="cluster id, brokers, controller and features")
    verbs = cluster.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("info", help="cluster id, brokers, controller and features")
    p.add_argument(
        "--apis", action="store_true", help="also list the API versions the bootstrap broker offers"
    )
    add_connection_options(p)
    p.set_defaults(handler=info)

    p = verbs.add_parser(
        "health",
        help="is every broker up and every partition led and fully replicated (as rpk cluster health)",
    )
    p.add_argument("--check", action="store_true", help="exit 1 when the cluster is not healthy")
    add_connection_options(p)
    p.set_defaults(handler=health)


def cluster_report(cluster: Any) -> dict[str, Any]:
    from kcompat.wire.messages import APIS

    meta = cluster.metadata([])
    conn = cluster.bootstrap
    return {
        "cluster_id": meta.cluster_id,
        "controller_id": meta.controller_id,
        "brokers": [
            {"node_id": n, "host": h, "port": p, "rack": r} for n, (h, p, r) in sorted(meta.brokers.items())
        ],
        "bootstrap": conn.address,
        "finalized_features_epoch": conn.finalized_features_epoch,
        "finalized_features": [
            {
                "name": f.name,
                "min_version_level": f.min_version_level,
                "max_version_level": f.max_version_level,
            }
            for f in conn.finalized_features
        ],
        "supported_features": [
            {"name": f.name, "min_version": f.min_version, "max_version": f.max_version}
            for f in conn.supported_features
        ],
        "apis": [
            {"api_key": k, "name": APIS[k].name if k in APIS else None, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(conn.api_versions.items())
        ],
    }


def info(args: argparse.Namespace) -> int:
    with open_cluster(args) as cluster:
        report = cluster_report(cluster)
    if not args.apis:
        report.pop("apis")
    if args.format == "json":
        print_json(report)
        return 0
    print_pairs(
        [
            ("CLUSTER ID", report["cluster_id"]),
            ("CONTROLLER", report["controller_id"]),
            ("BROKERS", len(report["brokers"])),
            ("BOOTSTRAP", report["bootstrap"]),
        ]
    )
    print()
    print_table(
        ("ID", "HOST", "PORT", "RACK"),
        [
            (
                f"{b['node_id']}*" if b["node_id"] == report["controller_id"] else b["node_id"],
                b["host"],
                b["port"],
                b["rack"],
            )
            for b in report["brokers"]
        ],
    )
    features: dict[str, list[Any]] = {}
    for f in report["supported_features"]:
        features[f["name"]] = [f"{f['min_version']}-{f['max_version']}", None]
    for f in report["finalized_features"]:
        features.setdefault(f["name"], [None, None])[1] = f["max_version_level"]
    print()
    if features:
        print_table(
            ("FEATURE", "SUPPORTED", "FINALIZED"),
            [(n, s, fin) for n, (s, fin) in sorted(features.items())],
            title=f"features (finalized epoch {report['finalized_features_epoch']})",
        )
    else:
        print("features: none reported (ApiVersions below v3, or a broker without feature flags)")
    if args.apis:
        print()
        print_table(
            ("KEY", "API", "MIN", "MAX"),
            [(a["api_key"], a["name"], a["min_version"], a["max_version"]) for a in report["apis"]],
        )
    return 0


def health_report(cluster: Any) -> dict[str, Any]:
    meta = cluster.metadata(None)
    live = set(meta.brokers)
    named: set[int] = set()
    leaderless, under = [], []
    for t in sorted(meta.topics.values(), key=lambda t: t.name):
        for p in sorted(t.partitions.values(), key=lambda p: p.partition):
            named.update(p.replicas)
            if p.leader < 0:
                leaderless.append(f"{t.name}/{p.partition}")
            if len(p.isr) < len(p.replicas):
                under.append(f"{t.name}/{p.partition}")
    down = sorted(named - live)
    return {
        "healthy": not (down or leaderless or under) and meta.controller_id >= 0,
        "controller_id": meta.controller_id,
        "brokers": sorted(live),
        "brokers_down": down,
        "leaderless_partitions": leaderless,
        "under_replicated_partitions": under,
    }


def health(args: argparse.Namespace) -> int:
    with open_cluster(args) as cluster:
        report = health_report(cluster)
    if args.format == "json":
        print_json(report)
    else:
        print_pairs(
            [
                ("HEALTHY", str(report["healthy"]).lower()),
                ("CONTROLLER", report["controller_id"]),
                ("BROKERS", " ".join(map(str, report["brokers"]))),
                ("BROKERS-DOWN", " ".join(map(str, report["brokers_down"])) or "none"),
                ("LEADERLESS", " ".join(report["leaderless_partitions"]) or "none"),
                ("UNDER-REPLICATED", " ".join(report["under_replicated_partitions"]) or "none"),
            ]
        )
    return 1 if args.check and not report["healthy"] else 0
