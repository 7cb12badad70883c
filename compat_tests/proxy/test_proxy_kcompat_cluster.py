"""`kcompat proxy` in front of three kcompat brokers under a Kafka 4.3.1 controller (one cluster
and one proxy for the module): confluent-kafka, kafka-python and Kafka's Java CLI tools produce,
consume in groups, run a transaction and administer through it; leadership moves while a producer
writes, so the KIP-951 NodeEndpoints path is taken; every answer the proxy sent is decoded and
none names an upstream address. Bad input (an unknown API key, a frame over the size limit, an
upstream that is down) closes that client's connection only, with one log line.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from support import kafka_tool

from compat_tests.client_data import unique
from compat_tests.cluster.test_group_coordinator import Cluster
from compat_tests.crash.wire_client import fetch_body, produce_body
from compat_tests.proxy.checks import (
    Ledger,
    assert_no_upstream_address,
    closed_after,
    confluent_consume,
    confluent_produce,
    kafka_python_roundtrip,
    metadata_brokers,
    raw_frames,
    transaction_roundtrip,
)
from compat_tests.proxy.harness import HOST, ProxyThread
from kcompat.testing import wait_until
from kcompat.testing_cluster import ControllerQuorum
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.timeout(240)

BROKER_IDS = (1, 2, 3)


@pytest.fixture(scope="module")
def cluster(kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(kraft_quorum, tmp_path_factory.mktemp("proxy-upstream"))
    with c.running(BROKER_IDS):
        yield c


@pytest.fixture(scope="module")
def proxy(cluster: Cluster) -> Iterator[ProxyThread]:
    with ProxyThread(cluster.bootstrap) as p:
        yield p


def upstream_ports(cluster: Cluster) -> set[int]:
    return {b.port for b in cluster.brokers.values()}


def topic_led_by_each(cluster: Cluster, prefix: str) -> str:
    """Three partitions, RF=3, partition p led by broker p+1."""
    topic = unique(prefix)
    ids = list(BROKER_IDS)
    cluster.create_topic(
        topic, 3, 3, {"min.insync.replicas": "2"}, assignments=[ids[p:] + ids[:p] for p in range(3)]
    )
    assert cluster.leaders(topic, 3) == {0: 1, 1: 2, 2: 3}
    return topic


def test_metadata_names_the_proxy_endpoints(cluster: Cluster, proxy: ProxyThread) -> None:
    expected = {(n, HOST, proxy.node_port(n)) for n in BROKER_IDS}
    assert metadata_brokers(proxy.bootstrap_port) == expected
    for n in BROKER_IDS:  # each node's listener reaches a broker that knows the same brokers
        assert metadata_brokers(proxy.node_port(n)) == expected
    assert_no_upstream_address(proxy, upstream_ports(cluster))


def test_confluent_and_kafka_python_produce_and_consume_in_groups(
    cluster: Cluster, proxy: ProxyThread
) -> None:
    topic = topic_led_by_each(cluster, "proxy-clients")
    values = [f"c-{i}" for i in range(30)]
    confluent_produce(proxy.bootstrap, topic, values)
    got = confluent_consume(proxy.bootstrap, topic, unique("g-confluent"), len(values))
    assert sorted(got) == sorted(values)
    more = [f"kp-{i}" for i in range(20)]
    got = kafka_python_roundtrip(proxy.bootstrap, topic, more, unique("g-kafka-python"), 50)
    assert sorted(got) == sorted(values + more)
    assert_no_upstream_address(proxy, upstream_ports(cluster))
    assert proxy.capture.by_api[10] > 0  # FindCoordinator answers were rewritten and checked


def test_transaction_through_the_proxy(cluster: Cluster, proxy: ProxyThread) -> None:
    topic = topic_led_by_each(cluster, "proxy-txn")
    got = transaction_roundtrip(proxy.bootstrap, topic, unique("txn"))
    assert sorted(got) == sorted(f"committed-{i}" for i in range(10))
    assert_no_upstream_address(proxy, upstream_ports(cluster))


def test_java_tools_through_the_proxy(cluster: Cluster, proxy: ProxyThread) -> None:
    bs = proxy.bootstrap
    topic = unique("proxy-java")
    kafka_tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic,
               "--partitions", "3", "--replication-factor", "3")  # fmt: skip
    described = kafka_tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", topic).stdout
    assert described.count("Leader:") == 3, described
    lines = [f"java-{i}" for i in range(12)]
    kafka_tool(
        "kafka-console-producer", "--bootstrap-server", bs, "--topic", topic, input="\n".join(lines) + "\n"
    )
    group = unique("g-java")
    out = kafka_tool("kafka-console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group", group,
                     "--from-beginning", "--max-messages", str(len(lines)), "--timeout-ms", "60000").stdout  # fmt: skip
    assert sorted(out.split()) == sorted(lines)
    groups = kafka_tool(
        "kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", group
    ).stdout
    assert topic in groups, groups
    assert_no_upstream_address(proxy, upstream_ports(cluster))


def test_leadership_moves_take_the_kip951_path(cluster: Cluster, proxy: ProxyThread) -> None:
    """Broker 1 dies (its partition's leadership moves), comes back, and a preferred election
    through the proxy hands leadership back while the producer writes: the producer's next
    Produce reaches the former leader, whose NOT_LEADER_OR_FOLLOWER answer carries the new
    leader's NodeEndpoints, rewritten. Every acknowledged record is read back once."""
    topic = topic_led_by_each(cluster, "proxy-moves")
    before = sum(proxy.capture.node_endpoint_answers.values())
    ledger = Ledger(proxy.bootstrap, topic)
    try:
        ledger.wait_acked(100)
        # SIGKILL: a clean stop under a busy producer once took over 20 s (the broker's own shutdown)
        cluster.brokers[1].kill()
        wait_until(lambda: cluster.partitions(topic)[0][0] != 1, "partition 0 led elsewhere", timeout=60)
        interim = cluster.partitions(topic)[0][0]
        ledger.wait_acked(100)
        cluster.brokers[1].start()  # on its formatted data, as a restart
        wait_until(lambda: 1 in cluster.partitions(topic)[0][3], "broker 1 back in the ISR", timeout=60)
        out = kafka_tool("kafka-leader-election", "--bootstrap-server", proxy.bootstrap, "--election-type",
                         "preferred", "--topic", topic, "--partition", "0").stdout  # fmt: skip
        assert "Successfully completed leader election" in out, out
        wait_until(lambda: cluster.partitions(topic)[0][0] == 1, "broker 1 leading again", timeout=60)
        ledger.wait_acked(200)
    finally:
        ledger.stop()
    assert not ledger.errors, ledger.errors[:5]
    got = confluent_consume(proxy.bootstrap, topic, unique("g-moves"), len(ledger.acked))
    assert sorted(got) == sorted(ledger.acked)  # nothing acknowledged lost, nothing twice
    # The former leader, asked through its proxy endpoint, names the new one by its proxy endpoint
    # (whether the producer above met that answer depends on timing; this request always does).
    (answer,) = raw_frames(
        proxy.node_port(interim), [encode_request(0, 11, 9, produce_body(topic, b"late", -1))], 1
    )
    _, body = decode_response(0, 11, answer)
    partition = body.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition.current_leader.leader_id == 1
    assert [(e.node_id, e.host, e.port) for e in body.node_endpoints] == [(1, HOST, proxy.node_port(1))]
    assert sum(proxy.capture.node_endpoint_answers.values()) > before
    assert_no_upstream_address(proxy, upstream_ports(cluster))


def test_pipelined_requests_answered_in_order(proxy: ProxyThread) -> None:
    """ApiVersions, Metadata, an acks=0 Produce (no answer), an ApiVersions newer than the proxy
    (answered by the proxy, in its turn) and Metadata again, written at once."""
    topic = unique("proxy-pipeline")
    body = {"transactional_id": None, "acks": 0, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": []}]}  # fmt: skip
    hello = {"client_software_name": "t", "client_software_version": "1"}
    newer = encode_request(18, 3, 4, hello)
    frames = [
        encode_request(18, 3, 1, hello),
        encode_request(3, 12, 2, {"topics": None}),
        encode_request(0, 9, 3, body),
        newer[:6] + struct.pack(">h", 99) + newer[8:],  # ApiVersions v99
        encode_request(3, 12, 5, {"topics": None}),
    ]
    answers = raw_frames(proxy.bootstrap_port, frames, 4)
    assert [struct.unpack(">i", a[:4])[0] for a in answers] == [1, 2, 4, 5]
    _, refused = decode_response(18, 0, answers[2])
    assert refused.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_bad_input_closes_that_client_only(
    cluster: Cluster, proxy: ProxyThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kcompat.proxy")
    unknown = struct.pack(">hhih", 999, 0, 77, -1)
    assert closed_after(
        proxy.bootstrap_port, struct.pack(">i", len(unknown)) + unknown
    )  # the upstream closes it
    assert closed_after(proxy.bootstrap_port, struct.pack(">i", 200 << 20) + b"\0" * 16)
    size_lines = [r for r in caplog.records if "socket.request.max.bytes" in r.getMessage()]
    assert len(size_lines) == 1, [r.getMessage() for r in caplog.records]
    assert "Traceback" not in caplog.text
    # everyone else is still served
    assert {n for n, _, _ in metadata_brokers(proxy.bootstrap_port)} == set(BROKER_IDS)


def test_upstream_down_closes_the_client_with_one_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kcompat.proxy")
    with ProxyThread(f"{HOST}:1") as down:  # port 1: nothing listens
        frame = encode_request(18, 3, 1, {"client_software_name": "t", "client_software_version": "1"})
        started = time.monotonic()
        for _ in range(3):
            assert closed_after(down.bootstrap_port, frame)
        assert time.monotonic() - started < 10
    lines = [r.getMessage() for r in caplog.records if "cannot reach the upstream" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "proxy.upstream.bootstrap.servers" in lines[0]


def test_a_slow_client_makes_the_proxy_stop_reading_upstream(cluster: Cluster, proxy: ProxyThread) -> None:
    """40 pipelined 1 MiB Fetches from a client that reads nothing: the proxy holds at most about
    proxy.buffer.bytes for it and stops reading the upstream; once the client reads, every answer
    arrives, in order."""
    topic = topic_led_by_each(cluster, "proxy-slow")
    confluent_produce(
        proxy.bootstrap, topic, ["x" * 10_000 + str(i) for i in range(400)], partitioner="murmur2"
    )
    requests = [encode_request(1, 11, c, fetch_body(topic, 0)) for c in range(40)]
    limit = proxy.config.get("proxy.buffer.bytes")

    async def held() -> list[tuple[int, bool]]:
        assert proxy.server is not None
        return [(c.transport.get_write_buffer_size(), c.upstream.transport.is_reading())  # type: ignore[union-attr]
                for c in proxy.server.shared.connections if c.node_id == 1 and c.upstream is not None]  # fmt: skip

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        s.settimeout(30)
        s.connect((HOST, proxy.node_port(1)))
        s.sendall(b"".join(requests))
        # Until the answers fill the proxy's buffer (a fixed 3 s counted on three brokers answering
        # 40 MiB in time, which loaded ones need not), then a second more: still paused, bounded.
        wait_until(
            lambda: any(not reading for _, reading in proxy.call(held())), "the upstream paused", timeout=60
        )
        time.sleep(1)
        states = proxy.call(held())
        assert any(not reading for _, reading in states), states  # the upstream is paused
        assert all(size <= limit + (2 << 20) for size, _ in states), (states, limit)
        correlations = []
        for _ in requests:
            size = struct.unpack(">i", _read(s, 4))[0]
            correlations.append(struct.unpack(">i", _read(s, size)[:4])[0])
    assert correlations == list(range(40))


def _read(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        assert chunk, "closed"
        buf += chunk
    return bytes(buf)
