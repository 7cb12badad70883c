"""A load generator that leaves the cores to the brokers (the scale-on-cores rows): Python encodes
the requests once, a small Go program (benchmarks/loadgen/main.go) sends them on raw sockets.

Why not a Kafka client: on a 2-core machine the load shares the cores with the brokers it
measures, and a client's per-record work is as dear as the broker's. Measured during the scale
rows (indicative, a loaded machine): the confluent-kafka producer (one produce() per 1 KiB record
from Python) used 2.0-2.2 CPU s per GB and kcat (librdkafka in C, records from a file) 2.6-2.9,
against 1.5-3.5 for the brokers: two brokers could then never get near two cores' worth. Why not
Python on raw sockets (this module's first form): decoding each Fetch answer copied every 4 MiB
records field twice, and the load used 0.35-0.65 of a core, for consume more than the broker.

Produce: one Produce v8 request per partition is encoded once (a batch of BATCH_RECORDS 1 KiB
records, acks=1, no producer id, so the same bytes may be appended again and again) and sent
`requests` times, IN_FLIGHT pipelined per connection (Go sends them with sendfile). Consume: one
Fetch v4 request (not flexible, so Go parses the answer in a few lines) per connection, with the
byte position of each partition's fetch_offset for Go to patch; Go walks the batch headers of each
answer for the next offset and the record count and drops the rest in the kernel. Connections:
CONNS_PER_LEADER per leader, partitions dealt out between them. The Go binary is built on first use
into .deps/loadgen/<source hash>/ (benchmarks/go_tools.py: an edit builds anew, no stale binary).
"""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from benchmarks import go_tools
from benchmarks.payloads import letter_values
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.protocol import encode_request
from kcompat.wire.records import Record, build_batch

PRODUCE_VERSION = 8  # the last before flexible versions: Go parses the answer with fixed fields
FETCH_VERSION = 4  # the oldest Kafka 4 answers; no sessions, no tagged fields
BATCH_RECORDS = 256  # 256 KiB batches of 1 KiB records
IN_FLIGHT = 4
CONNS_PER_LEADER = 1
PARTITION_MAX_BYTES = 4 << 20
_MARK = 0x7E57_0FF5_E700_0000  # a fetch_offset no real request has, found again in the encoded bytes


@dataclass(frozen=True)
class WireRun:
    records: int
    bytes: int  # record values
    seconds: float
    cpu_s: float  # the load's CPU seconds during the run (the Go process's, from getrusage)

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6


def leaders(bootstrap: str, topic: str) -> dict[tuple[str, int], list[int]]:
    """(host, port) of each leader -> the partitions it leads."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        raise RuntimeError(f"{topic}: no partitions in Metadata ({t.error if t is not None else 'no topic'})")
    out: dict[tuple[str, int], list[int]] = {}
    for p in t.partitions.values():
        if p.leader < 0:
            raise RuntimeError(f"{topic}-{p.id}: no leader")
        b = md.brokers[p.leader]
        out.setdefault((b.host, b.port), []).append(p.id)
    return {a: sorted(p) for a, p in out.items()}


def go_binary() -> Path:
    """The load generator, built once per version of its source (a clear error without Go)."""
    return go_tools.binary("loadgen", "the scale rows")


def _deal(work: dict[tuple[str, int], list[int]], conns: int) -> list[tuple[str, list[int]]]:
    """(host:port, partitions) per connection: each leader's partitions dealt out over `conns`."""
    return [
        (f"{h}:{p}", parts[c::conns]) for (h, p), parts in work.items() for c in range(min(conns, len(parts)))
    ]


def _run(job: dict[str, Any], timeout: float) -> dict[str, Any]:
    def plain(o: Any) -> Any:
        if isinstance(o, bytes):  # Go's encoding/json reads []byte as base64
            return base64.b64encode(o).decode()
        raise TypeError(type(o))

    job = {**job, "timeout_s": timeout}  # Go fails on its own after this; the +30 s is for a hung Go
    done = subprocess.run(
        [str(go_binary())],
        input=json.dumps(job, default=plain).encode(),
        capture_output=True,
        timeout=timeout + 30,
    )
    if done.returncode != 0:
        raise RuntimeError(f"loadgen {job['mode']} failed: {done.stderr.decode(errors='replace').strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def produce(bootstrap: str, topic: str, count: int, size: int, conns: int = CONNS_PER_LEADER,
            in_flight: int = IN_FLIGHT, batch_records: int = BATCH_RECORDS, timeout: float = 300.0) -> WireRun:  # fmt: skip
    """About `count` records (whole batches, spread evenly over the partitions) with acks=1."""
    values = letter_values(size)
    now = int(time.time() * 1000)
    batch = bytes(build_batch([Record(i, now, None, values[i % len(values)]) for i in range(batch_records)]))
    work = leaders(bootstrap, topic)
    partitions = sum(len(p) for p in work.values())
    per_partition = max(1, count // (batch_records * partitions))
    job_conns = []
    for addr, parts in _deal(work, conns):
        frames = [encode_request(PRODUCE.key, PRODUCE_VERSION, p, {
            "transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}],
        }) for p in parts]  # fmt: skip
        job_conns.append({"addr": addr, "frames": frames, "requests": per_partition * len(parts),
                          "records_per_frame": batch_records})  # fmt: skip
    r = _run({"mode": "produce", "in_flight": in_flight, "conns": job_conns}, timeout)
    expected = per_partition * partitions * batch_records
    if r["records"] != expected:
        raise RuntimeError(f"loadgen produced {r['records']} records of {expected}")
    return WireRun(r["records"], r["records"] * size, r["seconds"], r["cpu_s"])


def fetch_template(topic: str, partitions: list[int], partition_max_bytes: int) -> tuple[bytes, list[int]]:
    """A Fetch v4 frame for `partitions` and the byte position of each one's fetch_offset."""
    frame = encode_request(FETCH.key, FETCH_VERSION, 1, {
        "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 64 << 20, "isolation_level": 0,
        "topics": [{"topic": topic, "partitions": [
            {"partition": p, "fetch_offset": _MARK + p, "partition_max_bytes": partition_max_bytes}
            for p in partitions]}],
    })  # fmt: skip
    positions = []
    for p in partitions:
        mark = struct.pack(">q", _MARK + p)
        at = frame.find(mark)
        if at < 0 or frame.find(mark, at + 1) >= 0:
            raise AssertionError(f"fetch_offset of partition {p} not found once in the Fetch template")
        positions.append(at)
    return frame, positions


def consume(bootstrap: str, topic: str, count: int, size: int, conns: int = CONNS_PER_LEADER,
            partition_max_bytes: int = PARTITION_MAX_BYTES, timeout: float = 300.0) -> WireRun:  # fmt: skip
    """Every partition from offset 0 until `count` records in all are read: a partition read up to
    its high watermark starts again at 0, so `count` may be larger than the topic."""
    job_conns = []
    for addr, parts in _deal(leaders(bootstrap, topic), conns):
        template, positions = fetch_template(topic, parts, partition_max_bytes)
        job_conns.append({"addr": addr, "template": template, "partitions": parts, "offset_at": positions})
    r = _run({"mode": "fetch", "records": count, "conns": job_conns}, timeout)
    if r["records"] < count:
        raise RuntimeError(f"read {r['records']} of {count} records of {topic}")
    return WireRun(r["records"], r["records"] * size, r["seconds"], r["cpu_s"])
