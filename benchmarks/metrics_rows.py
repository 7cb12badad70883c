"""What the metrics cost end to end (issue 17): kcompat's produce and catch-up consume rows with the
admin listener on and scraped every second, against the same with `admin.listener=` (off).

    python -m benchmarks.metrics_rows [--quick] [--rounds N]
    (or `python -m benchmarks --metrics-cost`, after the rounds, into metrics.md)

Per round, one fresh broker each way (the order alternates between rounds): the confluent producer
at acks=1 uncompressed for every record size of the plan, then the catch-up read of what it wrote.
Figures are records/s and the broker's CPU s/GB, median over rounds; on a shared machine only the
ratio on/off of many rounds means anything.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import tempfile
import threading
import urllib.request
from pathlib import Path

from benchmarks import confluent_clients as cc
from benchmarks.brokers import KcompatBroker, free_port
from benchmarks.plan import FULL, QUICK, Plan, size_label
from benchmarks.proc_stats import cpu_seconds

log = logging.getLogger("benchmarks")


class MetricsBroker(KcompatBroker):
    """kcompat with its admin listener on a port of its own, or switched off."""

    def __init__(self, workdir: Path, *, metrics: bool) -> None:
        super().__init__(workdir)
        self.metrics = metrics
        self.admin_port = 0

    def properties(self) -> dict[str, str]:
        self.admin_port = free_port() if self.metrics else 0
        address = f"{self.host}:{self.admin_port}" if self.metrics else ""
        return {**super().properties(), "admin.listener": address}


class Scraper(threading.Thread):
    """GET /metrics every `interval` seconds, as Prometheus would, until stopped."""

    def __init__(self, url: str, interval: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.scrapes = self.failures = 0
        self._done = threading.Event()

    def run(self) -> None:
        while True:
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    r.read()
                self.scrapes += 1
            except OSError:
                self.failures += 1
            if self._done.wait(self.interval):
                return

    def stop(self) -> None:
        self._done.set()
        self.join(10)


def _rows(broker: MetricsBroker, plan: Plan) -> dict[str, float]:
    out: dict[str, float] = {}
    timeout = plan.timeouts["run"]
    for size in plan.sizes:
        count = plan.records[size]
        topic = f"metrics-cost-{size}"
        cc.create_topic(broker.bootstrap, topic)
        cpu0 = cpu_seconds(broker.pid)
        p = cc.produce(broker.bootstrap, topic, count, size, "1", "none", timeout)
        out[f"produce/{size}/records_per_s"] = p.records_per_s
        out[f"produce/{size}/cpu_s_per_gb"] = (cpu_seconds(broker.pid) - cpu0) / (p.bytes / 1e9)
        cpu0 = cpu_seconds(broker.pid)
        c = cc.consume(broker.bootstrap, topic, count, timeout)
        out[f"consume/{size}/records_per_s"] = c.records_per_s
        out[f"consume/{size}/cpu_s_per_gb"] = (cpu_seconds(broker.pid) - cpu0) / (c.bytes / 1e9)
    return out


def run_once(workdir: Path, plan: Plan, *, metrics: bool) -> dict[str, float]:
    broker = MetricsBroker(workdir / ("metrics-on" if metrics else "metrics-off"), metrics=metrics)
    broker.start()
    scraper = Scraper(f"http://{broker.host}:{broker.admin_port}/metrics") if metrics else None
    try:
        if scraper is not None:
            scraper.start()
        out = _rows(broker, plan)
        if scraper is not None:
            scraper.stop()
            out["scrapes"] = scraper.scrapes
            if scraper.failures or not scraper.scrapes:
                raise RuntimeError(
                    f"{scraper.failures} scrapes of {scraper.url} failed, {scraper.scrapes} answered"
                )
        return out
    finally:
        if scraper is not None:
            scraper.stop()
        broker.stop()
        broker.cleanup()


def run(
    plan: Plan, workdir: Path | None = None, rounds: int | None = None
) -> dict[str, list[dict[str, float]]]:
    """`rounds` (the plan's by default) of both ways, in a new temp dir under `workdir`."""
    base = Path(tempfile.mkdtemp(prefix="kcompat-metrics-", dir=workdir))
    results: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    try:
        for n in range(rounds or plan.rounds):
            for side in ("on", "off") if n % 2 == 0 else ("off", "on"):
                try:
                    results[side].append(run_once(base, plan, metrics=side == "on"))
                except Exception as e:
                    log.warning("metrics %s, round %d failed: %s", side, n + 1, e)
                log.info("metrics %s, round %d: %s", side, n + 1, results[side][-1:] or "failed")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return results


def table(results: dict[str, list[dict[str, float]]], plan: Plan) -> str:
    def median(side: str, key: str) -> float | None:
        vals = [r[key] for r in results[side] if key in r]
        return statistics.median(vals) if vals else None

    lines = ["| row | metrics on | metrics off | on/off |", "|---|---:|---:|---:|"]
    for kind in ("produce", "consume"):
        for size in plan.sizes:
            for fig, unit in (("records_per_s", "records/s"), ("cpu_s_per_gb", "CPU s/GB")):
                key = f"{kind}/{size}/{fig}"
                on, off = median("on", key), median("off", key)
                ratio = f"{on / off:.2f}" if on and off else "—"
                cells = [f"{v:,.0f}" if v and v >= 100 else f"{v:.2f}" if v else "—" for v in (on, off)]
                lines.append(f"| {kind} {size_label(size)} ({unit}) | {cells[0]} | {cells[1]} | {ratio} |")
    scrapes = [r.get("scrapes", 0) for r in results["on"]]
    lines.append(
        f"\nrounds: {len(results['on'])} on, {len(results['off'])} off; scrapes per on-run: {scrapes}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.metrics_rows", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    plan = QUICK if args.quick else FULL
    print(table(run(plan, args.workdir, args.rounds), plan))


if __name__ == "__main__":
    main()
