"""`python -m benchmarks` (`make bench`): kcompat and Apache Kafka side by side on this machine.

    python -m benchmarks [--quick] [--rounds N] [--brokers kcompat,kafka] [--no-java]
                         [--suites produce,consume,latency,txn,share,proxy,streams,requests] [--out DIR] [--profile]
                         [--scale [SIZES]] [--cluster] [--metrics-cost] [--tls]

Each round measures the machine's limits (loopback sendfile, page-cache write), then runs every
workload against each broker in turn, started fresh on its own empty log dir under one work
directory (same disk), one broker at a time; the order alternates between rounds so that the
machine's drift hits both. Results go to benchmarks/results/<timestamp>/: report.md, results.json,
throughput.png, latency.png, memory.png (and py-spy flame graphs of kcompat with --profile).

--quick is the smoke run: one round, small counts, a minute or less with both brokers.
--scale adds the scale suite (benchmarks/scale.py: 5,000 partitions, create, restart after a clean
stop and after kill -9, descriptors, memory, Metadata, 1,000-partition produce/consume) once, after
the rounds, into scale.md: opt-in, as it takes several minutes per broker. `--scale 100x50,200x100`
runs it for each TOPICSxPARTITIONS size given (100x50 when none is). --metrics-cost adds kcompat's
produce and consume rows with the admin listener on and scraped every second against it off
(benchmarks/metrics_rows.py), into metrics.md. --tls adds produce and catch-up consume over SSL and
SASL_SSL for each broker, same certificate made at bench time (benchmarks/tls_rows.py), into tls.md.
--cluster adds the cluster suite (benchmarks/cluster.py: 3 kcompat against 3 Kafka brokers, RF=3,
acks=all, failover, and kcompat's 1 vs 2 brokers) once, after the rounds, into cluster.md: opt-in.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import cluster, machine_limits, metrics_rows, report, request_floor, scale, tls_rows
from benchmarks.brokers import KAFKA_JARS, BrokerProcess, KafkaBroker, KcompatBroker
from benchmarks.plan import FULL, QUICK, Plan
from benchmarks.suite import Suite

log = logging.getLogger("benchmarks")
RESULTS = Path(__file__).resolve().parent / "results"
SETTLE_S = 2.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: one round, small counts")
    p.add_argument("--rounds", type=int, help="rounds (default 3, or 1 with --quick)")
    p.add_argument("--brokers", default="kafka,kcompat", help="comma-separated: kafka, kcompat")
    p.add_argument(
        "--no-java", action="store_true", help="skip Kafka's perf-test tools (confluent clients only)"
    )
    p.add_argument(
        "--suites",
        default="produce,consume,latency,txn,share,proxy,streams,requests",
        help="comma-separated: produce, consume, latency, txn (transactional rows: benchmarks/txn.py), "
        "share (share-group rows: benchmarks/share.py), proxy (direct vs through kcompat proxy: "
        "benchmarks/proxy.py), streams (Kafka Streams rows: benchmarks/streams.py), requests (small "
        "requests and the produce ceiling, Go load: benchmarks/small_requests.py)",
    )
    p.add_argument("--out", type=Path, help="results folder (default benchmarks/results/<timestamp>)")
    p.add_argument("--workdir", type=Path, help="where the brokers' log dirs go (default: a new temp dir)")
    p.add_argument("--profile", action="store_true", help="py-spy flame graph of each kcompat suite")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument(
        "--scale", nargs="?", const="100x50", metavar="SIZES", type=scale.parse_sizes,
        help="also run the scale suite (several minutes per broker): TOPICSxPARTITIONS[,...], 100x50 by default",
    )  # fmt: skip
    p.add_argument("--cluster", action="store_true", help="also run the cluster suite (about 10 minutes)")
    p.add_argument("--metrics-cost", action="store_true", help="also run kcompat with metrics on vs off")
    p.add_argument("--tls", action="store_true", help="also run produce/consume over SSL and SASL_SSL")
    return p.parse_args(argv)


def make_plan(args: argparse.Namespace) -> Plan:
    plan = QUICK if args.quick else FULL
    changes: dict[str, Any] = {"suites": tuple(s.strip() for s in args.suites.split(",") if s.strip())}
    if args.rounds:
        changes["rounds"] = args.rounds
    if args.no_java:
        changes["clients"] = tuple(c for c in plan.clients if c != "java")
        changes["consume_clients"] = tuple(c for c in plan.consume_clients if c != "java")
        changes["suites"] = tuple(s for s in changes["suites"] if s != "streams")  # Streams is Java
    return dataclasses.replace(plan, **changes)


def settle() -> None:
    """Let the previous broker's teardown finish (its data deleted, dirty pages written back)
    before the next one starts, so that its cold start and idle figures are its own."""
    os.sync()
    time.sleep(SETTLE_S)


def _java_version() -> str:
    java = shutil.which("java")
    if java is None:
        return "no java"
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr.splitlines()
    return out[0] if out else "java"


def _kafka_version() -> str:
    jars = sorted(KAFKA_JARS.glob("kafka_2.13-*.jar"))
    return f"Apache Kafka {jars[0].stem.split('-', 1)[1]}" if jars else "Apache Kafka (not installed)"


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args(argv)
    plan = make_plan(args)
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    if "kafka" in names and (why := KafkaBroker.available()):
        log.error("cannot run Apache Kafka: %s", why)
        return 2
    unknown = set(names) - {"kafka", "kcompat"}
    if unknown:
        log.error("unknown broker(s): %s", ", ".join(sorted(unknown)))
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or RESULTS / stamp
    own_workdir = args.workdir is None
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kcompat-bench-"))
    brokers: dict[str, BrokerProcess] = {
        # The proxy rows' byte relay forwards to a second listener of each (benchmarks/proxy.py).
        "kcompat": KcompatBroker(workdir / "kcompat", relay_listener="proxy" in plan.suites),
        "kafka": KafkaBroker(workdir / "kafka", relay_listener="proxy" in plan.suites),
    }
    data: dict[str, Any] = {
        "meta": {
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "host": platform.node(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "java": _java_version(), "kafka": _kafka_version(),
            "plan": dataclasses.asdict(plan), "orders": [], "quick": args.quick,
        },
        "machine": [], "runs": [],
    }  # fmt: skip
    t0 = time.perf_counter()
    try:
        for n in range(plan.rounds):
            limits = {
                "round": n,
                "sendfile_mbs": machine_limits.loopback_sendfile_mbs(workdir / "machine", plan.machine_mib),
                "write_mbs": machine_limits.page_cache_write_mbs(workdir / "machine", plan.machine_mib),
            }
            data["machine"].append(limits)
            log.info("round %d: loopback sendfile %.0f MB/s, page-cache write %.0f MB/s",
                     n + 1, limits["sendfile_mbs"], limits["write_mbs"])  # fmt: skip
            if "requests" in plan.suites:  # the floor under that suite's rows (request_floor.py)
                try:
                    limits.update(request_floor.measure(workdir / "machine", plan.small_requests,
                                                        plan.ceiling_records, plan.timeouts["run"]))  # fmt: skip
                    log.info("round %d: the Python floor %.0f requests/s at %.1f µs, ceiling %.0f MB/s", n + 1,
                             limits["floor_requests_per_s"], limits["floor_cpu_us_per_request"],
                             limits["floor_ceiling_mbs"])  # fmt: skip
                except Exception as e:  # a figure for reading the others: its absence fails nothing
                    log.warning("round %d: the Python floor not measured: %s", n + 1, e)
            order = names if n % 2 == 0 else names[::-1]
            data["meta"]["orders"].append(order)
            # The share and streams rows run in the first round only: group joins are most of their time.
            round_plan = (
                plan
                if n == 0
                else dataclasses.replace(
                    plan, suites=tuple(s for s in plan.suites if s not in ("share", "streams"))
                )
            )
            for name in order:
                settle()
                suite = Suite(brokers[name], round_plan, out / "profiles" if args.profile else None)
                log.info("round %d: %s", n + 1, name)
                try:
                    suite.run()
                except Exception as e:
                    log.error("%s failed in round %d: %s", name, n + 1, e)
                    suite.errors["suite"] = f"{type(e).__name__}: {e}"
                data["runs"].append({"broker": name, "round": n, "values": suite.values, "errors": suite.errors,
                                     "notes": suite.notes})  # fmt: skip
                data["meta"]["seconds"] = time.perf_counter() - t0
                report.write(data, plan, out, with_plots=False)  # partial results survive an interruption
    finally:
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    data["meta"]["seconds"] = time.perf_counter() - t0
    report.write(data, plan, out, with_plots=not args.no_plots)
    print((out / "report.md").read_text())
    if args.scale:
        settle()
        tables = []
        for topics, partitions in args.scale:
            scale_table = scale.table(scale.run(names, topics, partitions, 1000, args.workdir))
            tables.append(f"# Scale: {topics} topics x {partitions} partitions\n\n{scale_table}\n")
            print(scale_table)
        (out / "scale.md").write_text("\n".join(tables))
    if args.cluster:
        settle()
        cluster_plan = cluster.QUICK if args.quick else cluster.FULL
        cluster_table = cluster.table(cluster.run(names, cluster_plan, args.workdir, java=not args.no_java))
        (out / "cluster.md").write_text(f"# Cluster: 3 brokers, RF=3, acks=all\n\n{cluster_table}\n")
        print(cluster_table)
    if args.metrics_cost:
        settle()
        metrics_table = metrics_rows.table(metrics_rows.run(plan, args.workdir), plan)
        (out / "metrics.md").write_text(f"# kcompat: metrics on vs off\n\n{metrics_table}\n")
        print(metrics_table)
    if args.tls:
        settle()
        tls_table = tls_rows.table(tls_rows.run(plan, names, args.workdir), plan)
        (out / "tls.md").write_text(f"# Produce and consume over TLS\n\n{tls_table}\n")
        print(tls_table)
    log.info("results in %s (%.0f s)", out, data["meta"]["seconds"])
    failed = [r for r in data["runs"] if r["errors"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
