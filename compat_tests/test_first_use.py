"""First use of many new partitions never holds the event loop (issue 18), on a real `kcompat
serve` process: straight after a CreateTopics of 2,000 partitions (whose logs the broker makes
after answering), one ListOffsets for all of them, while another connection times ApiVersions
round trips. Their longest must stay far below the time the big request took: a ratio, not an
absolute time, so that a slow machine cannot fail it (the logs made on the loop held it for the
whole request: ratio ~1)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from compat_tests.crash.wire_client import WireClient
from kcompat.testing import TEST_DEFAULTS, Broker

pytestmark = pytest.mark.timeout(120)

TOPICS, PARTITIONS = 40, 50  # 2,000 partitions
API_VERSIONS, CREATE_TOPICS, LIST_OFFSETS = 18, 19, 2


def raw(port: int) -> WireClient:
    c = WireClient("127.0.0.1", port, timeout=60, client_id="first-use")
    c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c


def test_a_request_on_2000_new_partitions_leaves_the_loop_to_the_others(tmp_path: Path) -> None:
    broker = Broker(tmp_path / "data", tmp_path / "broker.log", dict(TEST_DEFAULTS)).start()
    pings: list[tuple[float, float]] = []  # (start, round trip) on a connection of their own
    stop = threading.Event()

    def ping() -> None:
        c = raw(broker.port)
        while not stop.is_set():
            t = time.monotonic()
            c.call(API_VERSIONS, 3, {"client_software_name": "ping", "client_software_version": "1"})
            pings.append((t, time.monotonic() - t))
            time.sleep(0.002)  # a busy client, not a flood that would leave the broker's threads no time

    pinger = threading.Thread(target=ping, daemon=True)
    try:
        c = raw(broker.port)
        names = [f"fresh-{i:02d}" for i in range(TOPICS)]
        pinger.start()
        r = c.call(CREATE_TOPICS, 7, {"topics": [{"name": n, "num_partitions": PARTITIONS, "replication_factor": 1,
                                                  "assignments": [], "configs": []} for n in names],
                                      "timeout_ms": 60000, "validate_only": False})  # fmt: skip
        assert [t.error_code for t in r.topics] == [0] * TOPICS
        start = time.monotonic()
        answer = c.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": n, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                       for p in range(PARTITIONS)]} for n in names]})  # fmt: skip
        took = time.monotonic() - start
        stop.set()
        pinger.join(30)
    finally:
        stop.set()
        broker.kill()  # nothing to keep: a clean stop of 2,000 logs would only add seconds
    offsets = [(p.error_code, p.offset) for t in answer.topics for p in t.partitions]
    assert offsets == [(0, 0)] * (TOPICS * PARTITIONS)  # an answer, not a retriable error
    during = [rtt for t, rtt in pings if t < start + took and t + rtt > start]
    assert during, f"{len(during)} pings during the {took * 1000:.0f} ms request"
    longest = max(during)
    assert longest < 0.5 * took, (
        f"a ping waited {longest * 1000:.0f} ms while the ListOffsets took {took * 1000:.0f} ms"
    )
