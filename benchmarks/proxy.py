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

Every row runs a third time, "relayed": through benchmarks/relay, a Go byte relay (spliced, nothing
parsed) to a second listener of the same broker (RELAY, see benchmarks/brokers.py) that advertises
the relay's port, so a client that bootstraps through the relay stays on it. No proxy can cost less
than that relay: on 2 cores, where client, broker and any proxy share the cores, relayed/direct is
the floor each proxied/direct figure is read against (docs/benchmarks.md). The relay's CPU per GB
and memory are reported as the proxy's. The three paths alternate within each row.

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
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka.admin import AdminClient

from benchmarks import confluent_clients as cc
from benchmarks import go_tools
from benchmarks.brokers import ROOT
from benchmarks.metadata_probe import wait_for_metadata
from benchmarks.plan import Plan, size_label
from benchmarks.proc_stats import PeakRss, cpu_seconds, rss_bytes

if TYPE_CHECKING:
    from benchmarks.suite import Suite

PATHS = ("direct", "proxied", "relayed")
PROCESS = {"proxied": "proxy", "relayed": "relay"}  # the process each indirect path goes through
E2E_RATE = 2000  # records/s: the added-latency figure
NODE_ID_MAX = 15  # both brokers here are node 0 or 1
START_TIMEOUT_S = 30.0
NAMES = {"kafka": "Kafka", "kcompat": "kcompat"}


def key(workload: str, size: int, path: str) -> str:
    return f"proxy/{workload}/{size}/{path}"


def rows(plan: Plan) -> list[tuple[str, str, int]]:
    """(label, workload, record size) of every throughput row, in report order; key() names each
    path's figures."""
    return [(f"{w} confluent {size_label(s)}", w, s) for w in ("produce", "consume") for s in plan.sizes]


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


class _Hop:
    """A process between the clients and the broker, listening on 127.0.0.1:`port`."""

    def __init__(self, port: int, log_path: Path) -> None:
        self.port, self.log_path = port, log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.stdout is not None:  # the relay's "listening" pipe
            process.stdout.close()
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)


class ProxyProcess(_Hop):
    """`python -m kcompat proxy` in front of `upstream`, on free ports of 127.0.0.1."""

    def __init__(
        self, upstream: str, log_path: Path, python: str = sys.executable, tree: Path = ROOT
    ) -> None:
        super().__init__(_free_base(NODE_ID_MAX + 1), log_path)
        self.upstream = upstream
        self.python = python
        self.tree = tree  # the source tree it runs from (proxy_ab.py: before and after a change)

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


class RelayProcess(_Hop):
    """benchmarks/relay (Go, built on first use) from 127.0.0.1:`port` to the broker's RELAY
    listener, which advertises `port`."""

    def __init__(self, port: int, upstream_port: int, log_path: Path) -> None:
        super().__init__(port, log_path)
        self.upstream_port = upstream_port

    def start(self) -> None:
        binary = go_tools.binary("relay", "the proxy rows' relay floor")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [str(binary), self.bootstrap, f"127.0.0.1:{self.upstream_port}"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            )  # fmt: skip
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != b"listening":  # b"" when it exited
            self.stop()
            raise RuntimeError(
                f"the relay did not start: {self.log_path.read_text(errors='replace').strip()}"
            )
        # The broker must name the relay in Metadata, else the clients would leave it after bootstrap.
        brokers = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=30).brokers
        ports = {b.port for b in brokers.values()}
        if ports != {self.port}:
            self.stop()
            raise RuntimeError(
                f"Metadata through the relay names ports {sorted(ports)}, not the relay's {self.port}"
            )


def run(suite: Suite) -> None:
    plan, b = suite.plan, suite.broker
    timeout = plan.timeouts["run"]
    processes: dict[str, ProxyProcess | RelayProcess] = {
        "proxied": ProxyProcess(b.bootstrap, b.workdir / "proxy.log")
    }
    if b.relay_listener:
        processes["relayed"] = RelayProcess(b.relay_port, b.relay_upstream_port, b.workdir / "relay.log")
    else:
        suite.errors["relay/start"] = "the broker was started without its RELAY listener"
    started: dict[str, ProxyProcess | RelayProcess] = {}
    try:
        for path, process in processes.items():
            try:
                process.start()
                started[path] = process
            except Exception as e:
                suite.errors[f"{PROCESS[path]}/start"] = f"{type(e).__name__}: {e}"
        if "proxied" not in started:
            return
        time.sleep(0.5)
        for path, process in started.items():
            suite.values[f"{PROCESS[path]}/idle_rss_mb"] = rss_bytes(process.pid) / 1e6
        with ExitStack() as stack:
            peaks = {path: stack.enter_context(PeakRss(p.pid)) for path, p in started.items()}
            via, pids = (
                {path: p.bootstrap for path, p in started.items()},
                {path: p.pid for path, p in started.items()},
            )
            _rows(suite, via, pids, timeout)
        for path, peak in peaks.items():
            suite.values[f"{PROCESS[path]}/load_rss_mb"] = peak.peak / 1e6
    finally:
        for process in processes.values():
            process.stop()


def _rows(suite: Suite, via: dict[str, str], pids: dict[str, int], timeout: float) -> None:
    """Every row along every path; `via` is the bootstrap of each indirect path, `pids` its process."""
    plan = suite.plan
    bootstrap = {"direct": suite.broker.bootstrap, **via}
    paths = [p for p in PATHS if p in bootstrap]
    cpu = dict.fromkeys(pids, 0.0)
    moved = dict.fromkeys(pids, 0)

    def measure(k: str, path: str, nbytes: int, work: Callable[[], Any]) -> Any:
        pid = pids.get(path)
        cpu0 = cpu_seconds(pid) if pid else 0.0
        result = suite._measure(k, lambda r: nbytes, work)
        if result is not None and pid:
            cpu[path] += cpu_seconds(pid) - cpu0
            moved[path] += nbytes
        return result

    for size in plan.sizes:
        n = plan.records[size]
        for path in paths:  # each path writes its own topic; the catch-up rows read the direct one
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
        for path in paths:
            k = key("consume", size, path)
            if source not in suite.values:
                suite.errors[k] = "no data: the direct produce row did not run"
                continue
            work = partial(cc.consume, bootstrap[path], f"proxy-direct-{size}", n, timeout)
            if (result := measure(k, path, n * size, work)) is not None:
                suite.values[f"{k}/records_per_s"] = result.records_per_s
                suite.values[f"{k}/mb_per_s"] = result.mb_per_s
    for path, nbytes in moved.items():
        if nbytes:
            suite.values[f"{PROCESS[path]}/cpu_s_per_gb"] = cpu[path] / (nbytes / 1e9)
    _latency(suite, bootstrap, paths)


def _latency(suite: Suite, bootstrap: dict[str, str], paths: list[str]) -> None:
    plan = suite.plan
    for path in paths:
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
    """proxied/direct and relayed/direct per throughput row (keyed by the indirect path's key), and
    the added p99 in ms of each indirect path (for the report and the test)."""
    out: dict[str, float] = {}
    for _label, w, s in rows(plan):
        d = values.get(f"{key(w, s, 'direct')}/records_per_s")
        for path in PATHS[1:]:
            if d and (v := values.get(f"{key(w, s, path)}/records_per_s")) is not None:
                out[key(w, s, path)] = v / d
    for path in PATHS[1:]:
        if "proxy/e2e/direct/p99_ms" in values and f"proxy/e2e/{path}/p99_ms" in values:
            out[f"proxy/e2e/{path}/added_p99_ms"] = (
                values[f"proxy/e2e/{path}/p99_ms"] - values["proxy/e2e/direct/p99_ms"]
            )
    return out


def _median(agg: dict[str, dict[str, Any]], k: str, broker: str) -> float | None:
    s = agg.get(k, {}).get(broker)
    return None if s is None else float(s.median)


def _upstreams(agg: dict[str, dict[str, Any]], plan: Plan) -> list[str]:
    return [
        b
        for b in ("kafka", "kcompat")
        if any(b in agg.get(f"{key(w, s, 'direct')}/records_per_s", {}) for _, w, s in rows(plan))
    ]


def targets(agg: dict[str, dict[str, Any]], plan: Plan) -> list[tuple[str, bool | None, str]]:
    """Issue 27's speed targets (name, met, figure), each proxied ratio beside the relay floor."""
    brokers = _upstreams(agg, plan)
    if not brokers:
        return []
    ok: list[bool] = []
    parts = []
    for b in brokers:
        cells = []
        for _label, w, s in rows(plan):
            d, p, r = (_median(agg, f"{key(w, s, path)}/records_per_s", b) for path in PATHS)
            if not d or p is None:
                continue
            ok.append(p / d >= 0.9)
            floor = f", relay floor {r / d:.2f}x" if r is not None else ""
            cells.append(
                f"{size_label(s)} {'catch-up' if w == 'consume' else w}: proxied {p / d:.2f}x{floor}"
            )
        parts.append(f"in front of {NAMES[b]}: {'; '.join(cells)}")
    out = [("proxy throughput >= 0.9x direct, every row", all(ok) if ok else None, " / ".join(parts))]
    added = []
    for b in brokers:
        d, p, r = (_median(agg, f"proxy/e2e/{path}/p99_ms", b) for path in PATHS)
        if d is not None and p is not None:
            floor = f", relay {r - d:+.2f} ms" if r is not None else ""
            added.append((p - d, f"in front of {NAMES[b]}: proxy {p - d:+.2f} ms{floor}"))
    out.append((
        f"proxy added end-to-end p99 <= 1 ms at {E2E_RATE} records/s",
        all(a <= 1.0 for a, _ in added) if added else None,
        "; ".join(t for _, t in added) or "not measured",
    ))  # fmt: skip
    return out


def section(agg: dict[str, dict[str, Any]], plan: Plan, fmt: Callable[[float], str]) -> list[str]:
    """The report's proxy table: a line per row and upstream broker with direct, proxied, relayed
    (medians) and the two ratios to direct."""
    brokers = _upstreams(agg, plan)
    if not brokers:
        return []
    lines = [
        f"## Through `kcompat proxy` and a byte relay vs direct, same upstream (benchmarks/proxy.py; confluent, "
        f"acks=1, uncompressed; end-to-end at {E2E_RATE} records/s; the relay is the floor any proxy costs here)",
        "", "| row, upstream | direct | proxied | relayed | proxied/direct | relayed/direct |",
        "|---|---:|---:|---:|---:|---:|",
    ]  # fmt: skip

    def line(label: str, keys: list[str], b: str) -> str:
        """`keys`: the figure's key on each path, in PATHS order."""
        d, p, r = (_median(agg, k, b) for k in keys)
        ratio = lambda v: f"{v / d:.2f}x" if d and v is not None else "n/a"  # noqa: E731
        values = " | ".join("n/a" if v is None else fmt(v) for v in (d, p, r))
        return f"| {label}, {NAMES[b]} | {values} | {ratio(p)} | {ratio(r)} |"

    for label, w, s in rows(plan):
        keys = [f"{key(w, s, path)}/records_per_s" for path in PATHS]
        lines += [line(f"{label}, records/s", keys, b) for b in brokers]
    for q in ("p50", "p99"):
        keys = [f"proxy/e2e/{path}/{q}_ms" for path in PATHS]
        lines += [line(f"end-to-end {q}, ms", keys, b) for b in brokers]
    for label, figure in (
        ("process CPU s per GB (its rows)", "cpu_s_per_gb"),
        ("process resident memory idle, MB", "idle_rss_mb"),
        ("process resident memory peak, MB", "load_rss_mb"),
    ):
        for b in brokers:
            cells = " | ".join(
                fmt(v) if (v := _median(agg, f"{p}/{figure}", b)) is not None else "n/a"
                for p in PROCESS.values()
            )
            lines.append(f"| {label}, {NAMES[b]} | | {cells} | | |")
    return [*lines, ""]
