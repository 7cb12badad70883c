"""SIGTERM answers parked requests at once: a long-polling Fetch and a JoinGroup waiting for its
rebalance would otherwise hold shutdown for the whole grace period (5 s)."""

from __future__ import annotations

import socket
import time
from typing import Any

from compat_tests.crash.wire_client import fetch_body, read_frame
from kcompat.wire.protocol import encode_request


def test_sigterm_answers_a_parked_fetch_and_join_group_at_once(kcompat_broker_factory: Any) -> None:
    broker = kcompat_broker_factory({"group.initial.rebalance.delay.ms": 60_000})
    fetch = socket.create_connection((broker.host, broker.port), timeout=10)
    join = socket.create_connection((broker.host, broker.port), timeout=10)
    try:
        # A fetch at the end of an empty topic waits max_wait_ms (30 s) for data.
        body = fetch_body("parked", 0) | {"max_wait_ms": 30_000, "min_bytes": 1}
        fetch.sendall(
            encode_request(3, 12, 1, {"topics": [{"name": "parked"}], "allow_auto_topic_creation": True})
        )
        read_frame(fetch)
        fetch.sendall(encode_request(1, 12, 2, body))
        # JoinGroup v3 (no MEMBER_ID_REQUIRED): the first member waits out the initial rebalance delay.
        join.sendall(encode_request(11, 3, 3, {
            "group_id": "parked", "session_timeout_ms": 30_000, "rebalance_timeout_ms": 60_000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
        }))  # fmt: skip
        time.sleep(0.5)
        started = time.monotonic()
        assert broker.stop(timeout=20) == 0
        took = time.monotonic() - started
        assert took < 3.0, f"shutdown took {took:.1f} s with a parked Fetch and JoinGroup"
        assert "still in progress" not in broker.logs()
    finally:
        fetch.close()
        join.close()
