"""results.json, report.md and the PNG plots of a side-by-side run.

Per figure and broker: median, min and max over the rounds; the ratio is median(kcompat) /
median(Kafka) for every figure (for figures where lower is better, below 1 means kcompat wins).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import proxy, request_floor, share, small_requests, streams, txn
from benchmarks.plan import Plan, consume_key, figures, produce_key, size_label

KCOMPAT, KAFKA = "kcompat", "kafka"


@dataclass
class Stat:
    median: float
    low: float
    high: float
    n: int


def stat(values: list[float]) -> Stat | None:
    if not values:
        return None
    return Stat(statistics.median(values), min(values), max(values), len(values))


def aggregate(runs: list[dict[str, Any]]) -> dict[str, dict[str, Stat]]:
    """{figure key: {broker: Stat}} over all runs."""
    by_key: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for key, value in run["values"].items():
            by_key.setdefault(key, {}).setdefault(run["broker"], []).append(value)
    return {
        key: {b: s for b, vs in per.items() if (s := stat(vs)) is not None} for key, per in by_key.items()
    }


def ratio(agg: dict[str, dict[str, Stat]], key: str) -> float | None:
    per = agg.get(key, {})
    if KCOMPAT in per and KAFKA in per and per[KAFKA].median:
        return per[KCOMPAT].median / per[KAFKA].median
    return None


def _fmt(x: float) -> str:
    if x >= 10000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def _cell(s: Stat | None) -> str:
    if s is None:
        return "n/a"
    if s.n == 1:
        return _fmt(s.median)
    return f"{_fmt(s.median)} ({_fmt(s.low)} - {_fmt(s.high)})"


def _ratio_cell(r: float | None, higher_is_better: bool) -> str:
    if r is None:
        return "n/a"
    good = r >= 1.0 if higher_is_better else r <= 1.0
    return f"**{r:.2f}x**" if good else f"{r:.2f}x"


def _table(agg: dict[str, dict[str, Stat]], rows: list[tuple[str, str, bool]], first: str) -> list[str]:
    lines = [f"| {first} | Kafka | kcompat | kcompat/Kafka |", "|---|---:|---:|---:|"]
    for label, key, hib in rows:
        per = agg.get(key, {})
        lines.append(
            f"| {label} | {_cell(per.get(KAFKA))} | {_cell(per.get(KCOMPAT))} | {_ratio_cell(ratio(agg, key), hib)} |"
        )
    return lines


MACHINE_KEYS = ("sendfile_mbs", "write_mbs", *request_floor.FIGURES)


def _floor_small(agg: dict[str, dict[str, Stat]], machine: dict[str, Stat | None]) -> str:
    """The Python floor's small-request figures against Kafka's acks=1 row, the floor's own job
    (see request_floor.py)."""
    rps, cpu = machine.get("floor_requests_per_s"), machine.get("floor_cpu_us_per_request")
    kafka = agg.get(f"{small_requests.key('1')}/requests_per_s", {}).get(KAFKA)
    kafka_cpu = agg.get(f"{small_requests.key('1')}/cpu_us_per_request", {}).get(KAFKA)
    if rps is None or cpu is None or kafka is None or kafka_cpu is None:
        return ""
    return (f"; the Python floor: {rps.median / kafka.median:.2f}x requests/s, "
            f"{cpu.median / kafka_cpu.median:.2f}x CPU per request")  # fmt: skip


def _floor_ceiling(machine: dict[str, Stat | None]) -> str:
    floor, write = machine.get("floor_ceiling_mbs"), machine.get("write_mbs")
    if floor is None or write is None:
        return ""
    return f"; the Python floor: {floor.median:.0f} MB/s = {floor.median / write.median:.0%}"


def targets(agg: dict[str, dict[str, Stat]], plan: Plan, machine: dict[str, Stat | None]) -> list[str]:
    """The issue's targets, each with its figure, met or not."""
    out: list[str] = []

    def line(name: str, ok: bool | None, detail: str) -> None:
        mark = "n/a" if ok is None else ("met" if ok else "**not met**")
        out.append(f"| {name} | {mark} | {detail} |")

    for kind, keys in (
        ("produce throughput >= 1.0x, every row",
         [produce_key(c, s, a, z) for c in plan.clients for s in plan.sizes for a in plan.acks for z in plan.compressions]),
        ("consume throughput >= 1.0x, every row", [consume_key(c, s) for c in plan.consume_clients for s in plan.sizes]),
    ):  # fmt: skip
        ratios = [(k, r) for k in keys if (r := ratio(agg, f"{k}/records_per_s")) is not None]
        if not ratios:
            line(kind, None, "no pairs measured")
            continue
        worst = min(ratios, key=lambda kr: kr[1])
        below = sum(1 for _, r in ratios if r < 1.0)
        line(
            kind,
            below == 0,
            f"{len(ratios) - below}/{len(ratios)} rows at or above 1.0x; lowest {worst[1]:.2f}x ({worst[0]})",
        )
    for name, key, limit in (
        ("end-to-end p99 <= 1.0x", "latency/e2e/p99_ms", 1.0),
        ("cold start <= 0.1x", "start/cold_s", 0.1),
        ("idle RSS <= 0.1x", "memory/idle_rss_mb", 0.1),
        ("Streams scale-out no slower (<= 1.0x)", f"{streams.SCALE_OUT}/s", 1.0),
    ):
        r = ratio(agg, key)
        line(name, None if r is None else r <= limit, "not measured" if r is None else f"{r:.3f}x")
    r = ratio(agg, f"{streams.THROUGHPUT}/records_per_s")
    line(
        "Streams throughput >= 1.0x",
        None if r is None else r >= 1.0,
        "not measured" if r is None else f"{r:.3f}x",
    )
    if "proxy" in plan.suites:
        for name, ok, detail in proxy.targets(agg, plan):  # each proxied ratio beside the relay floor
            line(name, ok, detail)
    for acks in small_requests.ACKS:
        k = small_requests.key(acks)
        rps, cpu = ratio(agg, f"{k}/requests_per_s"), ratio(agg, f"{k}/cpu_us_per_request")
        line(f"small requests acks={acks}: >= 1.5x requests/s at <= 0.7x CPU per request",
             None if rps is None or cpu is None else rps >= 1.5 and cpu <= 0.7,
             "not measured" if rps is None or cpu is None else f"{rps:.2f}x requests/s, {cpu:.2f}x CPU per request"
             + (_floor_small(agg, machine) if acks == "1" else ""))  # fmt: skip
    write = machine.get("write_mbs")
    ceiling = agg.get(f"{small_requests.CEILING}/mb_per_s", {})
    if write is None or KCOMPAT not in ceiling:
        line("produce ceiling >= 50% of the page-cache write limit", None, "not measured")
    else:
        shares = {b: ceiling[b].median / write.median for b in (KCOMPAT, KAFKA) if b in ceiling}
        kafka = f" (Kafka: {shares[KAFKA]:.0%})" if KAFKA in shares else ""
        line("produce ceiling >= 50% of the page-cache write limit", shares[KCOMPAT] >= 0.5,
             f"Go load, 256 KiB batches: {ceiling[KCOMPAT].median:.0f} MB/s of {write.median:.0f} MB/s = "
             f"{shares[KCOMPAT]:.0%}{kafka}{_floor_ceiling(machine)}")  # fmt: skip
    sendfile = machine.get("sendfile_mbs")
    fetch = agg.get(f"{consume_key('raw-50MiB', 1024)}/mb_per_s", {}).get(KCOMPAT)
    if sendfile is None or fetch is None:
        line("fetch path >= 60% of loopback sendfile", None, "not measured")
    else:
        share = fetch.median / sendfile.median
        line("fetch path >= 60% of loopback sendfile", share >= 0.6,
             f"raw Fetch 1 KiB, 50 MiB per request: {fetch.median:.0f} MB/s of {sendfile.median:.0f} MB/s = {share:.0%}")  # fmt: skip
    return out


def txn_section(agg: dict[str, dict[str, Stat]], plan: Plan) -> list[str]:
    throughput = [(label, f"{key}/records_per_s", True) for label, key in txn.rows(plan)]
    mbs = [(label, f"{key}/mb_per_s", True) for label, key in txn.rows(plan)]
    return [
        f"## Transactions, records/s (benchmarks/txn.py: confluent commits every {txn.TXN_RECORDS:,} records, "
        f"ProducerPerformance every {txn.TXN_DURATION_MS} ms; acks=all, uncompressed)",
        "", *_table(agg, throughput, "workload, record size"), "",
        "## Transactions, MB/s", "", *_table(agg, mbs, "workload, record size"), "",
    ]  # fmt: skip


def share_section(agg: dict[str, dict[str, Stat]], plan: Plan) -> list[str]:
    throughput = [(label, f"{key}/records_per_s", True) for label, key in share.rows(plan)]
    counts = ", ".join(f"{share.count(plan, s):,} records of {size_label(s)}" for s in plan.sizes)
    return [
        f"## Share groups, records/s (benchmarks/share.py: one partition, {counts} per row; confluent timed "
        "first to last record, ShareConsumerPerformance over its whole run, join included)",
        "", *_table(agg, throughput, "client, members, record size, acknowledgement"), "",
    ]  # fmt: skip


def streams_section(agg: dict[str, dict[str, Stat]], plan: Plan) -> list[str]:
    table = [(label, key, higher) for label, key, _unit, higher in streams.rows()]
    return [
        f"## Kafka Streams on the streams protocol (benchmarks/streams.py: a stateful app, exactly_once_v2, "
        f"{streams.lines(plan):,} lines of 4 words; first round only)",
        "", *_table(agg, table, "figure"), "",
    ]  # fmt: skip


def suite_sections(agg: dict[str, dict[str, Stat]], plan: Plan) -> list[str]:
    """The transactional, share-group, proxy and Streams tables, each when its suite ran."""
    lines: list[str] = []
    if "txn" in plan.suites:
        lines += txn_section(agg, plan)
    if "share" in plan.suites:
        lines += share_section(agg, plan)
    if "proxy" in plan.suites:
        lines += proxy.section(agg, plan, _fmt)
    if "streams" in plan.suites:
        lines += streams_section(agg, plan)
    if "requests" in plan.suites:
        lines += small_requests.section(agg, plan, _table)
    return lines


def _floor_rows(machine: dict[str, Stat | None]) -> list[str]:
    """The Python floor under the requests suite's rows, when it was measured (request_floor.py)."""
    if machine.get("floor_requests_per_s") is None:
        return []
    what = "the Python floor (benchmarks/request_floor.py: frames cut, records pwritten, fixed answers)"
    return [
        f"| {what}, small requests of the requests suite, requests/s | {_cell(machine['floor_requests_per_s'])} |",
        f"| the Python floor, small requests, server CPU µs per request | {_cell(machine['floor_cpu_us_per_request'])} |",
        f"| the Python floor, produce ceiling job, MB/s | {_cell(machine['floor_ceiling_mbs'])} |",
    ]


def markdown(data: dict[str, Any], plan: Plan) -> str:
    agg = aggregate(data["runs"])
    machine = {k: stat([m[k] for m in data["machine"] if k in m]) for k in MACHINE_KEYS}
    meta = data["meta"]
    lines = [
        "# kcompat vs Apache Kafka, side by side",
        "",
        f"{meta['started']}, {meta['host']}, {meta['cpus']} CPUs, Python {meta['python']}, {meta['kafka']}, "
        f"{meta['java']}; {plan.rounds} round(s), brokers alternating (order per round: "
        f"{'; '.join(', '.join(o) for o in meta['orders'])}); total {meta['seconds']:.0f} s.",
        "",
        "Cells: median (min-max) over the rounds. Ratio: median kcompat / median Kafka; **bold** where kcompat "
        "is at least as good (higher throughput, lower latency, memory, CPU and start time).",
        "",
        "## Machine limits (same run)",
        "",
        "| limit | median (min-max) |",
        "|---|---:|",
        f"| loopback sendfile, page-cached file, MB/s | {_cell(machine['sendfile_mbs'])} |",
        f"| sequential page-cache write, 1 MiB writes, MB/s | {_cell(machine['write_mbs'])} |",
        *_floor_rows(machine),
        "",
        "## Targets",
        "",
        "| target | status | figure |",
        "|---|---|---|",
        *targets(agg, plan, machine),
        "",
    ]
    figs = {f.key: f for f in figures(plan)}

    def rows(keys: list[tuple[str, str]], suffix: str) -> list[tuple[str, str, bool]]:
        return [(label, f"{k}/{suffix}", figs[f"{k}/{suffix}"].higher_is_better) for label, k in keys]

    produce = [
        (f"{c} {size_label(s)} acks={a} {z}", produce_key(c, s, a, z))
        for c in plan.clients for s in plan.sizes for a in plan.acks for z in plan.compressions
    ]  # fmt: skip
    consume = [(f"{c} {size_label(s)}", consume_key(c, s)) for c in plan.consume_clients for s in plan.sizes]
    if "produce" in plan.suites:
        lines += [
            "## Produce throughput, records/s",
            "",
            *_table(agg, rows(produce, "records_per_s"), "client, record size, acks, compression"),
            "",
        ]
        lines += [
            "## Produce throughput, MB/s (record values)",
            "",
            *_table(agg, rows(produce, "mb_per_s"), "client, record size, acks, compression"),
            "",
        ]
    if "consume" in plan.suites:
        lines += [
            "## Catch-up consume throughput, records/s",
            "",
            *_table(agg, rows(consume, "records_per_s"), "reader, record size"),
            "",
        ]
        lines += [
            "## Catch-up consume throughput, MB/s",
            "",
            *_table(agg, rows(consume, "mb_per_s"), "reader, record size"),
            "",
        ]
        if "confluent-defaults" in plan.consume_clients:
            lines += [
                "confluent-defaults is librdkafka with its defaults, which stop fetching for a whole second "
                "(fetch.queue.backoff.ms=1000) whenever 100,000 records wait in the consumer's queue "
                "(queued.min.messages): a broker that answers each Fetch sooner fills the queue sooner and idles "
                "longer, so this row rewards slower Fetch answers. `python -m benchmarks.backoff_trace` shows it "
                "per fill phase for both brokers.",
                "",
            ]
    if "latency" in plan.suites:
        lat = [(f"{p}, ms", f"latency/e2e/{p}_ms", False) for p in ("p50", "p99", "p99.9")]
        lines += [
            f"## End-to-end latency: confluent producer at {plan.e2e_rate} records/s ({size_label(plan.e2e_size)}, acks=1, "
            f"linger.ms=0) to an assigned confluent consumer, {plan.e2e_seconds:g} s",
            "", *_table(agg, lat, "percentile"), "",
        ]  # fmt: skip
    lines += suite_sections(agg, plan)
    res = [
        ("cold start to first Metadata answer, s", "start/cold_s", False),
        ("resident memory idle after start, MB", "memory/idle_rss_mb", False),
        ("resident memory peak under load, MB", "memory/load_rss_mb", False),
    ]
    lines += ["## Start and memory", "", *_table(agg, res, "figure"), ""]
    fmt_s = [n["format_s"] for n in (r["notes"] for r in data["runs"]) if "format_s" in n]
    if fmt_s:
        lines += [
            f"Kafka also needs `kafka-storage format` before its first start: {_fmt(statistics.median(fmt_s))} s (median).",
            "",
        ]
    cpu_rows = []
    if "produce" in plan.suites:
        cpu_rows += [(f"produce {label}", key, hib) for label, key, hib in rows(produce, "cpu_s_per_gb")]
    if "consume" in plan.suites:
        cpu_rows += [(f"consume {label}", key, hib) for label, key, hib in rows(consume, "cpu_s_per_gb")]
    if "txn" in plan.suites:
        cpu_rows += [(f"transactions {label}", f"{key}/cpu_s_per_gb", False) for label, key in txn.rows(plan)]
    if "share" in plan.suites:
        cpu_rows += [(f"share {label}", f"{key}/cpu_s_per_gb", False) for label, key in share.rows(plan)]
    if "requests" in plan.suites:
        cpu_rows.append(
            ("produce ceiling, Go load, 256 KiB batches", f"{small_requests.CEILING}/cpu_s_per_gb", False)
        )
    if cpu_rows:
        lines += ["## Broker CPU seconds per GB moved (record bytes; all threads; lower is better)", "",
                  *_table(agg, cpu_rows, "workload"), ""]  # fmt: skip
    errors = [(r["broker"], r["round"], k, e) for r in data["runs"] for k, e in r["errors"].items()]
    if errors:
        lines += ["## Failures", ""]
        lines += [f"- {b}, round {n}, {k}: `{e.splitlines()[0][:300]}`" for b, n, k, e in errors]
        lines.append("")
    lines += [
        "## Plots",
        "",
        "![throughput](throughput.png)",
        "",
        "![latency](latency.png)",
        "",
        "![memory](memory.png)",
        "",
    ]
    return "\n".join(lines)


def plots(data: dict[str, Any], plan: Plan, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agg = aggregate(data["runs"])
    colors = {KAFKA: "#777777", KCOMPAT: "#2a7ab9"}

    def bars(ax: Any, labels: list[str], keys: list[str], unit: str) -> None:
        n = len(keys)
        width = 0.4
        for i, broker in enumerate((KAFKA, KCOMPAT)):
            med, lo, hi = [], [], []
            for key in keys:
                s = agg.get(key, {}).get(broker)
                med.append(s.median if s else 0.0)
                lo.append(s.median - s.low if s else 0.0)
                hi.append(s.high - s.median if s else 0.0)
            ys = [y + (i - 0.5) * width for y in range(n)]
            ax.barh(ys, med, height=width, xerr=[lo, hi], color=colors[broker], label=broker, capsize=2)
        ax.set_yticks(range(n), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(unit)
        ax.legend(fontsize=8)

    produce = [(f"{c} {size_label(s)} acks={a} {z}", f"{produce_key(c, s, a, z)}/mb_per_s")
               for c in plan.clients for s in plan.sizes for a in plan.acks for z in plan.compressions]  # fmt: skip
    consume = [
        (f"{c} {size_label(s)}", f"{consume_key(c, s)}/mb_per_s")
        for c in plan.consume_clients
        for s in plan.sizes
    ]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 0.32 * max(len(produce), len(consume)) + 1.8))
    bars(a1, [p[0] for p in produce], [p[1] for p in produce], "MB/s")
    a1.set_title("produce throughput (median, min-max)")
    bars(a2, [c[0] for c in consume], [c[1] for c in consume], "MB/s")
    a2.set_title("catch-up consume throughput")
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3))
    bars(ax, ["p50", "p99", "p99.9"], [f"latency/e2e/{p}_ms" for p in ("p50", "p99", "p99.9")], "ms")
    ax.set_title(f"end-to-end latency at {plan.e2e_rate} records/s")
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=110)
    plt.close(fig)

    fig, (m1, m2) = plt.subplots(1, 2, figsize=(10, 2.6))
    bars(m1, ["idle", "peak under load"], ["memory/idle_rss_mb", "memory/load_rss_mb"], "MB resident")
    m1.set_title("resident memory")
    bars(m2, ["cold start"], ["start/cold_s"], "s to first Metadata answer")
    m2.set_title("cold start")
    fig.tight_layout()
    fig.savefig(out / "memory.png", dpi=110)
    plt.close(fig)


def write(data: dict[str, Any], plan: Plan, out: Path, with_plots: bool = True) -> None:
    out.mkdir(parents=True, exist_ok=True)
    agg = aggregate(data["runs"])
    data = dict(data)
    data["summary"] = {
        key: {**{b: vars(s) for b, s in per.items()}, "ratio_kcompat_to_kafka": ratio(agg, key)}
        for key, per in sorted(agg.items())
    }
    (out / "results.json").write_text(json.dumps(data, indent=1, default=str))
    (out / "report.md").write_text(markdown(data, plan))
    if with_plots:
        plots(data, plan, out)
