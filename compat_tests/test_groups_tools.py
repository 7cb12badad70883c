"""Kafka's `kafka-consumer-groups` tool against groups on `kcompat serve` (--list, --describe with
members, assignments and lag, --reset-offsets, --delete), and bad group requests over a real socket."""

from __future__ import annotations

import socket
import struct
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support import kafka_tool

from compat_tests.client_data import unique
from compat_tests.groups_members import Group, python_member
from kcompat.coordinator.consumer_protocol import encode_subscription
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.find_coordinator import FIND_COORDINATOR
from kcompat.wire.messages.heartbeat import HEARTBEAT
from kcompat.wire.messages.join_group import JOIN_GROUP
from kcompat.wire.messages.leave_group import LEAVE_GROUP
from kcompat.wire.messages.offset_commit import OFFSET_COMMIT
from kcompat.wire.messages.sync_group import SYNC_GROUP
from kcompat.wire.protocol import decode_response, encode_request
from kcompat.wire.schema import Api

pytestmark = pytest.mark.timeout(300)

BROKER = {"group.min.session.timeout.ms": "1000", "offsets.topic.num.partitions": "5",
          "group.consumer.heartbeat.interval.ms": "300",
          "group.consumer.min.heartbeat.interval.ms": "100"}  # below Kafka's 5 s bound, lowered as Kafka needs  # fmt: skip
CLASSIC = {"session.timeout.ms": "3000", "heartbeat.interval.ms": "300", "client.id": "tool-test"}


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, start: int = 0) -> set[str]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = set()
    for part in range(partitions):
        for i in range(start, start + per_partition):
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part)
            sent.add(f"{part}-{i}")
    assert p.flush(30) == 0
    return sent


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def table(out: str, first: str) -> list[dict[str, str]]:
    """The rows of a table the tool printed, as {column: value}, for the table whose header starts with `first`."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == first:
            header = cells
        elif header and len(cells) == len(header):
            rows.append(dict(zip(header, cells, strict=True)))
        elif header and not cells:
            header = None
    return rows


def groups_tool(bootstrap: str, *args: str) -> str:
    return kafka_tool("kafka-consumer-groups", "--bootstrap-server", bootstrap, *args).stdout


def test_describe_lag_reset_and_delete(kcompat_broker_factory: Any) -> None:
    broker = kcompat_broker_factory(BROKER)
    bs = broker.bootstrap
    topic, gid = unique("tool-topic"), unique("tool-group")
    create_topic(bs, topic, 6)
    expected = produce(bs, topic, 6, 10)
    g = Group(
        python_member("confluent", bs, topic, gid, {**CLASSIC, "partition.assignment.strategy": "range"}), 6
    )
    try:
        g.add()
        g.add()
        g.wait_balanced([3, 3])
        g.wait_consumed(expected)
        assert gid in groups_tool(bs, "--list").split()

        state = table(groups_tool(bs, "--describe", "--group", gid, "--state"), "GROUP")
        assert [(r["ASSIGNMENT-STRATEGY"], r["STATE"], r["#MEMBERS"]) for r in state] == [
            ("range", "Stable", "2")
        ]
        members = table(groups_tool(bs, "--describe", "--group", gid, "--members", "--verbose"), "GROUP")
        assert sorted(r["#PARTITIONS"] for r in members) == ["3", "3"]
        assert {r["HOST"] for r in members} == {"/127.0.0.1"} and {r["CLIENT-ID"] for r in members} == {
            "tool-test"
        }
        offsets = table(groups_tool(bs, "--describe", "--group", gid), "GROUP")
        assert sorted(int(r["PARTITION"]) for r in offsets) == list(range(6))
        assert {(r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in offsets} == {("10", "10", "0")}
        by_member: dict[str, set[int]] = {}
        for r in offsets:
            by_member.setdefault(r["CONSUMER-ID"], set()).add(int(r["PARTITION"]))
        assert sorted(map(sorted, by_member.values())) == [[0, 1, 2], [3, 4, 5]]  # range: 0-2 and 3-5

        for m in g.members:
            m.leave()
        produce(bs, topic, 6, 4, start=10)
        offsets = table(groups_tool(bs, "--describe", "--group", gid), "GROUP")
        assert {(r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"], r["CONSUMER-ID"]) for r in offsets} == {
            ("10", "14", "4", "-")
        }
        state = table(groups_tool(bs, "--describe", "--group", gid, "--state"), "GROUP")
        assert [(r["STATE"], r["#MEMBERS"]) for r in state] == [("Empty", "0")]

        # Reset: to offset 2 on partition 0, to the earliest elsewhere; a new member reads from there.
        plan = groups_tool(
            bs, "--reset-offsets", "--group", gid, "--topic", f"{topic}:0", "--to-offset", "2", "--execute"
        )
        assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in table(plan, "GROUP")] == [("0", "2")]
        groups_tool(
            bs,
            "--reset-offsets",
            "--group",
            gid,
            "--topic",
            f"{topic}:1,2,3,4,5",
            "--to-earliest",
            "--execute",
        )
        offsets = table(groups_tool(bs, "--describe", "--group", gid), "GROUP")
        assert {int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LAG"]) for r in offsets} == {
            0: ("2", "12"),
            **{p: ("0", "14") for p in range(1, 6)},
        }
        reader = g.add()
        g.wait("the new member to read from the reset offsets to the end",
               lambda: len(reader.records()) >= (14 - 2) + 5 * 14)  # fmt: skip
        first = {}
        for r in reader.records():
            first.setdefault(r["p"], r["o"])
        assert first == {0: 2, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0}
        assert len(reader.records()) == (14 - 2) + 5 * 14
        reader.leave()

        deleted = groups_tool(bs, "--delete", "--group", gid)
        assert "successful" in deleted
        assert gid not in groups_tool(bs, "--list").split()
        gone = kafka_tool(
            "kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", gid, check=False
        )
        # What Kafka 4.3.1's broker makes the tool print here (DescribeGroups v6 answers GROUP_ID_NOT_FOUND
        # for a group that is gone; checked against a real 4.3.1 broker): the error on stdout, exit 0.
        assert (gone.returncode, gone.stdout.strip()) == (
            0,
            "Error: Executing consumer group command failed due to "
            f"org.apache.kafka.common.errors.GroupIdNotFoundException: Group {gid} not found.",
        ), gone.stderr
    finally:
        g.stop()


def test_describe_a_consumer_protocol_group(kcompat_broker_factory: Any) -> None:
    broker = kcompat_broker_factory(BROKER)
    bs = broker.bootstrap
    topic, gid = unique("tool-848"), unique("tool-848-group")
    create_topic(bs, topic, 6)
    expected = produce(bs, topic, 6, 3)
    conf = {"group.protocol": "consumer", "group.remote.assignor": "uniform", "client.id": "tool-848"}
    g = Group(python_member("confluent", bs, topic, gid, conf), 6)
    try:
        for _ in range(3):
            g.add()
        g.wait_balanced([2, 2, 2])
        g.wait_consumed(expected)
        state = table(groups_tool(bs, "--describe", "--group", gid, "--state"), "GROUP")
        assert [(r["ASSIGNMENT-STRATEGY"], r["STATE"], r["#MEMBERS"]) for r in state] == [
            ("uniform", "Stable", "3")
        ]
        members = table(groups_tool(bs, "--describe", "--group", gid, "--members"), "GROUP")
        assert sorted(r["#PARTITIONS"] for r in members) == ["2", "2", "2"]
        offsets = table(groups_tool(bs, "--describe", "--group", gid), "GROUP")
        assert {(r["CURRENT-OFFSET"], r["LAG"]) for r in offsets} == {("3", "0")}
        assert len({r["CONSUMER-ID"] for r in offsets}) == 3
    finally:
        g.stop()


# --- bad input over a real connection ----------------------------------------------------------


class Wire:
    """Requests encoded by kcompat.wire, sent on one TCP connection, answers decoded."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=15)
        self.correlation = 0

    def call(self, api: Api, version: int, body: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(api.key, version, self.correlation, body, client_id="wire"))
        (size,) = struct.unpack(">i", self.sock.recv(4, socket.MSG_WAITALL))
        correlation, resp = decode_response(api.key, version, self.sock.recv(size, socket.MSG_WAITALL))
        assert correlation == self.correlation
        return resp


def test_bad_group_requests_get_kafkas_errors(
    kcompat_broker_factory: Any, request: pytest.FixtureRequest
) -> None:
    broker = kcompat_broker_factory(BROKER)
    create_topic(broker.bootstrap, "t", 2)
    w = Wire(broker.host, broker.port)
    request.addfinalizer(w.sock.close)  # the connection is the test's to close, not the garbage collector's
    assert w.call(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}).error_code == 0
    join = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": encode_subscription(["t"])}]}  # fmt: skip
    assert w.call(JOIN_GROUP, 5, {**join, "member_id": "who-is-this"}).error_code == E.UNKNOWN_MEMBER_ID
    mid = w.call(JOIN_GROUP, 5, {**join, "member_id": ""}).member_id
    joined = w.call(JOIN_GROUP, 5, {**join, "member_id": mid})
    gen = joined.generation_id
    assert (joined.error_code, joined.leader) == (0, mid)
    sync = {
        "group_id": "g",
        "generation_id": gen,
        "member_id": mid,
        "assignments": [{"member_id": mid, "assignment": b""}],
    }
    assert w.call(SYNC_GROUP, 3, sync).error_code == 0

    def heartbeat(member: str, generation: int) -> int:
        return int(
            w.call(
                HEARTBEAT, 3, {"group_id": "g", "generation_id": generation, "member_id": member}
            ).error_code
        )

    def commit(topic: str, member: str = "", generation: int = -1) -> int:
        body = {"group_id": "g", "generation_id_or_member_epoch": generation, "member_id": member,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 5}]}]}  # fmt: skip
        return int(w.call(OFFSET_COMMIT, 7, body).topics[0].partitions[0].error_code)

    assert heartbeat("who-is-this", gen) == E.UNKNOWN_MEMBER_ID
    assert heartbeat(mid, gen - 1) == E.ILLEGAL_GENERATION
    assert commit("does-not-exist", mid, gen) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert commit("t", mid, gen - 1) == E.ILLEGAL_GENERATION
    assert heartbeat(mid, gen) == 0  # all of that left the member in place
    assert commit("t", mid, gen) == 0
    left = w.call(LEAVE_GROUP, 3, {"group_id": "g", "members": [{"member_id": mid}]})
    assert (left.error_code, [m.error_code for m in left.members]) == (0, [0])
    assert heartbeat(mid, gen) == E.UNKNOWN_MEMBER_ID  # a heartbeat for a group it left
    assert commit("does-not-exist") == E.UNKNOWN_TOPIC_OR_PARTITION
    # The broker is fine, and so is the group: a real consumer uses it, starting at the commit.
    g = Group(python_member("confluent", broker.bootstrap, "t", "g", CLASSIC), 2)
    try:
        produce(broker.bootstrap, "t", 2, 6)
        reader = g.add()
        g.wait_balanced([2])
        g.wait(("records from offset 5 of partition 0"), lambda: any(r["p"] == 0 for r in reader.records()))
        assert min(r["o"] for r in reader.records() if r["p"] == 0) == 5
    finally:
        g.stop()
