"""The cluster suite: 3 kcompat brokers against 3 Apache Kafka 4.3.1 brokers, each cluster on one
KRaft controller of its own (benchmarks/clusters.py), then kcompat's scale on cores.

    python -m benchmarks --cluster        (after the single-node rounds; or alone:)
    python -m benchmarks.cluster [--quick] [--kinds kafka,kcompat] [--no-java] [--workdir DIR]
    python -m benchmarks.cluster --only scale    (the scale-on-cores rows alone, about a minute)

Per cluster, started fresh, topics RF=3 with min.insync.replicas=2, one partition each (a leader
and two followers), producers with acks=all:
  start_s                      controller format + start to every broker answering
  produce/{client}/{size}      records/s and MB/s: confluent-kafka (benchmarks/confluent_clients)
                               and Kafka's ProducerPerformance, 100 B and 1 KiB, uncompressed
  consume/confluent/{size}     catch-up read of the confluent topic from the leader
  e2e p50/p99                  produce() to consume() at 1,000 records/s, acks=all, 100 B, at most 5
                               requests in flight (the Java client's default: with librdkafka's
                               default of 1,000,000 and linger.ms=0 every record is a request of its
                               own, and Kafka takes a connection's next request only after answering
                               the one before, a replication round trip later (kcompat appends up to
                               5 pipelined Produce requests meanwhile): the queue, and the latency,
                               grow without bound at 1,000 records/s, seconds within the run)
  rss per broker               idle after start, and peak over the workloads (MB)
  (each cluster is first warmed up, unmeasured: 50,000 1 KiB records produced with acks=all and read)
  group rows                   time to a stable group and failover after kill -9 of the group
                               coordinator's broker (benchmarks/group_rows.py)
  failover_s                   kill -9 of a partition leader while an idempotent acks=all producer
                               sends every 5 ms: seconds from the kill to the first acknowledgement
                               of a record sent after it (both clusters: broker.session.timeout.ms
                               9000, heartbeats every 500 ms)
Scale on cores (kcompat only): 1 and then 2 brokers, one 4-partition RF=1 topic spread over them,
aggregate produce (acks=1, 1 KiB records in 256 KiB batches, spread evenly) and consume of every
partition from offset 0 (read scale_laps times over, so the run lasts long enough to measure),
three rounds of each, the median reported; the goal is 2 brokers >= 1.6x one. The load is the same for both rows and as cheap as can be
(benchmarks/wire_load.py: requests Python encoded once, sent by a Go program on raw sockets with
sendfile, Fetch answers' records dropped in the kernel): a Kafka client spends about as much CPU
per GB as a broker does, and on a 2-core machine that leaves two brokers no room to show two
cores' worth. Beside each row: the CPU seconds per second each broker used, the brokers' CPU
seconds per GB moved, and the load's CPU per second and per GB.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks import confluent_clients as cc
from benchmarks import group_rows, java_tools, wire_load
from benchmarks.clusters import SESSION_TIMEOUT_MS, Cluster, KafkaCluster, KcompatCluster
from benchmarks.proc_stats import PeakRss, cpu_seconds, rss_bytes
from benchmarks.suite import percentile

log = logging.getLogger("benchmarks")


@dataclass(frozen=True)
class ClusterPlan:
    records: dict[int, int]  # per produce run, by record size (both clients)
    e2e_seconds: float
    scale_records: int  # 1 KiB records produced per scale run
    scale_laps: int  # the scale consume reads the topic this many times over
    scale_rounds: int  # produce then consume, this many times; the median round is reported
    timeout: float


FULL = ClusterPlan(records={100: 500_000, 1024: 100_000}, e2e_seconds=5.0, scale_records=1_000_000, scale_laps=4,
                   scale_rounds=3, timeout=300)  # fmt: skip
QUICK = ClusterPlan(records={100: 20_000, 1024: 4_000}, e2e_seconds=1.5, scale_records=20_000, scale_laps=2,
                    scale_rounds=1, timeout=60)  # fmt: skip


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int, configs: dict[str, str],
                 timeout: float = 60.0) -> bool:  # fmt: skip
    """Create, then wait until every partition has a leader and a full ISR."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, partitions, rf, config=configs)], operation_timeout=timeout
    )
    futures[topic].result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values())
        ):
            return True
        time.sleep(0.1)
    raise TimeoutError(f"{topic}: no leader or a short ISR after {timeout} s")


def wait_for_brokers(bootstrap: str, count: int, timeout: float = 60.0) -> None:
    """Until Metadata lists `count` brokers: a broker answers before the controller unfences it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            if len(admin.list_topics(timeout=timeout).brokers) >= count:
                return
        except KafkaException as e:  # a broker still starting may answer in part
            log.info("waiting for %d brokers: %s", count, e)
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {count} brokers after {timeout} s")
        time.sleep(0.1)


def warm_up(bootstrap: str, rf: int) -> None:
    """JIT and page cache warmed, as the single-node suite does; not measured."""
    create_topic(bootstrap, "warm-up", 1, rf, {})
    cc.produce(bootstrap, "warm-up", 50_000, 1024, "all", "none")
    cc.consume(bootstrap, "warm-up", 50_000)


def leader_of(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30).topics[topic]
    return int(md.partitions[0].leader)


class Run:
    """One cluster through the workloads; figures in `values`, failures in `errors`."""

    def __init__(self, cluster: Cluster, plan: ClusterPlan, java: bool) -> None:
        self.cluster, self.plan, self.java = cluster, plan, java
        self.values: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def _try(self, key: str, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            result = fn(*args)
        except Exception as e:
            self.errors[key] = f"{type(e).__name__}: {e}"
            log.warning("%s %s failed: %s", self.cluster.name, key, str(e).splitlines()[0] if str(e) else e)
            return None
        log.info("%-8s %-32s %6.1f s", self.cluster.name, key, time.perf_counter() - t0)
        return result

    def run(self) -> dict[str, Any]:
        c = self.cluster
        self.values["start_s"] = c.start()
        try:
            wait_for_brokers(c.bootstrap, c.size)
            time.sleep(1.0)
            self.values["rss_idle_mb"] = {n: rss_bytes(p) / 1e6 for n, p in sorted(c.pids().items())}
            samplers = {n: PeakRss(p) for n, p in c.pids().items()}
            for s in samplers.values():
                s.__enter__()
            try:
                warm_up(c.bootstrap, 3)
                self._workloads()
            finally:
                for s in samplers.values():
                    s.__exit__()
            self.values["rss_peak_mb"] = {n: s.peak / 1e6 for n, s in sorted(samplers.items())}
            self._groups()
            failover = self._try("failover", failover_seconds, c)
            if failover is not None:
                self.values["failover_s"] = failover
            # Last: with the leader killed above, this kill leaves one broker of three.
            coordinator = self._try(
                "group coordinator failover", group_rows.coordinator_failover, c, "groups"
            )
            if coordinator is not None:
                self.values.update({f"group/{k}": v for k, v in coordinator.items()})
        finally:
            c.stop()
        return {"values": self.values, "errors": self.errors}

    def _groups(self) -> None:
        if not self._try(
            "create groups", create_topic, self.cluster.bootstrap, "groups", group_rows.PARTITIONS, 3, {}
        ):
            return
        for protocol in ("classic", "consumer"):
            s = self._try(f"group/{protocol}/stable", group_rows.time_to_stable_group, self.cluster.bootstrap,
                          "groups", protocol)  # fmt: skip
            if s is not None:
                self.values[f"group/{protocol}/stable_s"] = s

    def _workloads(self) -> None:
        c, plan = self.cluster, self.plan
        rf3 = {"min.insync.replicas": "2"}
        clients = ("confluent", "java") if self.java else ("confluent",)
        for client in clients:
            for size, count in plan.records.items():
                topic = f"produce-{client}-{size}"
                if not self._try(f"create {topic}", create_topic, c.bootstrap, topic, 1, 3, rf3):
                    continue
                produce = cc.produce if client == "confluent" else java_tools.producer_perf
                r = self._try(f"produce/{client}/{size}", produce, c.bootstrap, topic, count, size, "all", "none",
                              plan.timeout)  # fmt: skip
                if r is not None:
                    self.values[f"produce/{client}/{size}/records_per_s"] = r.records_per_s
                    self.values[f"produce/{client}/{size}/mb_per_s"] = r.mb_per_s
        for size, count in plan.records.items():
            if f"produce/confluent/{size}/records_per_s" not in self.values:
                continue
            r = self._try(f"consume/confluent/{size}", cc.consume, c.bootstrap, f"produce-confluent-{size}", count,
                          plan.timeout)  # fmt: skip
            if r is not None:
                self.values[f"consume/confluent/{size}/records_per_s"] = r.records_per_s
                self.values[f"consume/confluent/{size}/mb_per_s"] = r.mb_per_s
        if self._try("create e2e", create_topic, c.bootstrap, "e2e", 1, 3, rf3):
            lat = self._try(
                "e2e",
                lambda: cc.end_to_end(
                    c.bootstrap, "e2e", 1000, plan.e2e_seconds, 100, acks="all", max_in_flight=5
                ),
            )
            if lat is not None and lat.seconds_each:
                ms = [s * 1000 for s in lat.seconds_each]
                self.values["e2e/p50_ms"] = percentile(ms, 50)
                self.values["e2e/p99_ms"] = percentile(ms, 99)


def failover_seconds(cluster: Cluster, timeout: float = 120.0) -> float:
    """kill -9 of the leader of an RF=3 topic under a steady idempotent acks=all producer."""
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "failover", 1, 3, {"min.insync.replicas": "2"})
    leader = leader_of(bootstrap, "failover")
    stamp = struct.Struct(">d")
    acked: list[tuple[float, float]] = []  # (sent at, acknowledged at), perf_counter seconds

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((stamp.unpack(msg.value())[0], time.perf_counter()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0, "message.timeout.ms": int(timeout * 1000),
                         "socket.nagle.disable": True})  # fmt: skip
    killed_at: float | None = None
    t0 = time.perf_counter()
    try:
        while True:
            now = time.perf_counter()
            producer.produce("failover", stamp.pack(now), partition=0, on_delivery=delivered)
            producer.poll(0.005)
            if killed_at is None and now - t0 > 2.0:
                if not acked:
                    raise RuntimeError("no acknowledgement before the kill")
                killed_at = time.perf_counter()
                cluster.kill(leader)
            if killed_at is not None:
                after = [a for s, a in acked if s > killed_at]
                if after:
                    return min(after) - killed_at
                if now - killed_at > timeout:
                    raise TimeoutError(f"no acknowledgement {timeout} s after killing broker {leader}")
    finally:
        producer.flush(5)


@dataclass(frozen=True)
class ScaleLoad:
    """The scale rows' topic and load (the same for 1 and 2 brokers); --scale-* on the command line."""

    partitions: int = 4
    conns: int = wire_load.CONNS_PER_LEADER  # per leader
    in_flight: int = wire_load.IN_FLIGHT  # Produce requests per connection


def scale_on_cores(workdir: Path, plan: ClusterPlan, load: ScaleLoad = ScaleLoad()) -> dict[str, Any]:
    """Aggregate throughput of 1 and 2 brokers under the same raw-wire load (benchmarks/wire_load.py),
    and where the CPU went meanwhile: each broker's CPU seconds per wall second and per GB moved, and
    the load's (the Go load generator's own CPU time)."""
    partitions = load.partitions
    out: dict[str, Any] = {"partitions": partitions, "conns": load.conns, "in_flight": load.in_flight}
    size = 1024
    for n in (1, 2):
        cluster = KcompatCluster(workdir / f"scale-{n}", brokers=n)
        cluster.start()
        try:
            wait_for_brokers(cluster.bootstrap, n)
            warm_up(cluster.bootstrap, 1)
            create_topic(cluster.bootstrap, "scale", partitions, 1, {})
            pids, bootstrap = cluster.pids(), cluster.bootstrap
            rounds: dict[str, list[dict[str, Any]]] = {"produce": [], "consume": []}
            for _ in range(plan.scale_rounds):
                count = plan.scale_records
                for what in ("produce", "consume"):
                    brokers0 = {i: cpu_seconds(p) for i, p in pids.items()}
                    if what == "produce":
                        r = wire_load.produce(bootstrap, "scale", count, size, conns=load.conns,
                                              in_flight=load.in_flight, timeout=plan.timeout)  # fmt: skip
                        count = r.records  # whole batches: what one lap of the consumer reads
                    else:
                        r = wire_load.consume(bootstrap, "scale", count * plan.scale_laps, size, conns=load.conns,
                                              timeout=plan.timeout)  # fmt: skip
                    used = [cpu_seconds(p) - brokers0[i] for i, p in pids.items()]
                    figures = {"mb_per_s": r.mb_per_s, "broker_cpu": [u / r.seconds for u in used],
                               "broker_cpu_s_per_gb": sum(used) / (r.bytes / 1e9), "client_cpu": r.cpu_s / r.seconds,
                               "client_cpu_s_per_gb": r.cpu_s / (r.bytes / 1e9)}  # fmt: skip
                    rounds[what].append(figures)
                    log.info("scale: %d broker(s) %s %.0f MB/s in %.1f s, broker CPU/s %s (%.2f CPU s/GB), load "
                             "CPU/s %.2f (%.2f CPU s/GB)", n, what, r.mb_per_s, r.seconds,
                             " ".join(f"{c:.2f}" for c in figures["broker_cpu"]), figures["broker_cpu_s_per_gb"],
                             figures["client_cpu"], figures["client_cpu_s_per_gb"])  # fmt: skip
            for what, runs in rounds.items():  # the median round by throughput, with its CPU figures
                median = sorted(runs, key=lambda f: f["mb_per_s"])[len(runs) // 2]
                out.update({f"{n}/{what}_{k}": v for k, v in median.items()})
        finally:
            cluster.stop()
    for what in ("produce", "consume"):
        if out.get(f"1/{what}_mb_per_s"):
            out[f"{what}_speedup"] = out[f"2/{what}_mb_per_s"] / out[f"1/{what}_mb_per_s"]
    return out


def run(kinds: list[str], plan: ClusterPlan, workdir: Path | None, java: bool = True,
        suite: bool = True, scale: bool = True, scale_load: ScaleLoad = ScaleLoad()) -> dict[str, Any]:  # fmt: skip
    """The cluster suite for `kinds`, then scale on cores if kcompat is one (either may be left out)."""
    base = Path(tempfile.mkdtemp(prefix="kcompat-cluster-bench-", dir=workdir))
    results: dict[str, Any] = {}
    try:
        for kind in kinds if suite else []:
            cluster: Cluster = KafkaCluster(base / kind) if kind == "kafka" else KcompatCluster(base / kind)
            log.info("cluster suite: 3 %s brokers", kind)
            try:
                results[kind] = Run(cluster, plan, java).run()
            except Exception as e:
                log.warning("%s cluster failed: %s", kind, e)
                results[kind] = {"values": {}, "errors": {"suite": f"{type(e).__name__}: {e}"}}
        if scale and "kcompat" in kinds:
            try:
                results["scale"] = scale_on_cores(base, plan, scale_load)
            except Exception as e:
                results["scale"] = {"error": f"{type(e).__name__}: {e}"}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return results


def _f(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:,.0f}" if x >= 1000 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def table(results: dict[str, Any]) -> str:
    kinds = [k for k in ("kafka", "kcompat") if k in results]
    lines: list[str] = []
    if kinds:
        lines = _suite_table(results, kinds)
    scale = results.get("scale", {})
    if scale:
        lines += _scale_table(scale)
    for k in kinds:
        for key, err in results[k]["errors"].items():
            lines.append(f"\n{k} {key}: {err.splitlines()[0] if err else err}")
    return "\n".join(lines).strip("\n")


def _suite_table(results: dict[str, Any], kinds: list[str]) -> list[str]:
    rows: list[tuple[str, str, bool]] = [("start_s", "start: controller + 3 brokers (s)", False)]
    for key, label in (("produce/confluent", "produce confluent"), ("produce/java", "produce ProducerPerformance"),
                       ("consume/confluent", "catch-up consume confluent")):  # fmt: skip
        for size in (100, 1024):
            name = "1 KiB" if size == 1024 else "100 B"
            rows.append((f"{key}/{size}/records_per_s", f"{label} {name} (records/s)", True))
            rows.append((f"{key}/{size}/mb_per_s", f"{label} {name} (MB/s)", True))
    rows += [("e2e/p50_ms", "end-to-end p50, acks=all (ms)", False), ("e2e/p99_ms", "end-to-end p99, acks=all (ms)", False),
             ("failover_s", f"failover after kill -9 of the leader (s; session timeout {SESSION_TIMEOUT_MS} ms)", False),
             ("group/classic/stable_s", "3 members to a stable classic group (s)", False),
             ("group/consumer/stable_s", "3 members to a stable KIP-848 group (s)", False),
             ("group/coordinator_failover_s", "kill -9 of the group coordinator to the next commit (s)", False),
             ("group/redelivered", "records the group received twice (commits every 200 ms)", False)]  # fmt: skip
    lines = ["| figure | " + " | ".join(kinds) + " | kcompat/kafka |", "|---|" + "---:|" * (len(kinds) + 1)]
    for key, label, _higher in rows:
        vals = [results[k]["values"].get(key) for k in kinds]
        r = vals[-1] / vals[0] if len(vals) == 2 and vals[0] and vals[1] is not None else None
        lines.append(
            f"| {label} | " + " | ".join(_f(v) for v in vals) + f" | {'—' if r is None else f'{r:.2f}x'} |"
        )
    for key, label in (
        ("rss_idle_mb", "RSS per broker, idle (MB)"),
        ("rss_peak_mb", "RSS per broker, peak (MB)"),
    ):
        cells = [" / ".join(_f(v) for v in results[k]["values"].get(key, {}).values()) or "—" for k in kinds]
        lines.append(f"| {label} | " + " | ".join(cells) + " | |")
    return lines


def _scale_table(scale: dict[str, Any]) -> list[str]:
    parts, conns, in_flight = scale.get("partitions", 4), scale.get("conns", 1), scale.get("in_flight", 4)
    title = f"kcompat scale on cores (RF=1, {parts} partitions, 1 KiB; {conns} conn/leader, {in_flight} in flight)"
    lines = ["", f"| {title} | 1 broker | 2 brokers | 2 / 1 |",
             "|---|---:|---:|---:|"]  # fmt: skip
    for what in ("produce", "consume"):
        lines.append(f"| {what} (MB/s) | {_f(scale.get(f'1/{what}_mb_per_s'))} | "
                     f"{_f(scale.get(f'2/{what}_mb_per_s'))} | {_f(scale.get(f'{what}_speedup'))}x |")  # fmt: skip
        cpu = [" + ".join(f"{c:.2f}" for c in scale.get(f"{n}/{what}_broker_cpu", [])) for n in (1, 2)]
        client = [_f(scale.get(f"{n}/{what}_client_cpu")) for n in (1, 2)]
        lines.append(
            f"| {what}: CPU per second, brokers; load | {cpu[0]}; {client[0]} | {cpu[1]}; {client[1]} | |"
        )
        for key, label in (("broker", "brokers'"), ("client", "the load's")):
            per_gb = [_f(scale.get(f"{n}/{what}_{key}_cpu_s_per_gb")) for n in (1, 2)]
            lines.append(f"| {what}: {label} CPU seconds per GB | {per_gb[0]} | {per_gb[1]} | |")
    if "error" in scale:
        lines.append(f"\nscale: {scale['error']}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cluster", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--kinds", default="kafka,kcompat")
    ap.add_argument(
        "--no-java", action="store_true", help="skip ProducerPerformance (confluent clients only)"
    )
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--only", choices=["suite", "scale"],
                    help="suite: the 3-broker comparison alone; scale: the kcompat scale-on-cores rows alone")  # fmt: skip
    ap.add_argument(
        "--scale-partitions", type=int, default=ScaleLoad.partitions, help="the scale topic's partitions"
    )
    ap.add_argument(
        "--scale-conns", type=int, default=ScaleLoad.conns, help="the scale load's connections per leader"
    )
    ap.add_argument("--scale-in-flight", type=int, default=ScaleLoad.in_flight,
                    help="the scale load's Produce requests in flight per connection")  # fmt: skip
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    kinds = args.kinds.split(",")
    if args.only == "scale":
        kinds = ["kcompat"]
    results = run(kinds, QUICK if args.quick else FULL, args.workdir, java=not args.no_java,
                  suite=args.only != "scale", scale=args.only != "suite",
                  scale_load=ScaleLoad(args.scale_partitions, args.scale_conns, args.scale_in_flight))  # fmt: skip
    print(table(results))


if __name__ == "__main__":
    main()
