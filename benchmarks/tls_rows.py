"""Produce and catch-up consume over SSL and SASL_SSL (issue 16, "Speed"): kcompat and Apache Kafka
4.3.1 with the same certificate, made at bench time, and the same client settings.

    python -m benchmarks.tls_rows [--quick] [--rounds N] [--brokers kcompat,kafka]
    (or `python -m benchmarks --tls`, after the rounds, into tls.md)

Each broker gets a PLAINTEXT listener (the start-up probe), an SSL one and a SASL_SSL one (PLAIN,
one user), keystore PKCS12 from one CA. Per round and broker (the order alternates): for each
protocol (after a warm-up, as the main suite's) and record size of the plan, the confluent producer at acks=1 uncompressed, then the
catch-up read of what it wrote; records/s and the broker's CPU s/GB, medians over rounds.
Kernel TLS: said in the table's notes from /proc/net/tls_stat (absent: the tls module is not loaded,
so no process here can use it).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

import trustme

from benchmarks import confluent_clients as cc
from benchmarks.brokers import BrokerProcess, KafkaBroker, KcompatBroker, free_port
from benchmarks.plan import FULL, QUICK, Plan, size_label
from benchmarks.proc_stats import cpu_seconds

log = logging.getLogger("benchmarks")

PROTOCOLS = ("SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"
STORE_PASSWORD = "bench-store"
JAAS = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{USER}" '
        f'password="{PASSWORD}" user_{USER}="{PASSWORD}";')  # fmt: skip


class Certs:
    """One CA; the brokers' key and certificate for 127.0.0.1 as a PKCS12 keystore."""

    def __init__(self, d: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        server = ca.issue_cert("localhost", "127.0.0.1")
        self.ca = d / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        key = serialization.load_pem_private_key(server.private_key_pem.bytes(), None)
        cert = x509.load_pem_x509_certificate(server.cert_chain_pems[0].bytes())
        self.keystore = d / "broker.p12"
        self.keystore.write_bytes(
            pkcs12.serialize_key_and_certificates(
                b"broker",
                key,
                cert,
                None,
                serialization.BestAvailableEncryption(STORE_PASSWORD.encode()),  # type: ignore[arg-type]
            )
        )


def secure_properties(b: BrokerProcess, certs: Certs, ports: dict[str, int]) -> dict[str, str]:
    """What both brokers add to their own PLAINTEXT set-up: Kafka's names, the same values."""
    return {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs.keystore),
        "ssl.keystore.password": STORE_PASSWORD,
        "ssl.key.password": STORE_PASSWORD,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        **{f"_{p}": str(port) for p, port in ports.items()},  # placeholders, taken out below
    }


def _with_listeners(props: dict[str, str], host: str, ports: dict[str, int]) -> dict[str, str]:
    props = {k: v for k, v in props.items() if not k.startswith("_")}
    extra = ",".join(f"{p}://{host}:{ports[p]}" for p in PROTOCOLS)
    props["listeners"] = f"{props['listeners']},{extra}"
    if "advertised.listeners" in props:
        props["advertised.listeners"] = f"{props['advertised.listeners']},{extra}"
    mapping = props.get("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT")
    props["listener.security.protocol.map"] = mapping + "".join(f",{p}:{p}" for p in PROTOCOLS)
    return props


class SecureKcompat(KcompatBroker):
    def __init__(self, workdir: Path, certs: Certs) -> None:
        super().__init__(workdir)
        self.certs, self.ports = certs, {p: 0 for p in PROTOCOLS}

    def properties(self) -> dict[str, str]:
        self.ports = {p: free_port() for p in PROTOCOLS}
        return _with_listeners({**super().properties(), **secure_properties(self, self.certs, self.ports)},
                               self.host, self.ports)  # fmt: skip


class SecureKafka(KafkaBroker):
    def __init__(self, workdir: Path, certs: Certs) -> None:
        super().__init__(workdir)
        self.certs, self.ports = certs, {p: 0 for p in PROTOCOLS}

    def properties(self) -> dict[str, str]:
        self.ports = {p: free_port() for p in PROTOCOLS}
        return _with_listeners({**super().properties(), **secure_properties(self, self.certs, self.ports)},
                               self.host, self.ports)  # fmt: skip


def client_settings(protocol: str, certs: Certs) -> dict[str, str]:
    out = {"security.protocol": protocol, "ssl.ca.location": str(certs.ca)}
    if protocol == "SASL_SSL":
        out.update({"sasl.mechanisms": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD})
    return out


def run_once(broker: SecureKcompat | SecureKafka, plan: Plan) -> dict[str, float]:
    out: dict[str, float] = {}
    broker.start()
    try:
        timeout = plan.timeouts["run"]
        for protocol in PROTOCOLS:
            bootstrap = f"{broker.host}:{broker.ports[protocol]}"
            client = client_settings(protocol, broker.certs)
            warm = f"tls-{protocol.lower()}-warm-up"  # not measured: handshakes made, JIT warm
            cc.create_topic(bootstrap, warm, client=client)
            cc.produce(bootstrap, warm, plan.warmup_records, 1024, "1", "none", timeout, client=client)
            cc.consume(bootstrap, warm, plan.warmup_records, timeout, client=client)
            for size in plan.sizes:
                count = plan.records[size]
                topic = f"tls-{protocol.lower()}-{size}"
                cc.create_topic(bootstrap, topic, client=client)
                cpu0 = cpu_seconds(broker.pid)
                p = cc.produce(bootstrap, topic, count, size, "1", "none", timeout, client=client)
                out[f"produce/{protocol}/{size}/records_per_s"] = p.records_per_s
                out[f"produce/{protocol}/{size}/cpu_s_per_gb"] = (cpu_seconds(broker.pid) - cpu0) / (
                    p.bytes / 1e9
                )
                cpu0 = cpu_seconds(broker.pid)
                c = cc.consume(bootstrap, topic, count, timeout, client=client)
                out[f"consume/{protocol}/{size}/records_per_s"] = c.records_per_s
                out[f"consume/{protocol}/{size}/cpu_s_per_gb"] = (cpu_seconds(broker.pid) - cpu0) / (
                    c.bytes / 1e9
                )
        return out
    finally:
        broker.stop()
        broker.cleanup()


def kernel_tls() -> str:
    try:
        stats = Path("/proc/net/tls_stat").read_text().split()
    except OSError:
        return "kernel TLS: not available here (/proc/net/tls_stat absent: the tls module is not loaded)"
    return "kernel TLS counters (/proc/net/tls_stat) after the run: " + " ".join(stats)


def run(
    plan: Plan, names: list[str], workdir: Path | None = None, rounds: int | None = None
) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="kcompat-tls-", dir=workdir))
    certs = Certs(base / "certs")
    results: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    errors: dict[str, list[str]] = {n: [] for n in names}
    try:
        for n in range(rounds or plan.rounds):
            for name in names if n % 2 == 0 else names[::-1]:
                if name == "kafka" and (why := KafkaBroker.available()) is not None:
                    errors[name].append(why)
                    continue
                cls = SecureKafka if name == "kafka" else SecureKcompat
                try:
                    results[name].append(run_once(cls(base / name, certs), plan))
                except Exception as e:
                    log.warning("TLS rows of %s, round %d failed: %s", name, n + 1, e)
                    errors[name].append(f"{type(e).__name__}: {e}")
                log.info("TLS rows of %s, round %d: %s", name, n + 1, results[name][-1:] or "failed")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {"results": results, "errors": errors, "kernel_tls": kernel_tls()}


def table(run_result: dict[str, Any], plan: Plan) -> str:
    results: dict[str, list[dict[str, float]]] = run_result["results"]
    names = list(results)

    def median(name: str, key: str) -> float | None:
        vals = [r[key] for r in results[name] if key in r]
        return statistics.median(vals) if vals else None

    ratio_head = " kcompat/kafka |" if {"kcompat", "kafka"} <= set(names) else ""
    lines = [
        "| row | " + " | ".join(names) + " |" + ratio_head,
        "|---|" + "---:|" * (len(names) + bool(ratio_head)),
    ]
    for kind in ("produce", "consume"):
        for protocol in PROTOCOLS:
            for size in plan.sizes:
                for fig, unit in (("records_per_s", "records/s"), ("cpu_s_per_gb", "CPU s/GB")):
                    key = f"{kind}/{protocol}/{size}/{fig}"
                    vals = {n: median(n, key) for n in names}
                    cells = [
                        "—" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:.2f}" for v in vals.values()
                    ]
                    row = f"| {kind} {protocol} {size_label(size)} ({unit}) | " + " | ".join(cells) + " |"
                    if ratio_head:
                        k, f = vals["kcompat"], vals["kafka"]
                        row += f" {k / f:.2f} |" if k and f else " — |"
                    lines.append(row)
    lines.append(f"\n{run_result['kernel_tls']}")
    lines.extend(f"\n{n} errors: {e}" for n, e in run_result["errors"].items() if e)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tls_rows", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--brokers", default="kcompat,kafka")
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    plan = QUICK if args.quick else FULL
    print(table(run(plan, args.brokers.split(","), args.workdir, args.rounds), plan))


if __name__ == "__main__":
    main()
