"""`kcompat cluster info`: brokers, controller, cluster id, and the features from ApiVersions."""

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
