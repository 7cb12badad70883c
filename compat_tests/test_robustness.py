"""Hostile and broken clients against a real `kcompat serve`: each is cut off with one log line,
and well-behaved clients keep working."""

from __future__ import annotations

import contextlib
import signal
import socket
import struct
import time

import pytest
from kafka import KafkaConsumer

from kcompat.testing import Broker, api_versions_ready, closed_by_peer

pytestmark = pytest.mark.timeout(60)


def header(api_key: int, api_version: int, correlation_id: int, client_id: bytes = b"robustness") -> bytes:
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


ATTACKS: dict[str, tuple[bytes, str]] = {
    # name: (bytes sent, what the broker's one line says)
    "garbage": (bytes.fromhex("deadbeef") + bytes(range(256)) * 4, "invalid request size"),
    "2 GiB size prefix": (struct.pack(">i", 2**31 - 1) + b"\0" * 64, "larger than socket.request.max.bytes"),
    "negative size prefix": (struct.pack(">I", 2**31) + b"\0" * 64, "invalid request size -2147483648"),
    "http": (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "looks like HTTP"),
    "unknown API key": (frame(header(0x7777, 0, 1) + bytes(range(40))), "not supported"),
    "body that does not decode": (
        frame(header(3, 12, 2) + b"\xff\xff\xff"),
        "Metadata v12, correlation id 2",
    ),
}


def lines_about(broker: Broker, port: int, expect: int = 1, timeout: float = 5.0) -> list[str]:
    """The broker's log lines naming the client port (waiting up to `timeout` for `expect` of them)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [line for line in broker.logs().splitlines() if f"127.0.0.1:{port}" in line]
        if len(lines) >= expect or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def assert_still_serving(broker: Broker) -> None:
    assert broker.running
    assert api_versions_ready(broker.host, broker.port)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        assert isinstance(consumer.topics(), set)  # Metadata, after ApiVersions negotiation
    finally:
        consumer.close()


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_bad_bytes_close_the_connection_with_one_line(kcompat_broker: Broker, attack: str) -> None:
    data, expect = ATTACKS[attack]
    with socket.create_connection((kcompat_broker.host, kcompat_broker.port), timeout=5) as bystander:
        bystander.sendall(frame(header(18, 0, 7)))  # a client connected before and after the attack
        with socket.create_connection((kcompat_broker.host, kcompat_broker.port), timeout=5) as s:
            port = s.getsockname()[1]
            with contextlib.suppress(
                BrokenPipeError, ConnectionResetError
            ):  # closed early: that is the point
                s.sendall(data)
            assert closed_by_peer(s)
        lines = lines_about(kcompat_broker, port)
        assert len(lines) == 1, lines
        assert expect in lines[0]
        (size,) = struct.unpack(">i", bystander.recv(4, socket.MSG_WAITALL))
        assert struct.unpack(">ih", bystander.recv(6, socket.MSG_WAITALL)) == (7, 0)
        bystander.recv(size - 6, socket.MSG_WAITALL)
        bystander.sendall(frame(header(18, 0, 8)))
        (size,) = struct.unpack(">i", bystander.recv(4, socket.MSG_WAITALL))
        assert struct.unpack(">i", bystander.recv(4, socket.MSG_WAITALL)) == (8,)
    assert "Traceback" not in kcompat_broker.logs()
    assert_still_serving(kcompat_broker)


def test_truncated_frame_then_close(kcompat_broker: Broker) -> None:
    with socket.create_connection((kcompat_broker.host, kcompat_broker.port), timeout=5) as s:
        port = s.getsockname()[1]
        whole = frame(header(3, 12, 1) + b"\0" * 100)
        s.sendall(whole[:20])
    lines = lines_about(kcompat_broker, port)
    assert len(lines) == 1, lines
    assert f"in the middle of a request (20 of {len(whole)} bytes received)" in lines[0]
    assert_still_serving(kcompat_broker)


def test_unsupported_api_versions_version_gets_an_error_response(kcompat_broker: Broker) -> None:
    """Where the protocol has an answer (ApiVersions), the connection gets it and stays open."""
    with socket.create_connection((kcompat_broker.host, kcompat_broker.port), timeout=5) as s:
        s.sendall(frame(header(18, 99, 5) + b"\x00\x01\x02"))
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        body = s.recv(size, socket.MSG_WAITALL)
        correlation, error_code = struct.unpack_from(">ih", body)
        assert (correlation, error_code) == (5, 35)  # UNSUPPORTED_VERSION
        s.sendall(frame(header(18, 0, 6)))
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        assert struct.unpack_from(">ih", s.recv(size, socket.MSG_WAITALL)) == (6, 0)


def test_many_bad_clients_in_a_row(kcompat_broker: Broker) -> None:
    for _ in range(3):
        for data, _ in ATTACKS.values():
            with socket.create_connection((kcompat_broker.host, kcompat_broker.port), timeout=5) as s:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    s.sendall(data)
                assert closed_by_peer(s)
    assert "Traceback" not in kcompat_broker.logs()
    assert_still_serving(kcompat_broker)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_the_broker_cleanly_with_a_client_connected(kcompat_broker: Broker, signum: int) -> None:
    with socket.create_connection((kcompat_broker.host, kcompat_broker.port), timeout=5) as s:
        s.sendall(frame(header(18, 0, 1)))
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        s.recv(size, socket.MSG_WAITALL)
        assert kcompat_broker.process is not None
        kcompat_broker.process.send_signal(signum)
        assert kcompat_broker.process.wait(15) == 0
        assert closed_by_peer(s, 1)
    logs = kcompat_broker.logs()
    assert f"shutting down ({signal.Signals(signum).name})" in logs
    assert "kcompat stopped" in logs and "Traceback" not in logs
