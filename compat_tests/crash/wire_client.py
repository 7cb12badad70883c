"""A minimal blocking Kafka client over a raw socket, built on kcompat.wire: for tests that must
control every byte (fuzzing, limits) and still need a well-behaved client beside the bad ones."""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any

from kcompat.kafka_uuid import ZERO_UUID
from kcompat.testing import recv_exact
from kcompat.wire.protocol import decode_response, encode_request
from kcompat.wire.records import Record, build_batch

API_VERSIONS, METADATA, PRODUCE, FETCH = 18, 3, 0, 1


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


class WireClient:
    """One connection; `call` sends a request and returns the decoded response body."""

    def __init__(self, host: str, port: int, timeout: float = 10.0, client_id: str = "well-behaved") -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self._correlation = 0

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self._correlation += 1
        self.sock.sendall(encode_request(api_key, version, self._correlation, body, self.client_id))
        correlation, response = decode_response(api_key, version, read_frame(self.sock))
        assert correlation == self._correlation, (correlation, self._correlation)
        return response

    def close(self) -> None:
        self.sock.close()


def produce_body(topic: str, value: bytes, acks: int = 1) -> dict[str, Any]:
    batch = build_batch([Record(0, int(time.time() * 1000), b"k", value)])
    return {
        "transactional_id": None, "acks": acks, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }  # fmt: skip


def fetch_body(topic: str, offset: int, max_bytes: int = 1 << 20) -> dict[str, Any]:
    return {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "current_leader_epoch": -1,
                                                    "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip


class WellBehaved:
    """A client on its own thread doing Metadata, Produce (acks=1) and Fetch round trips in a loop
    on one connection, timing each; any error or unanswered request is recorded."""

    def __init__(self, host: str, port: int, topic: str) -> None:
        self.host, self.port, self.topic = host, port, topic
        self.round_trips: list[float] = []
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="well-behaved", daemon=True)

    def _run(self) -> None:
        try:
            c = WireClient(self.host, self.port)
        except OSError as e:
            self.failures.append(f"connect: {e}")
            return
        offset = 0
        try:
            while not self.stop.is_set():
                t = time.monotonic()
                c.call(METADATA, 12, {"topics": [{"topic_id": ZERO_UUID, "name": self.topic}],
                                      "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})  # fmt: skip
                p = c.call(PRODUCE, 9, produce_body(self.topic, b"x" * 100))
                part = p.responses[0].partition_responses[0]
                if part.error_code:
                    self.failures.append(f"produce error {part.error_code}")
                f = c.call(FETCH, 12, fetch_body(self.topic, offset))
                fp = f.responses[0].partitions[0]
                if fp.error_code:
                    self.failures.append(f"fetch error {fp.error_code}")
                elif part.error_code == 0 and fp.high_watermark <= part.base_offset:
                    self.failures.append(f"high watermark {fp.high_watermark} <= produced {part.base_offset}")
                offset = max(offset, fp.high_watermark)
                self.round_trips.append(time.monotonic() - t)
                time.sleep(0.01)
        except Exception as e:  # any failure of the well-behaved client is the finding
            self.failures.append(f"{type(e).__name__}: {e}")
        finally:
            c.close()

    def __enter__(self) -> WellBehaved:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
