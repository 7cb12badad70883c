"""What producers were told (every acknowledged record) and what the broker serves back.

A `Ledger` collects acknowledgements from delivery callbacks on any thread. `read_topic` reads
every partition of a topic from its start to its high watermark with a real client
(confluent-kafka), so "readable" means readable by a consumer, not just present in a file.
"""

from __future__ import annotations

import threading
import time
from typing import NamedTuple

from confluent_kafka import Consumer, TopicPartition

Headers = tuple[tuple[str, bytes], ...]


class Stored(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


class Acked(NamedTuple):
    producer: str
    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    headers: Headers
    timestamp: int

    def stored(self) -> Stored:
        return Stored(self.offset, self.key, self.value, self.headers, self.timestamp)


class Ledger:
    """Acknowledged records, in the order the acknowledgements arrived."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked: list[Acked] = []
        self.failed = 0  # deliveries reported as failed (allowed: they were never acknowledged)
        self.errors: list[str] = []

    def ack(self, record: Acked) -> None:
        with self._lock:
            self.acked.append(record)

    def fail(self, why: str) -> None:
        with self._lock:
            self.failed += 1
            if len(self.errors) < 20:
                self.errors.append(why)

    def snapshot(self) -> list[Acked]:
        with self._lock:
            return list(self.acked)


def read_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, list[Stored]]:
    """Every record of every partition, from offset 0 (log start) to the high watermark."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
            "check.crcs": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(partitions)
        }
        got: dict[int, list[Stored]] = {p: [] for p in range(partitions)}
        want = {p for p, end in ends.items() if end > 0}
        c.assign([TopicPartition(topic, p, 0) for p in want])
        deadline = time.monotonic() + timeout
        while want:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{topic}: could not read up to the high watermarks {ends} within {timeout}s; "
                    f"reached { {p: (got[p][-1].offset if got[p] else None) for p in got} }"
                )
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                raise AssertionError(f"{topic}: consumer error {m.error()}")
            p = m.partition()
            got[p].append(Stored(m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))
            if m.offset() >= ends[p] - 1:
                want.discard(p)
        return got
    finally:
        c.close()
