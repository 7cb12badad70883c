"""The proxy rows of the side-by-side run (the "proxy" suite, issue 27), against each broker:
the same confluent workloads direct to the broker and through a `kcompat proxy` process in front
of it, alternating, on topics of their own:

- produce:   confluent producer, one partition, acks=1, uncompressed, 100 B and 1 KiB records;
- catch-up:  the confluent assigned consumer (fetch.queue.backoff.ms=10) reading what the direct
             produce row wrote, from offset 0 to its end;
- latency:   end-to-end p50/p99 at E2E_RATE records/s (100 B, acks=1, linger.ms=0): the proxy's
             added latency is the proxied p99 minus the direct p99 (same broker, same run);
- the proxy process's own CPU per GB over the proxied produce and catch-up rows (record value
  bytes, as the broker's figures), its resident memory idle and its peak under load.

The proxy is started as its users start it (`python -m kcompat proxy`, uvloop), once per broker.
Kroxylicious is not run here: see docs/benchmarks.md (its runnable proxy is not on Maven Central).
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import confluent_clients as cc
from benchmarks.brokers import ROOT
from benchmarks.metadata_probe import wait_for_metadata
from benchmarks.plan import Plan, size_label
from benchmarks.proc_stats import PeakRss, cpu_seconds, rss_bytes

if TYPE_CHECKING:
    from benchmarks.suite import Suite

PATHS = ("direct", "proxied")
E2E_RATE = 2000  # records/s: the added-latency figure
NODE_ID_MAX = 15  # both brokers here are node 0 or 1
START_TIMEOUT_S = 30.0


def key(workload: str, size: int, path: str) -> str:
    return f"proxy/{workload}/{size}/{path}"


def rows(plan: Plan) -> list[tuple[str, str, str]]:
    """(label, direct key, proxied key) of every throughput row, in report order."""
    return [
        (f"{w} confluent {size_label(s)}", key(w, s, "direct"), key(w, s, "proxied"))
        for w in ("produce", "consume") for s in plan.sizes
    ]  # fmt: skip


def _free_base(span: int) -> int:
    """A port whose next `span` ports are free too: the bootstrap listener and the node listeners."""
    for _ in range(200):
        base = random.randrange(20000, 60000)
        try:
            for port in range(base, base + span + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free port range for the proxy's listeners")


class ProxyProcess:
    """`python -m kcompat proxy` in front of `upstream`, on free ports of 127.0.0.1."""

    def __init__(
        self, upstream: str, log_path: Path, python: str = sys.executable, tree: Path = ROOT
    ) -> None:
        self.upstream = upstream
        self.log_path = log_path
        self.python = python
        self.tree = tree  # the source tree it runs from (proxy_ab.py: before and after a change)
        self.port = _free_base(NODE_ID_MAX + 1)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        command = [
            self.python, "-m", "kcompat", "proxy", "--upstream", self.upstream,
            "--bootstrap", self.bootstrap, "--node-port-base", str(self.port + 1),
            "--override", f"proxy.node.id.max={NODE_ID_MAX}", "--log-level", "WARNING",
        ]  # fmt: skip
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            env = {**os.environ, "PYTHONPATH": str(self.tree)}
            self.process = subprocess.Popen(
                command, cwd=self.tree, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        alive = lambda: self.process is not None and self.process.poll() is None  # noqa: E731
        wait_for_metadata("127.0.0.1", self.port, time.perf_counter(), START_TIMEOUT_S, alive)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(15)
        self.process = None


def run(suite: Suite) -> None:
    plan, b = suite.plan, suite.broker
    timeout = plan.timeouts["run"]
    proxy = ProxyProcess(b.bootstrap, b.workdir / "proxy.log")
    try:
        proxy.start()
    except Exception as e:
        suite.errors["proxy/start"] = f"{type(e).__name__}: {e}"
        proxy.stop()
        return
    try:
        time.sleep(0.5)
        suite.values["proxy/idle_rss_mb"] = rss_bytes(proxy.pid) / 1e6
        with PeakRss(proxy.pid) as peak:
            _rows(suite, proxy, timeout)
        suite.values["proxy/load_rss_mb"] = peak.peak / 1e6
    finally:
        proxy.stop()


def _rows(suite: Suite, proxy: ProxyProcess, timeout: float) -> None:
    plan, direct = suite.plan, suite.broker.bootstrap
    bootstrap = {"direct": direct, "proxied": proxy.bootstrap}
    proxy_cpu = 0.0
    proxy_bytes = 0

    def measure(k: str, path: str, nbytes: int, work: Callable[[], Any]) -> Any:
        nonlocal proxy_cpu, proxy_bytes
        cpu0 = cpu_seconds(proxy.pid)
        result = suite._measure(k, lambda r: nbytes, work)
        if result is not None and path == "proxied":
            proxy_cpu += cpu_seconds(proxy.pid) - cpu0
            proxy_bytes += nbytes
        return result

    for size in plan.sizes:
        n = plan.records[size]
        for path in PATHS:  # each path writes its own topic; the catch-up rows read the direct one
            k, topic = key("produce", size, path), f"proxy-{path}-{size}"
            try:
                cc.create_topic(bootstrap[path], topic)
            except Exception as e:
                suite.errors[k] = f"creating the topic: {e}"
                continue
            work = partial(cc.produce, bootstrap[path], topic, n, size, "1", "none", timeout)
            if (result := measure(k, path, n * size, work)) is not None:
                suite.values[f"{k}/records_per_s"] = result.records_per_s
                suite.values[f"{k}/mb_per_s"] = result.mb_per_s
    for size in plan.sizes:
        n, source = plan.records[size], f"{key('produce', size, 'direct')}/records_per_s"
        for path in PATHS:
            k = key("consume", size, path)
            if source not in suite.values:
                suite.errors[k] = "no data: the direct produce row did not run"
                continue
            work = partial(cc.consume, bootstrap[path], f"proxy-direct-{size}", n, timeout)
            if (result := measure(k, path, n * size, work)) is not None:
                suite.values[f"{k}/records_per_s"] = result.records_per_s
                suite.values[f"{k}/mb_per_s"] = result.mb_per_s
    if proxy_bytes:
        suite.values["proxy/cpu_s_per_gb"] = proxy_cpu / (proxy_bytes / 1e9)
    for path in PATHS:
        k, topic = f"proxy/e2e/{path}", f"proxy-e2e-{path}"
        try:
            cc.create_topic(bootstrap[path], topic)
        except Exception as e:
            suite.errors[k] = f"creating the topic: {e}"
            continue
        work = partial(cc.end_to_end, bootstrap[path], topic, E2E_RATE, plan.e2e_seconds, plan.e2e_size)
        result = suite._measure(k, lambda r: 0, work)
        if result is None or not result.seconds_each:
            continue
        ms = sorted(s * 1000 for s in result.seconds_each)
        suite.values[f"{k}/p50_ms"] = _percentile(ms, 50)
        suite.values[f"{k}/p99_ms"] = _percentile(ms, 99)


def _percentile(ordered: list[float], p: float) -> float:
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


def ratios(values: dict[str, float], plan: Plan) -> dict[str, float]:
    """proxied/direct per throughput row, and the added p99 in ms (for the report and the test)."""
    out: dict[str, float] = {}
    for _label, d, p in rows(plan):
        if f"{d}/records_per_s" in values and f"{p}/records_per_s" in values:
            out[p.rsplit("/", 1)[0]] = values[f"{p}/records_per_s"] / values[f"{d}/records_per_s"]
    if "proxy/e2e/direct/p99_ms" in values and "proxy/e2e/proxied/p99_ms" in values:
        out["proxy/e2e/added_p99_ms"] = values["proxy/e2e/proxied/p99_ms"] - values["proxy/e2e/direct/p99_ms"]
    return out


def section(agg: dict[str, dict[str, Any]], plan: Plan, fmt: Callable[[float], str]) -> list[str]:
    """The report's proxy table: per upstream broker, direct, proxied and proxied/direct (medians)."""
    brokers = [
        b
        for b in ("kafka", "kcompat")
        if any(b in agg.get(f"{d}/records_per_s", {}) for _, d, _ in rows(plan))
    ]
    if not brokers:
        return []
    names = {"kafka": "Kafka", "kcompat": "kcompat"}
    head = "".join(f" {names[b]} direct | {names[b]} proxied | proxied/direct |" for b in brokers)
    lines = [
        f"## Through `kcompat proxy` vs direct, same upstream (benchmarks/proxy.py; confluent, acks=1, "
        f"uncompressed; end-to-end at {E2E_RATE} records/s)",
        "", f"| row, upstream |{head}", "|---|" + "---:|---:|---:|" * len(brokers),
    ]  # fmt: skip

    def med(k: str, b: str) -> float | None:
        s = agg.get(k, {}).get(b)
        return None if s is None else float(s.median)

    def cells(d: str, p: str) -> str:
        out = ""
        for b in brokers:
            dv, pv = med(d, b), med(p, b)
            r = f"{pv / dv:.2f}x" if dv and pv is not None else "n/a"
            out += f" {'n/a' if dv is None else fmt(dv)} | {'n/a' if pv is None else fmt(pv)} | {r} |"
        return out

    lines += [
        f"| {label}, records/s |{cells(f'{d}/records_per_s', f'{p}/records_per_s')}"
        for label, d, p in rows(plan)
    ]
    lines += [
        f"| end-to-end {q}, ms |{cells(f'proxy/e2e/direct/{q}_ms', f'proxy/e2e/proxied/{q}_ms')}"
        for q in ("p50", "p99")
    ]
    for label, k in (
        ("proxy CPU s per GB (proxied rows)", "proxy/cpu_s_per_gb"),
        ("proxy resident memory idle, MB", "proxy/idle_rss_mb"),
        ("proxy resident memory peak, MB", "proxy/load_rss_mb"),
    ):
        lines.append(
            f"| {label} |"
            + "".join(f" | {fmt(v) if (v := med(k, b)) is not None else 'n/a'} | |" for b in brokers)
        )
    return [*lines, ""]
