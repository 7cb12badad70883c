"""The broker's log as an operator reads it, from a real `kcompat serve --log-level DEBUG` with
`log.format=json`: every line one JSON object; topic creation and deletion and group rebalances
(classic and KIP-848, with generation, members and partitions per member) at INFO; client
connections at DEBUG."""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.fetch_log import DebugBroker
from kcompat.testing import TEST_DEFAULTS

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DebugBroker]:
    base = tmp_path_factory.mktemp("logs")
    b = DebugBroker(base / "data", base / "broker.log", {**TEST_DEFAULTS, "log.format": "json"})
    b.start()
    yield b
    b.stop()


def records(broker: DebugBroker) -> list[dict[str, Any]]:
    """The broker's JSON lines (the fixture's own "--- kcompat-testing" lines aside)."""
    return [
        json.loads(line) for line in broker.logs().splitlines() if not line.startswith("--- kcompat-testing")
    ]


def wait_for(broker: DebugBroker, match: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [r for r in records(broker) if match(r)]
        if found:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError(f"no log line {what}; the log:\n{broker.logs()[-3000:]}")


def create_topic(broker: DebugBroker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held until the answer came
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _join(broker: DebugBroker, group: str, topic: str, members: int, **conf: str) -> list[Consumer]:
    consumers = [
        Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **conf}) for _ in range(members)
    ]
    for c in consumers:
        c.subscribe([topic])
    return consumers


def _poll_until(consumers: list[Consumer], done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not done() and time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.1)


def test_lines_are_json_with_start_up_topics_and_connections(broker: DebugBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("logged-topic", 3, 1)])["logged-topic"].result(30)
    admin.delete_topics(["logged-topic"])["logged-topic"].result(30)
    del admin
    lines = records(broker)
    assert {"time", "level", "logger", "message"} <= set(lines[0])
    assert any(" listening on PLAINTEXT://127.0.0.1:" in r["message"] and r["level"] == "INFO" for r in lines)
    assert any(
        r["message"] == "created topic logged-topic with 3 partition(s)" and r["level"] == "INFO"
        for r in lines
    )
    assert any(r["message"] == "deleted topic logged-topic" and r["level"] == "INFO" for r in lines)
    accepted = [
        r
        for r in lines
        if r["message"].startswith("connection ") and " accepted on PLAINTEXT" in r["message"]
    ]
    assert accepted and all(r["level"] == "DEBUG" for r in accepted)
    wait_for(
        broker,
        lambda r: r["message"].startswith("connection ") and " closed (" in r["message"],
        "of a closed connection",
    )


def test_classic_rebalance_is_logged_with_generation_members_and_partitions(broker: DebugBroker) -> None:
    create_topic(broker, "classic-t", 4)
    consumers = _join(broker, "classic-g", "classic-t", 2, **{"partition.assignment.strategy": "range"})
    try:
        _poll_until(consumers, lambda: all(len(c.assignment()) == 2 for c in consumers))
        assert [len(c.assignment()) for c in consumers] == [2, 2]
        line = wait_for(broker, lambda r: r["message"].startswith("group classic-g generation ")
                        and "2 member(s), partitions 2+2" in r["message"], "of classic-g's rebalance")  # fmt: skip
        assert line["level"] == "INFO" and "(consumer/range, leader " in line["message"]
    finally:
        for c in consumers:
            c.close()
    wait_for(broker, lambda r: r["message"].startswith("group classic-g generation ") and r["message"].endswith("is empty"),
             "of classic-g emptied")  # fmt: skip


def test_kip848_rebalance_is_logged_with_epoch_and_partitions(broker: DebugBroker) -> None:
    create_topic(broker, "new-t", 6)
    consumers = _join(broker, "new-g", "new-t", 2, **{"group.protocol": "consumer"})
    try:
        _poll_until(consumers, lambda: sorted(len(c.assignment()) for c in consumers) == [3, 3])
        assert sorted(len(c.assignment()) for c in consumers) == [3, 3]
        line = wait_for(broker, lambda r: r["message"].startswith("consumer group new-g assignment epoch ")
                        and r["message"].endswith("partitions 3+3"), "of new-g's balanced assignment")  # fmt: skip
        assert line["level"] == "INFO" and "2 member(s) with a new target" in line["message"]
    finally:
        for c in consumers:
            c.close()


def test_a_client_on_a_removed_version_is_refused_with_one_line(broker: DebugBroker) -> None:
    """Produce v2 (Kafka 4 removed it) is refused by closing the connection, as Kafka does; a client
    retrying it 30 times writes one line, not 30 (librdkafka 0.x on Kafka 4 wrote 762 in 26 s)."""
    host, port = broker.bootstrap.split(":")
    client_id = b"old-client"
    for correlation in range(30):
        header = struct.pack(">hhih", 0, 2, correlation, len(client_id)) + client_id
        frame = header + b"\xff\xff" + struct.pack(">hi", -1, 1000) + struct.pack(">i", 0)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(struct.pack(">i", len(frame)) + frame)
            assert s.recv(1) == b""  # closed without an answer
    wait_for(broker, lambda r: "Produce v2" in r["message"], "refusing Produce v2")
    time.sleep(0.5)
    refused = [r for r in records(broker) if "Produce v2" in r["message"]]
    assert len(refused) == 1, refused
    assert refused[0]["level"] == "WARNING" and "closing connection from" in refused[0]["message"]
