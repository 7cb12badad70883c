"""The proxy rows before and after a change, in one run: a proxy from each source tree in front of
the same upstream, alternating with direct, round by round (benchmarks/proxy.py's workloads).

    git archive HEAD~3 kcompat | tar -x -C /tmp/before      # the tree to compare against
    python -m benchmarks.proxy_ab --upstream kafka --before /tmp/before --rounds 3 --records 400000

Prints each round's records/s and the proxy's CPU seconds, then medians and proxied/direct.
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="proxy-ab-"))
    broker: BrokerProcess = (
        KafkaBroker(work / "broker") if args.upstream == "kafka" else KcompatBroker(work / "broker")
    )
    broker.start()
    proxies = {"before": ProxyProcess(broker.bootstrap, work / "before.log", tree=args.before),
               "after": ProxyProcess(broker.bootstrap, work / "after.log", tree=ROOT)}  # fmt: skip
    results: dict[tuple[str, str], list[float]] = {}
    try:
        for proxy in proxies.values():
            proxy.start()
        paths = {"direct": broker.bootstrap, **{k: p.bootstrap for k, p in proxies.items()}}
        for r in range(args.rounds):
            source = f"ab-{r}-direct"
            for name, bootstrap in paths.items():
                topic = f"ab-{r}-{name}"
                cc.create_topic(bootstrap, topic)
                pid = proxies[name].pid if name in proxies else None
                line = f"round {r} {name}:"
                for workload in ("produce", "consume"):
                    cpu0 = cpu_seconds(pid) if pid else 0.0
                    if workload == "produce":
                        result = cc.produce(bootstrap, topic, args.records, args.size, "1", "none", 300)
                    else:
                        result = cc.consume(bootstrap, source, args.records, 300)
                    cpu = cpu_seconds(pid) - cpu0 if pid else 0.0
                    results.setdefault((workload, name), []).append(result.records_per_s)
                    line += f" {workload} {result.records_per_s:,.0f}/s (proxy CPU {cpu:.2f} s)"
                print(line, flush=True)
        for workload in ("produce", "consume"):
            direct = statistics.median(results[workload, "direct"])
            for name in proxies:
                m = statistics.median(results[workload, name])
                print(
                    f"{workload} {args.size} B, {args.upstream}, {name}: {m:,.0f}/s = {m / direct:.2f}x direct"
                )
    finally:
        for proxy in proxies.values():
            proxy.stop()
        broker.stop()


if __name__ == "__main__":
    main()
