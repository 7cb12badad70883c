"""Limits that hold under attack, against a real `kcompat serve`, with its RSS sampled from /proc.

* size prefixes: one above socket.request.max.bytes is refused before anything is allocated; one
  within it but followed by silence costs memory for the bytes that arrived, not for the size
  claimed (50 connections claiming 100 MiB each used to cost 5 GiB); a real large request works;
* a client sending a frame one byte a second is dropped after connections.max.idle.ms;
* thousands of idle connections (KCOMPAT_IDLE_CONNECTIONS, default 2000) do not slow a
  well-behaved client down (a generous bound relative to its own baseline), and cost little memory
  each (a connection holds its 64 KiB read buffer only while it is active);
* a Fetch of every partition with the maximum sizes gets at most fetch.max.bytes;
* a client that pipelines requests without reading their responses is held by backpressure: the
  broker's memory stays bounded, and every response then arrives, in order.
"""

from __future__ import annotations

import os
import resource
import socket
import statistics
import struct
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support import ReportFigure

from compat_tests.crash.proc import RssSampler, mib, open_fds, rss_bytes
from compat_tests.crash.wire_client import (
    FETCH,
    METADATA,
    PRODUCE,
    ZERO_UUID,
    WireClient,
    fetch_body,
    produce_body,
    read_frame,
)
from kcompat.testing import Broker, BrokerFactory, api_versions_ready
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.timeout(180)
IDLE_CONNECTIONS = int(os.environ.get("KCOMPAT_IDLE_CONNECTIONS", "2000"))


def pid_of(broker: Broker) -> int:
    assert broker.process is not None
    return broker.process.pid


def closed_within(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def metadata(client: WireClient, topic: str) -> Any:
    return client.call(METADATA, 12, {"topics": [{"topic_id": ZERO_UUID, "name": topic}],
                                      "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})  # fmt: skip


# --- size prefixes ---------------------------------------------------------------------------------


def test_size_prefixes_cost_only_what_arrives(
    kcompat_broker_factory: BrokerFactory, report_figure: ReportFigure
) -> None:
    broker = kcompat_broker_factory({"message.max.bytes": 8 << 20})
    pid = pid_of(broker)
    base = rss_bytes(pid)
    limit = 104857600  # socket.request.max.bytes
    with RssSampler(pid) as rss:
        # above the limit: refused at the prefix, 200 times over
        for size in [limit + 1, 2**31 - 1] * 100:
            with socket.create_connection((broker.host, broker.port), timeout=5) as s:
                s.sendall(struct.pack(">i", size) + b"\0" * 100)
                assert closed_within(s, 5)
        # within the limit, then silence: held open, but at the price of what was sent
        silent = []
        for i in range(50):
            s = socket.create_connection((broker.host, broker.port), timeout=5)
            s.sendall(struct.pack(">i", limit) + struct.pack(">hhih", 0, 9, i, 1) + b"x" + os.urandom(1000))
            silent.append(s)
        time.sleep(1)
        held = rss.sample()
        for s in silent:
            s.close()
    assert rss.peak - base < 24 << 20, (
        f"RSS {mib(base)} -> peak {mib(rss.peak)}: a claimed size was allocated"
    )
    assert held - base < 24 << 20
    # a real large request (a 6 MiB batch) still goes through, in many reads
    c = WireClient(broker.host, broker.port)
    resp = c.call(PRODUCE, 9, produce_body("large", os.urandom(6 << 20)))
    assert resp.responses[0].partition_responses[0].error_code == 0
    got = c.call(FETCH, 12, fetch_body("large", 0, max_bytes=16 << 20))
    assert len(got.responses[0].partitions[0].records) > 6 << 20
    c.close()
    report_figure("limits: size prefixes", f"RSS {mib(base)} -> peak {mib(rss.peak)}")


# --- slow client -----------------------------------------------------------------------------------


def test_one_byte_a_second_is_dropped_after_the_idle_limit(kcompat_broker_factory: BrokerFactory) -> None:
    broker = kcompat_broker_factory(connections_max_idle_ms=2000)
    frame = encode_request(3, 12, 7, {"topics": None, "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})  # fmt: skip
    with socket.create_connection((broker.host, broker.port), timeout=5) as s:
        port = s.getsockname()[1]
        started = time.monotonic()
        sent = 0
        dropped = False
        try:
            for b in frame:
                s.sendall(bytes([b]))
                sent += 1
                time.sleep(1)
                if time.monotonic() - started > 12:
                    break
        except (BrokenPipeError, ConnectionResetError):
            dropped = True
        dropped = dropped or closed_within(s, 1)
        elapsed = time.monotonic() - started
    assert dropped, f"still connected after {elapsed:.0f} s of one byte a second"
    assert sent < len(frame), "the whole frame got through before the limit"
    assert 1.5 < elapsed < 8, f"dropped after {elapsed:.1f} s, idle limit 2 s"
    lines = [line for line in broker.logs().splitlines() if f":{port}" in line]
    assert len(lines) == 1 and "connections.max.idle.ms" in lines[0], lines
    assert api_versions_ready(broker.host, broker.port)


# --- idle connections ------------------------------------------------------------------------------


def round_trips(broker: Broker, topic: str, n: int) -> list[float]:
    c = WireClient(broker.host, broker.port)
    times = []
    try:
        for _ in range(n):
            t = time.monotonic()
            metadata(c, topic)
            p = c.call(PRODUCE, 9, produce_body(topic, b"v" * 200))
            assert p.responses[0].partition_responses[0].error_code == 0
            f = c.call(FETCH, 12, fetch_body(topic, 0, max_bytes=64 << 10))
            assert f.responses[0].partitions[0].error_code == 0
            times.append(time.monotonic() - t)
    finally:
        c.close()
    return times


def test_thousands_of_idle_connections_do_not_slow_the_others(
    kcompat_broker_factory: BrokerFactory, report_figure: ReportFigure
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = IDLE_CONNECTIONS + 500
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))  # the broker inherits it
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= want, (
        f"need {want} descriptors, hard limit {hard}"
    )
    broker = kcompat_broker_factory()
    pid = pid_of(broker)
    round_trips(broker, "idle", 50)  # warm up
    before = round_trips(broker, "idle", 300)
    base = rss_bytes(pid)
    idle: list[socket.socket] = []
    try:
        with RssSampler(pid) as rss:
            for i in range(IDLE_CONNECTIONS):
                s = socket.create_connection((broker.host, broker.port), timeout=10)
                if i % 2:  # half have spoken once (a negotiated client going quiet), half never
                    s.sendall(encode_request(18, 0, i, {}))
                idle.append(s)
            deadline = time.monotonic() + 30
            while open_fds(pid) < IDLE_CONNECTIONS and time.monotonic() < deadline:
                time.sleep(0.1)
            held = open_fds(pid)
            during = round_trips(broker, "idle", 300)
    finally:
        for s in idle:
            s.close()
    assert held >= IDLE_CONNECTIONS, f"the broker holds only {held} descriptors"
    slow_before, slow_during = statistics.median(before), statistics.median(during)
    p95_before = sorted(before)[int(len(before) * 0.95)]
    p95_during = sorted(during)[int(len(during) * 0.95)]
    assert slow_during < 3 * slow_before + 0.005, (
        f"median round trip {slow_before * 1e3:.1f} -> {slow_during * 1e3:.1f} ms"
    )
    assert p95_during < 5 * p95_before + 0.02, (
        f"p95 round trip {p95_before * 1e3:.1f} -> {p95_during * 1e3:.1f} ms"
    )
    assert broker.running
    per_connection = (rss.peak - base) / IDLE_CONNECTIONS
    assert per_connection < 32 << 10, f"{per_connection / 1024:.0f} KiB of RSS per idle connection"
    report_figure(
        "limits: idle connections",
        (
            f"{IDLE_CONNECTIONS} held (broker fds {held}); round trip median {slow_before * 1e3:.2f} -> "
            f"{slow_during * 1e3:.2f} ms, p95 {p95_before * 1e3:.2f} -> {p95_during * 1e3:.2f} ms; "
            f"RSS {mib(base)} -> peak {mib(rss.peak)}"
        ),
    )


# --- fetch.max.bytes -------------------------------------------------------------------------------


def test_fetch_of_every_partition_at_maximum_sizes_is_capped(
    kcompat_broker_factory: BrokerFactory, report_figure: ReportFigure
) -> None:
    cap = 1 << 20
    broker = kcompat_broker_factory({"fetch.max.bytes": cap})
    partitions = 24
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("wide", partitions, 1)])["wide"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 64 << 10})
    for i in range(partitions * 40):
        p.produce("wide", value=os.urandom(10_000), partition=i % partitions)
    assert p.flush(30) == 0  # about 400 KB a partition, 9.6 MB in all
    body = fetch_body("wide", 0, max_bytes=2**31 - 1)
    part = body["topics"][0]["partitions"][0]
    body["topics"][0]["partitions"] = [
        dict(part, partition=i, partition_max_bytes=2**31 - 1) for i in range(partitions)
    ]
    pid = pid_of(broker)
    with RssSampler(pid) as rss:
        c = WireClient(broker.host, broker.port)
        resp = c.call(FETCH, 12, body)
        c.close()
    sizes = [len(pp.records or b"") for pp in resp.responses[0].partitions]
    largest_batch = 64 << 10 + 1024
    assert 0 < sum(sizes) <= cap + largest_batch, f"{sum(sizes)} bytes returned, fetch.max.bytes {cap}"
    assert sum(1 for s in sizes if s) < partitions, "every partition answered in full: no cap applied"
    assert rss.peak - rss.first < 32 << 20
    report_figure(
        "limits: fetch cap",
        f"{sum(sizes)} bytes for a fetch of {partitions} x 400 KB (fetch.max.bytes {cap})",
    )


# --- request flood ---------------------------------------------------------------------------------


def test_pipelined_flood_without_reading_is_held_by_backpressure(
    kcompat_broker_factory: BrokerFactory, report_figure: ReportFigure
) -> None:
    """100 fetches whose answers are 1.8 MB each, then 200 produce requests of 200 KB, pipelined on
    one connection by a client that reads nothing: were the broker to keep reading and answering,
    it would hold 180 MB of answers and take all 40 MB of produce requests. Backpressure stops it
    reading once its unsent answers pass the high-water mark."""
    broker = kcompat_broker_factory({"message.max.bytes": 2 << 20})
    c = WireClient(broker.host, broker.port)
    for _ in range(2):
        assert (
            c.call(PRODUCE, 9, produce_body("flood", os.urandom(900_000)))
            .responses[0]
            .partition_responses[0]
            .error_code
            == 0
        )
    c.close()
    pid = pid_of(broker)
    base = rss_bytes(pid)
    fetches, produces = 100, 200
    frames = [
        (FETCH, encode_request(FETCH, 12, i, fetch_body("flood", 0, max_bytes=4 << 20)))
        for i in range(fetches)
    ]
    payload = os.urandom(200_000)
    frames += [
        (PRODUCE, encode_request(PRODUCE, 9, fetches + i, produce_body("flood-in", payload)))
        for i in range(produces)
    ]
    s = socket.create_connection((broker.host, broker.port), timeout=60)
    sent = [0]

    def flood() -> None:
        for _, f in frames:
            s.sendall(f)
            sent[0] += 1

    with RssSampler(pid) as rss:
        sender = threading.Thread(target=flood, daemon=True)
        sender.start()
        time.sleep(5)  # the client reads nothing meanwhile
        stalled_at = sent[0]
        assert stalled_at < len(frames), "every request was taken while no response was read: no backpressure"
        assert broker.running and api_versions_ready(broker.host, broker.port)
        flooded = rss.sample()
        for i, (key, _) in enumerate(frames):  # now read: every response, in order
            correlation, body = decode_response(key, 12 if key == FETCH else 9, read_frame(s))
            assert correlation == i
            if key == FETCH:
                assert body.responses[0].partitions[0].error_code == 0
            else:
                assert body.responses[0].partition_responses[0].error_code == 0
        sender.join(30)
    s.close()
    assert rss.peak - base < 100 << 20, f"RSS {mib(base)} -> peak {mib(rss.peak)} during the flood"
    report_figure(
        "limits: flood",
        (
            f"{stalled_at} of {len(frames)} pipelined requests sent before the broker stopped reading; "
            f"RSS {mib(base)} -> {mib(flooded)} (peak {mib(rss.peak)})"
        ),
    )


# --- admin requests that ask for too much ------------------------------------------------------------


def test_create_topics_with_a_million_partitions_is_refused_and_the_broker_keeps_answering(
    kcompat_broker_factory: BrokerFactory,
) -> None:
    broker = kcompat_broker_factory()
    s = socket.create_connection((broker.host, broker.port), timeout=5)
    s.sendall(encode_request(19, 5, 1, {"topics": [{"name": "huge", "num_partitions": 1_000_000, "replication_factor": 1,
                                                    "assignments": [], "configs": []}],
                                        "timeout_ms": 1000, "validate_only": False}))  # fmt: skip
    try:
        _, body = decode_response(19, 5, read_frame(s))
        (topic,) = body.topics
        assert (topic.name, topic.error_code) == ("huge", ErrorCode.POLICY_VIOLATION)
        assert api_versions_ready(broker.host, broker.port, timeout=3), "the broker stopped answering"
        assert not (broker.data_dir / "huge-0").exists()
    finally:
        s.close()
        broker.kill()
