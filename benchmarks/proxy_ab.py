"""The proxy rows before and after a change, in one run: a proxy from each source tree in front of
the same upstream, alternating with direct, round by round (benchmarks/proxy.py's workloads).

    git archive HEAD~3 kcompat | tar -x -C /tmp/before      # the tree to compare against
    python -m benchmarks.proxy_ab --upstream kafka --before /tmp/before --rounds 3 --records 400000

    python -m benchmarks.proxy_ab --upstream kafka --before /tmp/before --rounds 7 --consume-only

Prints each round's records/s and the proxy's CPU seconds (and per GB of record values), then
medians and proxied/direct. `--consume-only` writes one topic once and reads it every round (the
page cache hot, a tenth of the disk); `--after` runs the second proxy from another tree than this.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from benchmarks import confluent_clients as cc
from benchmarks.brokers import ROOT, BrokerProcess, KafkaBroker, KcompatBroker
from benchmarks.proc_stats import cpu_seconds
from benchmarks.proxy import ProxyProcess


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", choices=("kafka", "kcompat"), default="kafka")
    ap.add_argument("--before", type=Path, required=True, help="a source tree holding the old kcompat/")
    ap.add_argument("--after", type=Path, default=ROOT, help="the tree with the change (this one)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument(
        "--consume-only", action="store_true", help="produce once direct, then only catch-up rounds"
    )
    args = ap.parse_args()
    workloads = ("consume",) if args.consume_only else ("produce", "consume")
    work = Path(tempfile.mkdtemp(prefix="proxy-ab-"))
    broker: BrokerProcess = (
        KafkaBroker(work / "broker") if args.upstream == "kafka" else KcompatBroker(work / "broker")
    )
    broker.start()
    proxies = {"before": ProxyProcess(broker.bootstrap, work / "before.log", tree=args.before),
               "after": ProxyProcess(broker.bootstrap, work / "after.log", tree=args.after)}  # fmt: skip
    results: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}  # the proxy's CPU seconds per GB of record values
    try:
        for proxy in proxies.values():
            proxy.start()
        paths = {"direct": broker.bootstrap, **{k: p.bootstrap for k, p in proxies.items()}}
        if args.consume_only:  # one topic read by every round: fewer gigabytes on the disk
            cc.create_topic(broker.bootstrap, "ab-source")
            cc.produce(broker.bootstrap, "ab-source", args.records, args.size, "1", "none", 300)
        for r in range(args.rounds):
            source = "ab-source" if args.consume_only else f"ab-{r}-direct"
            for name, bootstrap in paths.items():
                topic = f"ab-{r}-{name}"
                if not args.consume_only:
                    cc.create_topic(bootstrap, topic)
                pid = proxies[name].pid if name in proxies else None
                line = f"round {r} {name}:"
                for workload in workloads:
                    cpu0 = cpu_seconds(pid) if pid else 0.0
                    if workload == "produce":
                        result = cc.produce(bootstrap, topic, args.records, args.size, "1", "none", 300)
                    else:
                        result = cc.consume(bootstrap, source, args.records, 300)
                    cpu = cpu_seconds(pid) - cpu0 if pid else 0.0
                    results.setdefault((workload, name), []).append(result.records_per_s)
                    per_gb = cpu / (args.records * args.size / 1e9)
                    cpus.setdefault((workload, name), []).append(per_gb)
                    line += f" {workload} {result.records_per_s:,.0f}/s (proxy CPU {cpu:.2f} s, {per_gb:.2f} s/GB)"
                print(line, flush=True)
        for workload in workloads:
            direct = statistics.median(results[workload, "direct"])
            for name in proxies:
                m = statistics.median(results[workload, name])
                cpu = statistics.median(cpus[workload, name])
                print(
                    f"{workload} {args.size} B, {args.upstream}, {name}: {m:,.0f}/s = {m / direct:.2f}x direct,"
                    f" proxy CPU {cpu:.2f} s/GB"
                )
    finally:
        for proxy in proxies.values():
            proxy.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)  # the broker's logs: gigabytes after a few rounds


if __name__ == "__main__":
    main()
