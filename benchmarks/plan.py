"""What the side-by-side run measures, and how much of it: the full run and the --quick smoke run.

Every figure has a key (its place in results.json), a unit, and which way is better; the report
shows median and spread (min..max over rounds) per broker and the ratio kcompat/Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SIZES = (100, 1024)
ACKS = ("1", "all")
COMPRESSIONS = ("none", "lz4")
PRODUCE_CLIENTS = ("confluent", "java")
# Catch-up readers: the confluent consumer (fetch.queue.backoff.ms=10, and with librdkafka's
# defaults: see confluent_clients.consume), Kafka's ConsumerPerformance, and the raw fetch loop
# asking for 1 MiB per partition (a client's default max.partition.fetch.bytes) or 50 MiB.
CONSUME_CLIENTS = ("confluent", "confluent-defaults", "java", "raw-1MiB", "raw-50MiB")
RAW_PARTITION_MAX = {"raw-1MiB": 1 << 20, "raw-50MiB": 50 << 20}


@dataclass(frozen=True)
class Plan:
    rounds: int
    records: dict[int, int]  # per confluent produce run (and catch-up read), by record size
    java_records: dict[int, int]  # per ProducerPerformance run
    fetch_passes: int  # the raw fetch loop reads its partition this many times over
    warmup_records: int
    e2e_rate: int  # records/s, well below saturation
    e2e_seconds: float
    e2e_size: int
    machine_mib: int
    clients: tuple[str, ...] = PRODUCE_CLIENTS
    consume_clients: tuple[str, ...] = CONSUME_CLIENTS
    sizes: tuple[int, ...] = SIZES
    acks: tuple[str, ...] = ACKS
    compressions: tuple[str, ...] = COMPRESSIONS
    suites: tuple[str, ...] = ("produce", "consume", "latency", "txn", "share", "streams", "requests")
    timeouts: dict[str, float] = field(default_factory=lambda: {"run": 180.0})
    # benchmarks/small_requests.py: Produce requests of one 16 KiB batch per row, and 1 KiB
    # records sent at the produce ceiling
    small_requests: int = 60_000
    ceiling_records: int = 2_000_000


# Counts sized so that each measured interval lasts a second or more on 2 cores: shorter ones
# (0.2-0.5 s at the earlier 200k/100k counts) moved 20-50% between rounds on scheduling alone.
FULL = Plan(
    rounds=3,
    records={100: 2_000_000, 1024: 500_000},
    java_records={100: 1_000_000, 1024: 200_000},
    fetch_passes=10,
    warmup_records=20_000,
    e2e_rate=2000,
    e2e_seconds=5.0,
    e2e_size=100,
    machine_mib=256,
)

QUICK = Plan(
    rounds=1,
    records={100: 20_000, 1024: 4_000},
    java_records={100: 20_000, 1024: 4_000},
    fetch_passes=1,
    warmup_records=1_000,
    e2e_rate=1000,
    e2e_seconds=1.5,
    e2e_size=100,
    machine_mib=32,
    timeouts={"run": 20.0},
    small_requests=2_000,
    ceiling_records=20_000,
)


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    higher_is_better: bool


def size_label(size: int) -> str:
    return "1 KiB" if size == 1024 else f"{size} B"


def produce_key(client: str, size: int, acks: str, compression: str) -> str:
    return f"produce/{client}/{size}/acks={acks}/{compression}"


def consume_key(client: str, size: int) -> str:
    return f"consume/{client}/{size}"


def figures(plan: Plan) -> list[Figure]:
    out = [
        Figure("start/cold_s", "cold start to first Metadata answer", "s", False),
        Figure("memory/idle_rss_mb", "resident memory, idle after start", "MB", False),
        Figure("memory/load_rss_mb", "resident memory, peak under load", "MB", False),
    ]
    for client in plan.clients:
        for size in plan.sizes:
            for acks in plan.acks:
                for comp in plan.compressions:
                    key = produce_key(client, size, acks, comp)
                    label = f"produce {client} {size_label(size)} acks={acks} {comp}"
                    out += [
                        Figure(f"{key}/records_per_s", label, "records/s", True),
                        Figure(f"{key}/mb_per_s", label, "MB/s", True),
                        Figure(f"{key}/cpu_s_per_gb", label, "CPU s/GB", False),
                    ]
    for client in plan.consume_clients:
        for size in plan.sizes:
            key = consume_key(client, size)
            label = f"catch-up consume {client} {size_label(size)}"
            out += [
                Figure(f"{key}/records_per_s", label, "records/s", True),
                Figure(f"{key}/mb_per_s", label, "MB/s", True),
                Figure(f"{key}/cpu_s_per_gb", label, "CPU s/GB", False),
            ]
    for p in ("p50", "p99", "p99.9"):
        out.append(Figure(f"latency/e2e/{p}_ms", f"end-to-end latency {p}", "ms", False))
    return out
