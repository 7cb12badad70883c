"""What both proxy modules check: clients through the proxy, and that no answer named an
upstream address."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterable
from typing import Any

import confluent_kafka
import kafka

from compat_tests.proxy.harness import HOST, ProxyThread
from kcompat.wire.protocol import decode_response, encode_request


def assert_no_upstream_address(proxy: ProxyThread, upstream_ports: Iterable[int]) -> None:
    """Every host/port any answer carried is one of the proxy's own endpoints."""
    seen = {(h, p) for h, p in proxy.capture.seen() if h and p >= 0}
    leaked = {(h, p) for h, p in seen if p in set(upstream_ports)}
    assert not leaked, f"upstream addresses reached a client: {leaked}"
    assert seen <= proxy.proxy_addresses(), f"addresses not the proxy's: {seen - proxy.proxy_addresses()}"
    assert proxy.capture.by_api[3] > 0  # Metadata answers were checked


def confluent_produce(bootstrap: str, topic: str, values: list[str], **conf: Any) -> int:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "enable.idempotence": True, **conf})  # fmt: skip
    delivered: list[Any] = []
    for v in values:
        producer.produce(topic, v.encode(), on_delivery=lambda err, msg: delivered.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert delivered == [None] * len(values), delivered
    return len(delivered)


def confluent_consume(bootstrap: str, topic: str, group: str, count: int, **conf: Any) -> list[str]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", **conf})  # fmt: skip
    consumer.subscribe([topic])
    got: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def kafka_python_roundtrip(
    bootstrap: str, topic: str, values: list[str], group: str, expect: int
) -> list[str]:
    """Produce `values`, then read the topic in a group until `expect` records came."""
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for v in values:
        producer.send(topic, v.encode())
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                   auto_offset_reset="earliest", consumer_timeout_ms=8000)  # fmt: skip
    got: list[str] = []
    deadline = time.monotonic() + 60
    while len(got) < expect and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value.decode() for r in records]
    consumer.commit()
    consumer.close()
    return got


def transaction_roundtrip(bootstrap: str, topic: str, txn_id: str) -> list[str]:
    """One committed and one aborted transaction; what a read_committed consumer then reads."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"committed-{i}".encode())
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"aborted-{i}".encode())
    producer.flush(30)
    producer.abort_transaction(60)
    return confluent_consume(
        bootstrap, topic, f"{txn_id}-reader", 10, **{"isolation.level": "read_committed"}
    )


class Ledger:
    """An idempotent acks=all producer writing without pause in a thread; what it was told."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                                   "enable.idempotence": True, "linger.ms": 5})  # fmt: skip
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            value = f"ledger-{i}"
            self._producer.produce(self.topic, value.encode(), partition=i % 3, on_delivery=self._delivered)
            self._producer.poll(0.01)
            i += 1
        self._producer.flush(60)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append(msg.value().decode())
        else:
            self.errors.append(str(err))

    def wait_acked(self, more: int, timeout: float = 60) -> None:
        target = len(self.acked) + more
        deadline = time.monotonic() + timeout
        while len(self.acked) < target:
            assert time.monotonic() < deadline, f"only {len(self.acked)} of {target} acknowledged"
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


def raw_frames(port: int, frames: list[bytes], answers: int, timeout: float = 10) -> list[bytes]:
    """Write all frames at once (pipelined), read `answers` answer frames (without size prefix)."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(b"".join(frames))
        out = []
        for _ in range(answers):
            size = struct.unpack(">i", _recv(s, 4))[0]
            out.append(_recv(s, size))
        return out


def closed_after(port: int, data: bytes, timeout: float = 10) -> bool:
    """True when the proxy closes the connection after `data` (reading whatever comes first)."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(data)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                return True
            if not chunk:
                return True
        return False


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def metadata_brokers(port: int) -> set[tuple[int, str, int]]:
    frame = encode_request(3, 12, 1, {"topics": None, "allow_auto_topic_creation": False})
    (answer,) = raw_frames(port, [frame], 1)
    _, body = decode_response(3, 12, answer)
    return {(b.node_id, b.host, b.port) for b in body.brokers}
