"""Big requests against kcompat with many partitions, and the longest stall another client sees.

    python -m benchmarks.big_requests [--topics 100 --partitions 50 --hot 1000 --rounds 5]

One kcompat broker with TOPICS x PARTITIONS partitions (one record each). Timed, ROUNDS times each,
over one raw connection: Metadata v12 for all topics, ListOffsets v7 (latest) for every partition,
one Produce v9 (acks=1) carrying a batch for each of HOT partitions, one Fetch v12 of those HOT
partitions. Meanwhile a separate process (so that this one's decoding cannot delay it) sends
ApiVersions round trips on its own connection as fast as it can; for each request kind the table
gives the longest of those round trips that overlapped it (the median over rounds, and the max):
how long the event loop was held.

First use: before those rounds, each of ListOffsets, Produce and Fetch is sent once more, at once
after a CreateTopics of partitions of its own (TOPICS x PARTITIONS for ListOffsets, HOT for the
other two), whose logs the broker makes after answering: what first use of many new partitions
costs the request and, in the ping column, everybody else (--no-first-use skips them).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kcompat.testing import Broker, recv_exact
from kcompat.wire.protocol import decode_response, encode_request
from kcompat.wire.records import Record, build_batch

METADATA, LIST_OFFSETS, PRODUCE, FETCH = 3, 2, 0, 1

# The pinger: ApiVersions v3 round trips until stdin closes; prints [[start, seconds], ...].
PINGER = """
import json, socket, struct, sys, threading, time
from kcompat.testing import recv_exact
from kcompat.wire.protocol import encode_request
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
out, n = [], 0
while not done.is_set():
    n += 1
    frame = encode_request(18, 3, n, {"client_software_name": "p", "client_software_version": "1"}, "pinger")
    t = time.time()
    s.sendall(frame)
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    recv_exact(s, size)
    out.append([t, time.time() - t])
print(json.dumps(out))
"""


class Raw:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.n = 0

    def call(self, api: int, version: int, body: dict[str, Any]) -> Any:
        self.n += 1
        self.sock.sendall(encode_request(api, version, self.n, body, "big-requests"))
        (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
        return decode_response(api, version, recv_exact(self.sock, size))[1]

    def timed(self, api: int, version: int, body: dict[str, Any]) -> tuple[float, float, Any]:
        """(start, seconds to the whole answer received, undecoded), then decoded to check it."""
        self.n += 1
        frame = encode_request(api, version, self.n, body, "big-requests")
        t = time.time()
        self.sock.sendall(frame)
        (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
        data = recv_exact(self.sock, size)
        took = time.time() - t
        return t, took, decode_response(api, version, data)[1]


def bodies(names: list[str], partitions: int, hot: list[tuple[str, int]]) -> dict[str, tuple[int, int, Any]]:
    batch = build_batch([Record(0, int(time.time() * 1000), b"k", b"x" * 100)])
    by_topic: dict[str, list[int]] = {}
    for t, p in hot:
        by_topic.setdefault(t, []).append(p)
    return {
        "Metadata, all topics": (METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False}),
        "ListOffsets, every partition": (LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                       for p in range(partitions)]} for t in names]}),
        f"Produce to {len(hot)} partitions": (PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": t, "partition_data": [{"index": p, "records": batch} for p in ps]}
                           for t, ps in by_topic.items()]}),
        f"Fetch of {len(hot)} partitions": (FETCH, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
            "max_bytes": 64 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": [{"partition": p, "fetch_offset": 0, "current_leader_epoch": -1,
                        "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in ps]}
                       for t, ps in by_topic.items()],
            "forgotten_topics_data": [], "rack_id": ""}),
    }  # fmt: skip


def create_topics(c: Raw, names: list[str], partitions: int) -> None:
    r = c.call(19, 7, {"topics": [{"name": n, "num_partitions": partitions, "replication_factor": 1,
                                   "assignments": [], "configs": []} for n in names],
                       "timeout_ms": 60000, "validate_only": False})  # fmt: skip
    assert all(t.error_code == 0 for t in r.topics), [t for t in r.topics if t.error_code][:3]


def first_use(c: Raw, topics: int, partitions: int, hot: int) -> dict[str, tuple[float, float]]:
    """Each kind once, straight after creating its own topics: {row: (start, seconds)}."""
    out = {}
    hot_topics = max(1, -(-hot // partitions))
    for prefix, kind, count in (("fl", "ListOffsets", topics), ("fp", "Produce", hot_topics),
                                ("ff", "Fetch", hot_topics)):  # fmt: skip
        names = [f"{prefix}-{i:04d}" for i in range(count)]
        every = [(n, p) for n in names for p in range(partitions)]
        touched = every if kind == "ListOffsets" else every[:hot]
        create_topics(c, names, partitions)
        (row, (api, version, body)), = ((k, b) for k, b in bodies(names, partitions, touched).items()
                                        if k.startswith(kind))  # fmt: skip
        t, took, answer = c.timed(api, version, body)
        try:
            check(row, answer, len(every), len(touched))
            out[f"{row}, first use"] = (t, took)
        except RuntimeError as e:  # past the request's wait the rest answer a retriable error: said
            out[f"{row}, first use ({e})"] = (t, took)
        time.sleep(0.5)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.big_requests", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--hot", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--settle", type=float, default=0.0,
        help="seconds to wait after CreateTopics (its logs are made in the background; 0: the first round makes them)",
    )  # fmt: skip
    ap.add_argument("--no-first-use", dest="first_use", action="store_false",
                    help="skip the first-use rows (requests straight after CreateTopics of new partitions)")  # fmt: skip
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="kcompat-big-"))
    broker = Broker(root / "data", root / "broker.log", overrides={})
    broker.start()
    try:
        c = Raw(broker.port)
        names = [f"big-{i:04d}" for i in range(args.topics)]
        create_topics(c, names, args.partitions)
        every = [(n, p) for n in names for p in range(args.partitions)]
        hot = every[:: max(1, len(every) // args.hot)][: args.hot]
        time.sleep(args.settle)
        kinds = bodies(names, args.partitions, hot)
        pinger = subprocess.Popen([sys.executable, "-c", PINGER, str(broker.port)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(1.0)  # the pinger's idle round trips first
        firsts = first_use(c, args.topics, args.partitions, args.hot) if args.first_use else {}
        windows: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
        for _ in range(args.rounds):
            for kind, (api, version, body) in kinds.items():
                t, took, answer = c.timed(api, version, body)
                windows[kind].append((t, took))
                check(kind, answer, len(every), len(hot))
                time.sleep(0.2)
        time.sleep(0.5)
        out, _ = pinger.communicate("", timeout=30)
        pings: list[list[float]] = json.loads(out)
    finally:
        broker.stop()
    started = min([w[0][0] for w in windows.values()] + [t for t, _ in firsts.values()])
    idle = [rtt for t, rtt in pings if t < started]
    print(f"{args.topics} topics x {args.partitions} partitions, {len(pings)} pings "
          f"(idle median {statistics.median(idle) * 1000:.2f} ms)")  # fmt: skip
    print("| request | median ms | max ms | longest ping meanwhile, ms: median round | max |")
    print("|---|---:|---:|---:|---:|")
    for kind, ws in windows.items():
        # per round, the longest ping that overlapped it (the first round also pays first uses)
        longest = [
            max((rtt for t, rtt in pings if t < s + d and t + rtt > s), default=0.0) * 1000 for s, d in ws
        ]
        took = [d * 1000 for _, d in ws]
        print(f"| {kind} | {statistics.median(took):.1f} | {max(took):.1f} | "
              f"{statistics.median(longest):.1f} | {max(longest):.1f} |")  # fmt: skip
    for kind, (s, d) in firsts.items():
        first = max((rtt for t, rtt in pings if t < s + d and t + rtt > s), default=0.0) * 1000
        print(f"| {kind} | {d * 1000:.1f} | {d * 1000:.1f} | {first:.1f} | {first:.1f} |")


def check(kind: str, answer: Any, partitions: int, hot: int) -> None:
    """Each answer is whole and error-free: a fast wrong answer would measure nothing."""
    if kind.startswith("Metadata"):
        n = sum(len(t.partitions) for t in answer.topics if t.name.startswith("big-"))
    elif kind.startswith("ListOffsets"):
        n = sum(1 for t in answer.topics for p in t.partitions if p.error_code == 0)
    elif kind.startswith("Produce"):
        n = sum(1 for t in answer.responses for p in t.partition_responses if p.error_code == 0)
    else:
        n = sum(1 for t in answer.responses for p in t.partitions if p.error_code == 0)
    want = partitions if kind.startswith(("Metadata", "ListOffsets")) else hot
    if n != want:
        raise RuntimeError(f"{kind}: {n} partitions answered without error, not {want}")


if __name__ == "__main__":
    main()
