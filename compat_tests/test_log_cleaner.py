"""The log cleaner on Kafka's cadence (issue 29): compacted topics are cleaned by their own loop,
which backs off log.cleaner.backoff.ms (15 s) when nothing is due, not on the retention check's
5 minutes; log.cleaner.enable=false leaves compacted topics as written."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.client_data import unique

pytestmark = pytest.mark.timeout(120)


def write_key_three_times_and_roll(bootstrap: str, topic: str) -> None:
    """Key k written three times in the first segment; a later record rolls it (segment.ms)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cfg = {"cleanup.policy": "compact", "segment.ms": "100"}
    admin.create_topics([NewTopic(topic, 1, 1, config=cfg)])[topic].result(10)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        p.produce(topic, key=b"k", value=b"v%d" % i, partition=0)
    p.flush(10)
    time.sleep(0.3)
    p.produce(topic, key=b"other", value=b"x", partition=0)  # past segment.ms: a new segment
    p.flush(10)


def read_all(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("cleaner-reader"),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    c.subscribe([topic])
    got: list[tuple[bytes | None, bytes | None]] = []
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is None:
                if got and got[-1][0] == b"other":
                    break
                continue
            if not m.error():
                got.append((m.key(), m.value()))
    finally:
        c.close()
    return got


def test_a_rolled_segment_is_compacted_within_the_backoff(kcompat_session_broker: Any) -> None:
    """Kafka's defaults (log.cleaner.backoff.ms 15 s, min.cleanable.dirty.ratio 0.5): compacted
    within the backoff of the roll, where the retention check would take 5 minutes."""
    b = kcompat_session_broker
    topic = unique("cleaner-cadence")
    write_key_three_times_and_roll(b.bootstrap, topic)
    rolled = time.monotonic()
    got = read_all(b.bootstrap, topic)
    while got != [(b"k", b"v2"), (b"other", b"x")] and time.monotonic() - rolled < 20:
        time.sleep(0.5)
        got = read_all(b.bootstrap, topic)
    assert got == [(b"k", b"v2"), (b"other", b"x")]


def test_log_cleaner_enable_false_leaves_compacted_topics_as_written(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory({"log.cleaner.enable": "false", "log.cleaner.backoff.ms": "100",
                                "log.retention.check.interval.ms": "100"})  # fmt: skip
    topic = unique("cleaner-off")
    write_key_three_times_and_roll(b.bootstrap, topic)
    time.sleep(3)  # thirty backoffs and retention checks
    assert read_all(b.bootstrap, topic) == [(b"k", b"v0"), (b"k", b"v1"), (b"k", b"v2"), (b"other", b"x")]
