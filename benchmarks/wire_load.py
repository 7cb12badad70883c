"""A load generator that leaves the cores to the brokers: pre-encoded Produce and plain Fetch
requests on raw sockets, one thread and one connection per broker (the scale-on-cores rows).

Why not a Kafka client: on a 2-core machine the load shares the cores with the brokers it
measures, and a client's per-record work is as dear as the broker's. Measured during the scale
rows (indicative, a loaded machine): the confluent-kafka producer (one produce() per 1 KiB record
from Python) used 2.0-2.2 CPU s per GB and kcat (librdkafka in C, records from a file) 2.6-2.9,
against 1.5-3.5 for the brokers: two brokers could then never get near two cores' worth. Here one
Produce request per partition is encoded once (a batch of BATCH_RECORDS 1 KiB records, acks=1,
no producer id, so the same bytes may be appended again and again) and sent up to IN_FLIGHT
times pipelined per connection; the consumer walks the batch headers of each Fetch answer for the
next offset and the record count. The cost left to the client is the socket calls.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import AdminClient

from benchmarks.payloads import letter_values
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.protocol import decode_response, encode_request
from kcompat.wire.records import Record, build_batch

PRODUCE_VERSION = 9
FETCH_VERSION = 12
BATCH_RECORDS = 256  # 256 KiB batches of 1 KiB records
IN_FLIGHT = 4
_SIZE = struct.Struct(">i")
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (the bytes after these 12)


@dataclass(frozen=True)
class WireRun:
    records: int
    bytes: int  # record values
    seconds: float
    cpu_s: float  # this process's CPU seconds during the run (its threads: the load's)

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6


def leaders(bootstrap: str, topic: str) -> dict[tuple[str, int], list[int]]:
    """(host, port) of each leader -> the partitions it leads."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    out: dict[tuple[str, int], list[int]] = {}
    for p in md.topics[topic].partitions.values():
        b = md.brokers[p.leader]
        out.setdefault((b.host, b.port), []).append(p.id)
    return out


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("the broker closed the connection")
        got += k
    return buf


def _recv_frame(sock: socket.socket) -> bytearray:
    (size,) = _SIZE.unpack(_recv_exact(sock, 4))
    return _recv_exact(sock, size)


def _parallel(work: dict[tuple[str, int], list[int]], fn: Any) -> tuple[int, float, float]:
    """Run fn(address, partitions) -> records per leader, each in a thread; (records, seconds, cpu)."""
    results: dict[tuple[str, int], int] = {}
    errors: list[BaseException] = []

    def run(addr: tuple[str, int], parts: list[int]) -> None:
        try:
            results[addr] = fn(addr, parts)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(a, p)) for a, p in work.items()]
    cpu0, t0 = time.process_time(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if errors:
        raise errors[0]
    return sum(results.values()), seconds, cpu


def produce(bootstrap: str, topic: str, count: int, size: int) -> WireRun:
    """About `count` records (whole batches, spread evenly over the partitions) with acks=1."""
    values = letter_values(size)
    now = int(time.time() * 1000)
    batch = bytes(build_batch([Record(i, now, None, values[i % len(values)]) for i in range(BATCH_RECORDS)]))
    work = leaders(bootstrap, topic)
    partitions = sum(len(p) for p in work.values())
    per_partition = max(1, count // (BATCH_RECORDS * partitions))

    def send(addr: tuple[str, int], parts: list[int]) -> int:
        frames = [encode_request(PRODUCE.key, PRODUCE_VERSION, p, {
            "transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}],
        }) for p in parts]  # fmt: skip
        todo = per_partition * len(parts)
        with socket.create_connection(addr) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sent = answered = 0
            while answered < todo:
                while sent < todo and sent - answered < IN_FLIGHT:
                    sock.sendall(frames[sent % len(frames)])
                    sent += 1
                _, body = decode_response(PRODUCE.key, PRODUCE_VERSION, _recv_frame(sock))
                for t in body.responses:
                    for p in t.partition_responses:
                        if p.error_code:
                            raise RuntimeError(f"Produce to {topic}-{p.index}: error {p.error_code}")
                answered += 1
        return todo * BATCH_RECORDS

    records, seconds, cpu = _parallel(work, send)
    return WireRun(records, records * size, seconds, cpu)


def consume(bootstrap: str, topic: str, count: int, size: int) -> WireRun:
    """Every partition from offset 0 to `count` records in all, one Fetch at a time per leader."""
    work = leaders(bootstrap, topic)
    done = threading.Event()
    total = [0]
    lock = threading.Lock()

    def fetch(addr: tuple[str, int], parts: list[int]) -> int:
        offsets = dict.fromkeys(parts, 0)
        got = 0
        with socket.create_connection(addr) as sock:
            while not done.is_set():
                sock.sendall(encode_request(FETCH.key, FETCH_VERSION, 1, {
                    "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 16 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
                         "log_start_offset": -1, "partition_max_bytes": 4 << 20} for p, o in offsets.items()]}],
                    "forgotten_topics_data": [], "rack_id": "",
                }))  # fmt: skip
                _, body = decode_response(FETCH.key, FETCH_VERSION, _recv_frame(sock))
                n = 0
                for t in body.responses:
                    for p in t.partitions:
                        if p.error_code:
                            raise RuntimeError(f"Fetch {topic}-{p.partition_index}: error {p.error_code}")
                        offsets[p.partition_index], k = _walk(
                            bytes(p.records or b""), offsets[p.partition_index]
                        )
                        n += k
                got += n
                with lock:
                    total[0] += n
                    if total[0] >= count:
                        done.set()
        return got

    records, seconds, cpu = _parallel(work, fetch)
    if records < count:
        raise RuntimeError(f"read {records} of {count} records of {topic}")
    return WireRun(records, records * size, seconds, cpu)


def _walk(records: bytes, offset: int) -> tuple[int, int]:
    """The next fetch offset and the record count of the whole batches in `records`."""
    pos, n = 0, 0
    while pos + 61 <= len(records):
        base, length = _BATCH_HEAD.unpack_from(records, pos)
        if pos + 12 + length > len(records):
            break  # a partial batch at the end of the answer
        last_delta = struct.unpack_from(">i", records, pos + 23)[0]
        n += struct.unpack_from(">i", records, pos + 57)[0]
        offset = base + last_delta + 1
        pos += 12 + length
    return offset, n
