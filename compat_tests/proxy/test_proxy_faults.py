"""Fault rules and traffic captures on `kcompat proxy` (issue 27): the proxy's own /faults and
/captures (proxy.admin.listener), the same rules and capture specs as on `kcompat serve`, seen by
real confluent-kafka clients through the proxy. One `kcompat serve` and one proxy for the module;
each test clears what it set.
"""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from support import kafka_tool

from compat_tests.crash.wire_client import produce_body
from compat_tests.proxy.checks import closed_after, raw_frames
from compat_tests.proxy.harness import HOST, ProxyThread, free_port_base
from kcompat.capture_client import Captures
from kcompat.fault_client import Faults
from kcompat.testing import TEST_DEFAULTS, Broker, free_port, wait_until
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("proxy-faults-upstream")
    b = Broker(base / "data", base / "kcompat.log", overrides=dict(TEST_DEFAULTS))
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def proxy(broker: Broker) -> Iterator[ProxyThread]:
    with ProxyThread(broker.bootstrap, **{"proxy.admin.listener": f"{HOST}:0"}) as p:
        yield p


@pytest.fixture
def faults(proxy: ProxyThread) -> Iterator[Faults]:
    assert proxy.admin_url is not None
    f = Faults(proxy.admin_url)
    f.clear()
    yield f
    f.clear()


@pytest.fixture
def captures(proxy: ProxyThread) -> Iterator[Captures]:
    assert proxy.admin_url is not None
    c = Captures(proxy.admin_url)
    c.clear()
    yield c
    c.clear()


def topic_name() -> str:
    return f"pf-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, n: int, **conf: Any) -> list[tuple[int, str]]:
    """(offset, value) of each acknowledged record, one flush per record (one Produce each)."""
    acked: list[tuple[int, str]] = []
    errors: list[Any] = []

    def done(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.offset(), msg.value().decode()))

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **conf})
    for i in range(n):
        p.produce(topic, value=f"v{i}", partition=0, on_delivery=done)
        p.flush(30)
    assert p.flush(30) == 0
    assert errors == []
    return acked


def consume(bootstrap: str, topic: str, n: int) -> list[tuple[int, str]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, str]] = []
    deadline = time.monotonic() + 30
    while len(got) < n + 1 and time.monotonic() < deadline:  # one more: a duplicate would show
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value().decode()))
        elif got and len(got) == n and m is None:
            break
    c.close()
    return got


def test_without_an_admin_listener_the_proxy_has_no_hooks(broker: Broker) -> None:
    with ProxyThread(broker.bootstrap) as plain:
        assert plain.admin is None and plain.server is not None
        assert plain.server.shared.request_hook is None


def test_confluent_retries_an_injected_not_leader_without_loss(
    broker: Broker, proxy: ProxyThread, faults: Faults
) -> None:
    topic = topic_name()
    rule = faults.add(
        "error", api="Produce", topic=topic, error="NOT_LEADER_OR_FOLLOWER", trigger={"times": 3}
    )
    before = proxy.capture.by_api[0]
    acked = produce(proxy.bootstrap, topic, 20, **{"enable.idempotence": True})
    assert faults.fired(rule) == 3
    assert proxy.capture.by_api[0] - before == 23  # each record's answer, and the 3 errors before
    expected = [(i, f"v{i}") for i in range(20)]
    assert sorted(acked) == expected
    assert consume(broker.bootstrap, topic, 20) == expected  # the upstream itself: nothing lost or doubled


def test_an_injected_invalid_txn_state_on_end_txn_reaches_the_producer(
    proxy: ProxyThread, faults: Faults
) -> None:
    topic, txn = topic_name(), f"tx-{uuid.uuid4().hex[:6]}"
    rule = faults.add("error", api="EndTxn", transactional_id=txn, error="INVALID_TXN_STATE", trigger="once")
    p = Producer({"bootstrap.servers": proxy.bootstrap, "transactional.id": txn, "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"in-txn", partition=0)
    p.flush(30)
    with pytest.raises(KafkaException) as raised:
        p.commit_transaction(30)
    error: KafkaError = raised.value.args[0]
    assert error.code() == KafkaError.INVALID_TXN_STATE, error
    assert faults.fired(rule) == 1


def test_a_capture_on_the_proxy_lists_exactly_what_went_through_it(
    broker: Broker, proxy: ProxyThread, captures: Captures
) -> None:
    topic = topic_name()
    cid = captures.start(topic=topic)
    through = produce(proxy.bootstrap, topic, 12, **{"client.id": "via-proxy"})
    around = produce(broker.bootstrap, topic, 3, **{"client.id": "direct"})  # not through the proxy
    produced = captures.produced(cid)
    assert sorted((r["offset"], r["value"]) for r in produced) == sorted(through)
    assert {r["client_id"] for r in produced} == {"via-proxy"}
    assert len(around) == 3 and not set(around) & {(r["offset"], r["value"]) for r in produced}


def test_the_proxy_answers_an_error_itself_and_in_turn(proxy: ProxyThread, faults: Faults) -> None:
    """A faulted Produce never reaches the upstream, and its answer waits behind the relayed
    answers before it: four pipelined requests get their answers in request order."""
    topic = topic_name()
    assert produce(proxy.bootstrap, topic, 1) == [(0, "v0")]
    rule = faults.add("error", api="Produce", topic=topic, error="NOT_LEADER_OR_FOLLOWER", trigger="once")
    frames = [
        encode_request(3, 12, 1, {"topics": None}),
        encode_request(0, 9, 2, produce_body(topic, b"faulted")),
        encode_request(0, 9, 3, produce_body(topic, b"relayed")),
        encode_request(3, 12, 4, {"topics": None}),
    ]
    answers = raw_frames(proxy.node_port(1), frames, 4)
    assert [struct.unpack_from(">i", a)[0] for a in answers] == [1, 2, 3, 4]
    faulted = decode_response(0, 9, answers[1])[1].responses[0].partition_responses[0]
    relayed = decode_response(0, 9, answers[2])[1].responses[0].partition_responses[0]
    assert faulted.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert f"rule {rule}" in (faulted.error_message or "")
    assert (relayed.error_code, relayed.base_offset) == (0, 1)  # offset 1: "faulted" never went on
    assert faults.fired(rule) == 1


def test_the_kcompat_proxy_command_serves_faults(broker: Broker, tmp_path: Path) -> None:
    """`kcompat proxy --admin`: rules set over its HTTP API act on the traffic through it."""
    port, admin = free_port(), free_port()
    log = (tmp_path / "proxy.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "kcompat", "proxy", "--upstream", broker.bootstrap,
         "--bootstrap", f"{HOST}:{port}", "--node-port-base", str(free_port_base()),
         "--admin", f"{HOST}:{admin}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        faults = Faults(f"http://{HOST}:{admin}")
        wait_until(lambda: _lists(faults), "the proxy's admin listener", timeout=20)
        rule = faults.add("drop", api="ApiVersions", trigger="once")
        versions = encode_request(18, 3, 1, {"client_software_name": "t", "client_software_version": "1"})
        assert closed_after(port, versions)
        assert faults.fired(rule) == 1
        assert len(raw_frames(port, [versions], 1)) == 1  # once: the next one is answered
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
        log.close()
    text = (tmp_path / "proxy.log").read_text()
    assert f"http://{HOST}:{admin}/faults" in text and "Traceback" not in text, text


def _lists(faults: Faults) -> bool:
    try:
        return faults.list() == []
    except OSError:
        return False


# -- the faults that make the proxy wait: delay, blackhole, throttle, partition ------------------


def _metadata(correlation: int) -> bytes:
    return encode_request(3, 12, correlation, {"topics": None})


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_delay_holds_the_answer_and_the_ones_behind_it(
    proxy: ProxyThread, faults: Faults, when: str
) -> None:
    topic = topic_name()
    rule = faults.add("delay", api="Produce", topic=topic, delay_ms=600, when=when, trigger="once")
    frames = [_metadata(1), encode_request(0, 9, 2, produce_body(topic, b"held")), _metadata(3)]
    started = time.monotonic()
    answers = raw_frames(proxy.node_port(1), frames, 3)
    took = time.monotonic() - started
    assert [struct.unpack_from(">i", a)[0] for a in answers] == [1, 2, 3]
    assert took >= 0.6, took
    held = decode_response(0, 9, answers[1])[1].responses[0].partition_responses[0]
    assert held.error_code == 0
    assert faults.fired(rule) == 1


def test_a_blackhole_swallows_the_request_and_keeps_the_connection(
    broker: Broker, proxy: ProxyThread, faults: Faults
) -> None:
    topic = topic_name()
    assert produce(proxy.bootstrap, topic, 1) == [(0, "v0")]
    rule = faults.add("blackhole", api="Produce", topic=topic, trigger="once")
    with socket.create_connection((HOST, proxy.node_port(1)), timeout=1.5) as s:
        s.sendall(encode_request(0, 9, 1, produce_body(topic, b"swallowed")) + _metadata(2))
        with pytest.raises(TimeoutError):  # no answer, the Metadata one waits behind it; not closed
            s.recv(1)
    assert faults.fired(rule) == 1
    assert consume(broker.bootstrap, topic, 1) == [(0, "v0")]  # before: it never reached the upstream


@pytest.mark.parametrize("when", ["before", "after"])
def test_confluent_recovers_from_a_blackholed_produce_without_loss(
    broker: Broker, proxy: ProxyThread, faults: Faults, when: str
) -> None:
    """Before: the request never goes on; after: it is written and its answer lost. Either way
    the producer times out, reconnects and retries; idempotence keeps each record once."""
    topic = topic_name()
    rule = faults.add("blackhole", api="Produce", topic=topic, when=when, trigger={"nth": 3})
    started = time.monotonic()
    acked = produce(proxy.bootstrap, topic, 8, **{"enable.idempotence": True, "socket.timeout.ms": 2000})
    assert time.monotonic() - started >= 2.0  # one request timed out
    assert faults.fired(rule) == 1
    expected = [(i, f"v{i}") for i in range(8)]
    assert sorted(acked) == expected
    assert consume(broker.bootstrap, topic, 8) == expected


def test_a_throttle_paces_fetch_answers_and_loses_nothing(
    broker: Broker, proxy: ProxyThread, faults: Faults
) -> None:
    topic = topic_name()
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(60):
        p.produce(topic, value=f"{i:04d}".ljust(2000, "x"), partition=0)
    assert p.flush(30) == 0
    rule = faults.add("throttle", api="Fetch", bytes_per_second=40_000)
    started = time.monotonic()
    got = consume(proxy.bootstrap, topic, 60)
    took = time.monotonic() - started
    assert [offset for offset, _ in got] == list(range(60))
    assert took >= 2.5, took  # 60 x 2 KB at 40 KB/s: 3 s
    assert faults.fired(rule) >= 1


def test_a_partition_cuts_the_node_off_until_cleared(
    broker: Broker, proxy: ProxyThread, faults: Faults
) -> None:
    topic = topic_name()
    rule = faults.add("partition", broker=1, peer=HOST)
    assert closed_after(proxy.node_port(1), _metadata(1))  # refused: closed before any answer
    assert len(raw_frames(proxy.bootstrap_port, [_metadata(1)], 1)) == 1  # the bootstrap still serves
    acked: list[int] = []
    p = Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 0, "enable.idempotence": True,
                  "message.timeout.ms": 60000})  # fmt: skip
    for i in range(10):
        p.produce(topic, value=f"v{i}", partition=0, on_delivery=lambda e, m: acked.append(m.offset()))
    p.flush(3)
    assert acked == []  # node 1 is cut off: nothing can be written
    fired = faults.fired(rule)
    assert fired >= 2
    faults.clear()
    assert p.flush(30) == 0
    assert sorted(acked) == list(range(10))
    assert consume(broker.bootstrap, topic, 10) == [(i, f"v{i}") for i in range(10)]


def test_java_clients_recover_from_blackhole_and_delay(
    broker: Broker, proxy: ProxyThread, faults: Faults
) -> None:
    """Java 4.3.1's console producer loses a Produce answer (served upstream, never sent on) and
    retries; its console consumer reads through delayed Fetch answers: every line once."""
    topic = topic_name()
    # Java's Produce v13 names the topic by id, which the proxy cannot resolve: match the client
    lost = faults.add("blackhole", api="Produce", client_id=topic, when="after", trigger="once")
    slow = faults.add("delay", api="Fetch", delay_ms=100, when="after")
    lines = [f"java-{i}" for i in range(20)]
    kafka_tool("kafka-console-producer", "--bootstrap-server", proxy.bootstrap, "--topic", topic,
               "--command-property", "request.timeout.ms=3000", "--command-property", f"client.id={topic}",
               input="\n".join(lines) + "\n")  # fmt: skip
    assert faults.fired(lost) == 1
    out = kafka_tool("kafka-console-consumer", "--bootstrap-server", proxy.bootstrap, "--topic", topic,
                     "--group", f"g-{topic}", "--from-beginning", "--max-messages", "20",
                     "--timeout-ms", "60000").stdout  # fmt: skip
    assert sorted(out.split()) == sorted(lines)
    assert faults.fired(slow) >= 1
    assert sorted(v for _, v in consume(broker.bootstrap, topic, 20)) == sorted(lines)  # once each
