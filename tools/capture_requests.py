#!/usr/bin/env python3
"""Capture the request frames real clients send, as golden bytes for tests/wire/golden/requests.

    python tools/capture_requests.py [--out tests/wire/golden/requests]
    python tools/capture_requests.py --java-4.3 [--out tests/wire/golden/requests]

Runs a throwaway in-process responder on 127.0.0.1 that answers just enough (ApiVersions,
Metadata, InitProducerId, Produce, ListOffsets, Fetch, FindCoordinator) for kafka-python and
confluent-kafka (librdkafka) and the Java client 3.9 (tools/java/CaptureClient.java,
run from the jars tools/setup-test-deps.sh resolves) to produce and fetch, and writes the first frame of every
(client, API, version) as hex. The golden test then decodes and re-encodes each one.

--java-4.3 records the Java client 4.3.1 (tools/java/CaptureClient43.java: Admin, producer,
classic and KIP-848 group members) instead, through a recording proxy in front of a real
`kcompat serve` (advertising the proxy), so that it sends its newest versions against Kafka 4.3's
ranges: the responder above could not run a group.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from kcompat.wire import protocol
from kcompat.wire.records import Record, build_batch

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "golden"
ADVERTISED = {0: (0, 11), 1: (4, 12), 2: (1, 7), 3: (0, 12), 10: (0, 2), 18: (0, 4), 22: (0, 5), 23: (2, 4)}


class Responder:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.client = "unknown"
        self.port = 0
        self.seen: set[tuple[str, int, int]] = set()
        self.offset = 0

    def save(self, frame: bytes, key: int, version: int) -> None:
        tag = (self.client, key, version)
        if tag in self.seen:
            return
        self.seen.add(tag)
        name = protocol.api(key).name
        path = self.out / self.client / f"{name}-v{version}.hex"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(frame.hex() + "\n")

    def answer(self, key: int, version: int, body: Any) -> Any:
        if key == 18:
            return {
                "api_keys": [
                    {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in ADVERTISED.items()
                ]
            }
        if key == 3:
            names = [t.name for t in body.topics] if body.topics else [TOPIC]
            return {
                "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "golden-cluster",
                "controller_id": 1,
                "topics": [
                    {
                        "name": n,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "leader_id": 1,
                                "leader_epoch": 0,
                                "replica_nodes": [1],
                                "isr_nodes": [1],
                            }
                        ],
                    }
                    for n in names
                ],
            }
        if key == 22:
            return {"producer_id": 4242, "producer_epoch": 0}
        if key == 10:
            return {"node_id": 1, "host": "127.0.0.1", "port": self.port, "coordinators": []}
        if key == 0:
            self.offset += 1
            return {
                "responses": [
                    {
                        "name": t.name,
                        "partition_responses": [
                            {"index": p.index, "base_offset": self.offset} for p in t.partition_data
                        ],
                    }
                    for t in body.topic_data
                ]
            }
        if key == 2:
            return {
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {"partition_index": p.partition_index, "offset": 0, "timestamp": -1}
                            for p in t.partitions
                        ],
                    }
                    for t in body.topics
                ]
            }
        if key == 23:
            return {
                "topics": [
                    {
                        "topic": t.topic,
                        "partitions": [
                            {"partition": p.partition, "leader_epoch": 0, "end_offset": 1}
                            for p in t.partitions
                        ],
                    }
                    for t in body.topics
                ]
            }
        if key == 1:
            batch = build_batch(
                [Record(offset=0, timestamp=int(time.time() * 1000), key=b"k", value=b"v", headers=())]
            )
            return {
                "responses": [
                    {
                        "topic": t.topic,
                        "partitions": [
                            {
                                "partition_index": p.partition,
                                "high_watermark": 1,
                                "last_stable_offset": 1,
                                "records": batch if p.fetch_offset == 0 else b"",
                            }
                            for p in t.partitions
                        ],
                    }
                    for t in body.topics
                ]
            }
        return None

    async def serve_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                key, version, correlation = protocol.peek_header(frame)
                self.save(frame, key, version)
                if key not in ADVERTISED:
                    break
                req = protocol.decode_request(frame)
                if key == 1:
                    await asyncio.sleep(0.05)
                if key == 0 and req.body.acks == 0:
                    continue
                reply = protocol.response_codec(key).build(self.answer(key, version, req.body))
                writer.write(b"".join(protocol.encode_response(key, version, correlation, reply)))  # type: ignore[arg-type]
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def run_clients(responder: Responder) -> None:
    bootstrap = f"127.0.0.1:{responder.port}"
    import kafka
    from confluent_kafka import Consumer, Producer, TopicPartition

    responder.client = "kafka-python"
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=5)
    p.send(TOPIC, key=b"key", value=b"value" * 20, headers=[("h", b"1")], partition=0).get(timeout=10)
    p.close()
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=1500, enable_auto_commit=False)
    c.assign([kafka.TopicPartition(TOPIC, 0)])
    c.seek(kafka.TopicPartition(TOPIC, 0), 0)
    list(c)
    c.close()

    responder.client = "librdkafka"
    lp = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.codec": "lz4",
            "linger.ms": 5,
            "enable.idempotence": True,
        }
    )
    lp.produce(TOPIC, key=b"key", value=b"value" * 20, headers=[("h", b"1")], partition=0)
    lp.flush(10)
    lc = Consumer({"bootstrap.servers": bootstrap, "group.id": "golden", "enable.auto.commit": False})
    lc.assign([TopicPartition(TOPIC, 0, 0)])
    deadline = time.time() + 3
    while time.time() < deadline:
        lc.poll(0.2)
    lc.close()

    responder.client = "java-3.9"
    subprocess.run(
        [
            "java",
            "-cp",
            str(ROOT / ".deps" / "kafka-clients-3.9" / "*"),
            str(ROOT / "tools" / "java" / "CaptureClient.java"),
            bootstrap,
            TOPIC,
        ],
        check=True,
        timeout=120,
    )


async def _proxy(
    responder: Responder, target: int, server_ready: threading.Event, stop: threading.Event
) -> None:
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: bool) -> None:
        try:
            while True:
                size_bytes = await reader.readexactly(4)
                frame = await reader.readexactly(struct.unpack(">i", size_bytes)[0])
                if record:
                    key, version, _ = protocol.peek_header(frame)
                    responder.save(frame, key, version)
                writer.write(size_bytes + frame)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))

    server = await asyncio.start_server(conn, "127.0.0.1", responder.port)
    server_ready.set()
    await asyncio.to_thread(stop.wait)  # a threading.Event: set by the capturing thread
    server.close()


def capture_java_43(out: Path) -> None:
    import socket
    import sys
    import tempfile

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    responder = Responder(out)
    responder.client = "java-4.3"
    responder.port, target = free_port(), free_port()
    data = tempfile.mkdtemp(prefix="capture-")
    broker = subprocess.Popen([sys.executable, "-m", "kcompat", "serve",
                               "--override", f"listeners=PLAINTEXT://127.0.0.1:{target}",
                               "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{responder.port}",
                               "--override", f"log.dirs={data}", "--override", "num.partitions=1",
                               "--log-level", "WARNING"])  # fmt: skip
    ready, stop = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(_proxy(responder, target, ready, stop)), daemon=True)
    thread.start()
    ready.wait(10)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # wait for the broker to listen
            try:
                socket.create_connection(("127.0.0.1", target), 0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        subprocess.run(
            ["java", "-cp", str(ROOT / ".deps" / "kafka" / "*"), str(ROOT / "tools" / "java" / "CaptureClient43.java"),
             f"127.0.0.1:{responder.port}", TOPIC],
            check=True, timeout=180,
        )  # fmt: skip
    finally:
        stop.set()
        broker.terminate()
        broker.wait(30)
    print(f"captured {len(responder.seen)} frames into {out / responder.client}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "wire" / "golden" / "requests")
    ap.add_argument(
        "--java-4.3", dest="java43", action="store_true", help="capture the Java client 4.3.1 instead"
    )
    args = ap.parse_args()
    if args.java43:
        capture_java_43(args.out)
        return
    responder = Responder(args.out)
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(responder.serve_conn, "127.0.0.1", 0))
    responder.port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    run_clients(responder)
    loop.call_soon_threadsafe(loop.stop)
    for client, key, version in sorted(responder.seen):
        print(f"{client:14} {protocol.api(key).name} v{version}")


if __name__ == "__main__":
    main()
