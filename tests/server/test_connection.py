"""The transport over real sockets on 127.0.0.1, on asyncio's loop and on uvloop."""

from __future__ import annotations

import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kcompat.log.log_file import FetchSlice, FilePiece, LogFile
from kcompat.server.log_throttle import LogThrottle
from kcompat.server.network import connection
from kcompat.server.network.answer_queue import MAX_DEFERRED
from kcompat.server.network.connection import Limits
from kcompat.server.network.sendfile import STATS
from kcompat.testing import closed_by_peer
from tests.server.harness import ServerThread, pattern, recv_response, request

pytestmark = pytest.mark.timeout(30)

LOOPS = ["asyncio", "uvloop"]


@pytest.fixture(params=LOOPS)
def start(request: pytest.FixtureRequest) -> Iterator[Any]:
    servers: list[ServerThread] = []

    def factory(**kw: Any) -> ServerThread:
        server = ServerThread(request.param, **kw)
        servers.append(server)
        return server

    yield factory
    for server in servers:
        server.stop()


def server_lines(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kcompat.server" and needle in r.getMessage()]


def test_frames_split_anywhere_and_packed_together(start: Any) -> None:
    server = start()
    with server.connect() as s:
        frame = request(1, "echo:hello")
        conn = server.connection()
        for i, b in enumerate(frame[:-1]):  # one byte per read, size prefix included
            s.send(bytes([b]))
            server.wait_for(lambda i=i: conn.buffered_bytes == i + 1)
        s.send(frame[-1:])
        assert recv_response(s) == (1, b"hello")
        s.sendall(request(2, "echo:a") + request(3, "echo:" + "x" * 100_000) + request(4, "echo:"))
        assert recv_response(s) == (2, b"a")
        assert recv_response(s) == (3, b"x" * 100_000)
        assert recv_response(s) == (4, b"")


def test_frame_larger_than_the_read_buffer(start: Any) -> None:
    server = start(limits=Limits(read_buffer=4096))
    with server.connect() as s:
        big = "y" * 1_000_000
        first = request(1, "echo:a")
        s.sendall(first + request(2, "echo:" + big)[:3000])
        conn = server.connection()
        server.wait_for(lambda: conn.buffered_bytes == 3000)  # the large frame's own buffer has begun
        s.sendall(request(2, "echo:" + big)[3000:] + request(3, "echo:c"))
        assert recv_response(s) == (1, b"a")
        assert recv_response(s) == (2, big.encode())
        assert recv_response(s) == (3, b"c")


def test_pipelined_requests_are_answered_in_order_one_at_a_time(start: Any) -> None:
    server = start()
    commands = ["sleep:0.15:slow", "echo:fast", "none", "sleep:0.05:mid", "echo:last"]
    with server.connect() as s:
        s.sendall(b"".join(request(i, c) for i, c in enumerate(commands)))
        got = [recv_response(s) for _ in range(4)]
    assert got == [(0, b"slow"), (1, b"fast"), (3, b"mid"), (4, b"last")]
    assert server.broker.handled == [0, 1, 2, 3, 4]
    assert server.broker.max_active_per_connection == 1


def test_answers_to_pipelined_requests_are_not_held_behind_one_that_waits(start: Any) -> None:
    # Answers to requests read together leave together, once the connection's task yields; a
    # request that waits (a parked Fetch) yields, so the answers before it go out at once.
    server = start()
    with server.connect() as s:
        s.sendall(request(1, "echo:a") + request(2, "echo:b") + request(3, "sleep:2.0:c"))
        t0 = time.monotonic()
        assert recv_response(s) == (1, b"a")
        assert recv_response(s) == (2, b"b")
        assert time.monotonic() - t0 < 1.0
        assert recv_response(s) == (3, b"c")


def test_a_produce_answered_later_lets_the_next_produce_in_answers_in_order(start: Any) -> None:
    server = start()
    produce = 0  # the Produce API key: only a Produce goes ahead of answers still to come
    with server.connect() as s:
        s.sendall(request(1, "later:0.3:first", produce) + request(2, "later:0:second", produce))
        server.wait_for(lambda: len(server.broker.taken) == 2)
        assert 1 not in server.broker.answered  # the second was taken while the first waited
        assert recv_response(s) == (1, b"first")
        assert recv_response(s) == (2, b"second")  # ready first, sent in request order
        s.sendall(request(3, "later:0.2:third", produce) + request(4, "echo:metadata"))
        assert recv_response(s) == (3, b"third")
        assert recv_response(s) == (4, b"metadata")
        broker = server.broker
        assert broker.taken[4] >= broker.answered[3]  # any other request waits for earlier answers


def test_produces_awaiting_answers_are_bounded(start: Any) -> None:
    server = start()
    with server.connect() as s:
        s.sendall(
            b"".join(request(i, f"later:{0.3 if i == 0 else 0}:{i}", 0) for i in range(MAX_DEFERRED + 2))
        )
        for i in range(MAX_DEFERRED + 2):
            assert recv_response(s) == (i, str(i).encode())
    broker = server.broker
    assert broker.taken[MAX_DEFERRED - 1] < broker.answered[0]
    assert broker.taken[MAX_DEFERRED] >= broker.answered[0]  # the sixth waited for a free place


def test_a_client_gone_before_a_later_answer_cancels_it(start: Any) -> None:
    server = start()
    with server.connect() as s:
        s.sendall(request(1, "later:0.3:lost", 0))
        server.wait_for(lambda: 1 in server.broker.taken)
    server.wait_for(lambda: not server.reactor.connections)
    with server.connect() as s:
        s.sendall(request(2, "echo:still here"))
        assert recv_response(s) == (2, b"still here")
    server.wait_for(lambda: server.broker.later[1].cancelled())  # with its connection, not left to run
    assert 1 not in server.broker.answered


def test_a_client_gone_while_its_produce_is_taken_cancels_the_later_answer(start: Any) -> None:
    """The connection closed while the handler still worked: the answer it then returns to come
    later is cancelled with the connection, not left to run with nobody to answer (issue 26)."""
    server = start()
    with server.connect() as s:
        s.sendall(request(1, "slowlater:0.3:0.5:lost", 0))
        server.wait_for(lambda: 1 in server.broker.taken)
    server.wait_for(lambda: not server.reactor.connections)
    server.wait_for(lambda: 1 in server.broker.later)
    server.wait_for(lambda: server.broker.later[1].done())
    assert server.broker.later[1].cancelled()
    assert 1 not in server.broker.answered


def test_a_slow_request_holds_only_its_own_connection(start: Any) -> None:
    server = start()
    with server.connect() as slow, server.connect() as quick:
        slow.sendall(request(1, "sleep:1.0:late"))
        server.wait_for(lambda: sum(server.broker.active.values()) == 1)
        t0 = time.monotonic()
        quick.sendall(request(2, "echo:now"))
        assert recv_response(quick) == (2, b"now")
        assert time.monotonic() - t0 < 0.5
        assert recv_response(slow) == (1, b"late")


@pytest.mark.parametrize(
    ("prefix", "expect"),
    [
        (struct.pack(">i", 1001), "request size 1001 is larger than socket.request.max.bytes (1000)"),
        (struct.pack(">I", 2**31), "invalid request size -2147483648"),
        (struct.pack(">i", -1), "invalid request size -1"),
        (b"GET ", "looks like HTTP"),
        (b"\x16\x03\x01\x02", "looks like a TLS handshake"),
    ],
)
def test_bad_size_prefix_closes_only_that_connection(
    start: Any, caplog: pytest.LogCaptureFixture, prefix: bytes, expect: str
) -> None:
    server = start(limits=Limits(max_request_bytes=1000))
    with (
        caplog.at_level(logging.INFO, logger="kcompat.server"),
        server.connect() as good,
        server.connect() as bad,
    ):
        bad_port = bad.getsockname()[1]
        assert server.connection_count(2) == 2
        good.sendall(request(1, "echo:before"))
        assert recv_response(good) == (1, b"before")
        bad.sendall(prefix + b"\0" * 100)
        assert closed_by_peer(bad)
        good.sendall(request(2, "echo:" + "z" * 900))
        assert recv_response(good) == (2, b"z" * 900)
        assert server.connection_count(1) == 1
    lines = server_lines(caplog, "closing connection from")
    assert len(lines) == 1 and lines[0].startswith(f"closing connection from 127.0.0.1:{bad_port}: ")
    assert expect in lines[0]
    assert server.broker.handled == [1, 2]  # the bad frame never reached the broker


def test_a_client_refused_again_and_again_writes_one_line(
    start: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client retrying a request that closes its connection (an API version Kafka 4 removed: 762
    lines in 26 s) gets one line per 10 s, then a count of the lines held back; others still log."""
    now = [0.0]
    monkeypatch.setattr(
        connection, "_closing", LogThrottle(logging.getLogger("kcompat.server"), clock=lambda: now[0])
    )
    server = start()

    def refused(command: str = "close") -> None:
        with server.connect() as s:
            s.sendall(request(5, command))
            assert closed_by_peer(s)

    with caplog.at_level(logging.INFO, logger="kcompat.server"):
        for _ in range(20):
            refused()
        refused("decode")  # another reason: its own line
        with server.connect() as other:
            other.sendall(request(1, "echo:served"))
            assert recv_response(other) == (1, b"served")
        now[0] = 11.0
        refused()
    lines = server_lines(caplog, "closing connection from")
    assert len(lines) == 3, lines
    assert lines[0].endswith("told to close") and "invalid request" in lines[1]
    assert lines[2].endswith("told to close (19 more like it in the last 11 s)")


def test_exact_limit_is_accepted(start: Any) -> None:
    server = start(limits=Limits(max_request_bytes=1000))
    with server.connect() as s:
        s.sendall(request(7, "echo:" + "q" * (1000 - 8 - 5)))
        assert recv_response(s) == (7, b"q" * (1000 - 8 - 5))


@pytest.mark.parametrize(
    ("command", "expect"),
    [
        ("close", "(Metadata v12, correlation id 5): told to close"),
        ("decode", "(Metadata v12, correlation id 5): invalid request: body.field: bad bytes"),
    ],
)
def test_close_errors_close_with_one_line(
    start: Any, caplog: pytest.LogCaptureFixture, command: str, expect: str
) -> None:
    server = start()
    with (
        caplog.at_level(logging.INFO, logger="kcompat.server"),
        server.connect() as s,
        server.connect() as other,
    ):
        port = s.getsockname()[1]
        s.sendall(request(5, command) + request(6, "echo:never"))
        assert closed_by_peer(s)
        other.sendall(request(1, "echo:still here"))
        assert recv_response(other) == (1, b"still here")
    records = [r for r in caplog.records if r.name == "kcompat.server"]
    assert [r.getMessage() for r in records] == [f"closing connection from 127.0.0.1:{port} {expect}"]
    assert records[0].exc_info is None
    assert 6 not in server.broker.handled


def test_unexpected_exception_is_logged_with_traceback_once(
    start: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server = start()
    with (
        caplog.at_level(logging.INFO, logger="kcompat.server"),
        server.connect() as s,
        server.connect() as other,
    ):
        s.sendall(request(9, "boom"))
        assert closed_by_peer(s)
        other.sendall(request(1, "echo:fine"))
        assert recv_response(other) == (1, b"fine")
    records = [r for r in caplog.records if r.name == "kcompat.server"]
    assert len(records) == 1
    assert "error handling Metadata v12, correlation id 9 from 127.0.0.1:" in records[0].getMessage()
    assert records[0].exc_info is not None and records[0].exc_info[0] is RuntimeError


def test_idle_connections_are_closed_even_while_trickling(start: Any) -> None:
    server = start(idle_ms=300)
    with server.connect() as idle, server.connect() as trickle, server.connect() as busy:
        assert server.connection_count(3) == 3
        frame = request(1, "echo:" + "t" * 100)
        t0 = time.monotonic()
        sent = 0
        busy_id = 0
        trickle_cut = None
        while time.monotonic() - t0 < 1.2:
            if trickle_cut is None:
                try:
                    trickle.send(frame[sent : sent + 1])
                    sent += 1
                except OSError:
                    trickle_cut = time.monotonic() - t0
            busy_id += 1
            busy.sendall(request(busy_id, "sleep:0.05:ping"))  # the answer paces the trickle
            assert recv_response(busy) == (busy_id, b"ping")
        assert closed_by_peer(idle, 0.1)
        assert closed_by_peer(trickle, 0.1)
        assert trickle_cut is not None and 0.3 <= trickle_cut < 1.0
        assert sent < len(frame)
        assert server.connection_count(1) == 1


def test_a_long_request_is_not_idleness(start: Any) -> None:
    server = start(idle_ms=200)
    with server.connect() as s:
        s.sendall(request(1, "sleep:0.6:done"))
        assert recv_response(s) == (1, b"done")


def test_max_connections_refuses_the_excess(start: Any, caplog: pytest.LogCaptureFixture) -> None:
    server = start(max_connections=lambda: 2)
    with caplog.at_level(logging.INFO, logger="kcompat.server"):
        a, b = server.connect(), server.connect()
        c = server.connect()
        assert closed_by_peer(c)
        for i, s in enumerate((a, b)):
            s.sendall(request(i, "echo:ok"))
            assert recv_response(s) == (i, b"ok")
        a.close()
        assert server.connection_count(1) == 1
        with server.connect() as d:
            d.sendall(request(3, "echo:room again"))
            assert recv_response(d) == (3, b"room again")
        b.close()
        c.close()
    assert server.reactor.refused == 1
    assert len(server_lines(caplog, "refused connection")) == 1


def test_max_connections_per_ip(start: Any) -> None:
    server = start(max_connections_per_ip=lambda host: 1)
    with server.connect() as a, server.connect() as b:
        assert closed_by_peer(b)
        a.sendall(request(1, "echo:ok"))
        assert recv_response(a) == (1, b"ok")


def test_max_connections_per_ip_is_asked_per_address(start: Any) -> None:
    """max.connections.per.ip.overrides: the limit of one address does not bind another."""
    server = start(max_connections_per_ip=lambda host: 1 if host == "127.0.0.2" else 3)
    with server.connect(source="127.0.0.2") as a, server.connect(source="127.0.0.2") as b:
        assert closed_by_peer(b)
        with server.connect() as c, server.connect() as d:
            for i, s in enumerate((a, c, d)):
                s.sendall(request(i, "echo:ok"))
                assert recv_response(s) == (i, b"ok")


def test_an_accept_delay_holds_that_connection_and_the_backlog(start: Any) -> None:
    """max.connection.creation.rate: over it the acceptor waits before it serves the connection,
    and accepts no other meanwhile; both are served once the wait is over."""
    delays = [400]  # the first connection waits 400 ms, the rest none

    def accept_delay(listener: str) -> int:
        return delays.pop() if delays else 0

    server = start(accept_delay=accept_delay)
    started = time.monotonic()
    with server.connect() as a, server.connect() as b:
        b.sendall(request(2, "echo:second"))
        a.sendall(request(1, "echo:first"))
        assert recv_response(b) == (2, b"second")
        assert recv_response(a) == (1, b"first")
        assert time.monotonic() - started >= 0.4


def test_a_client_that_never_reads_does_not_grow_the_buffer(start: Any) -> None:
    limits = Limits(max_queued_requests=4, write_high_water=1 << 20, write_low_water=256 << 10)
    server = start(limits=limits, send_buffer=64 << 10)
    n, size = 200, 256 << 10
    with server.connect(rcvbuf=64 << 10) as s:
        s.sendall(b"".join(request(i, f"big:{size}") for i in range(n)))  # 4 KB of requests
        conn = server.connection()
        server.wait_for(lambda: conn.unsent_bytes > limits.write_high_water and not conn.reading)

        def state() -> tuple[int, int, int, bool]:
            return len(server.broker.handled), conn.unsent_bytes, conn.queued_requests, conn.reading

        handled, unsent, queued, reading = server.call(state)
        # High water, plus the response that crossed it: never more.
        assert unsent <= limits.write_high_water + size + 8
        assert queued <= limits.max_queued_requests
        assert not reading
        # What the socket buffers hold, plus the high water: a handful of responses, not 200.
        assert handled <= 12
        for i in range(n):  # now read: everything arrives, in order
            correlation, body = recv_response(s)
            assert correlation == i and body == pattern(size)
    assert server.broker.handled == list(range(n))


def test_file_slices_go_out_with_sendfile(start: Any, tmp_path: Any) -> None:
    server = start()
    data = pattern(8 << 20)
    log_file = LogFile(tmp_path / "00000000000000000000.log")
    log_file.append(b"x" * 100 + data[: 5 << 20])
    second = LogFile(tmp_path / "00000000000000001000.log")
    second.append(data[5 << 20 :])
    server.broker.slice = FetchSlice((FilePiece(log_file, 100, 5 << 20), FilePiece(second, 0, 3 << 20)), 0)
    del log_file, second
    STATS.reset()
    with server.connect(rcvbuf=128 << 10) as s:
        s.sendall(request(4, "file") + request(5, "echo:after"))
        conn = server.connection()
        server.wait_for(lambda: conn.unsent_bytes > 0)  # the socket is full: sending resumes on writability
        assert recv_response(s) == (4, b"<" + data + b">")
        assert recv_response(s) == (5, b"after")
    assert STATS.sendfile_bytes == len(data)
    assert STATS.fallback_bytes == 0 and STATS.fallback_pieces == 0
    assert STATS.sendfile_calls >= 2


def test_graceful_shutdown_finishes_received_requests(start: Any) -> None:
    server = start()
    with server.connect() as s:
        s.sendall(request(1, "sleep:0.3:first") + request(2, "echo:second"))
        conn = server.connection()
        server.wait_for(lambda: sum(server.broker.active.values()) == 1 and conn.queued_requests == 1)
        t0 = time.monotonic()
        server.shutdown(grace=5)
        assert time.monotonic() - t0 < 2
        assert recv_response(s) == (1, b"first")
        assert recv_response(s) == (2, b"second")
        assert closed_by_peer(s)
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection(("127.0.0.1", server.port), timeout=1),
    ):
        pass


def test_shutdown_grace_period_is_bounded(start: Any, caplog: pytest.LogCaptureFixture) -> None:
    server = start()
    with (
        caplog.at_level(logging.INFO, logger="kcompat.server"),
        server.connect() as s,
        server.connect() as idle,
    ):
        s.sendall(request(1, "sleep:30:never"))
        server.wait_for(lambda: sum(server.broker.active.values()) == 1)
        t0 = time.monotonic()
        server.shutdown(grace=0.3)
        assert time.monotonic() - t0 < 2
        assert closed_by_peer(s, 1)
        assert closed_by_peer(idle, 1)
    assert server_lines(caplog, "closing 1 connection(s) with requests still in progress")
    assert server.connection_count(0) == 0


def test_a_truncated_request_is_one_line_and_a_plain_goodbye_none(
    start: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server = start(limits=Limits(read_buffer=4096))
    with caplog.at_level(logging.INFO, logger="kcompat.server"):
        for cut in (request(1, "echo:" + "a" * 10)[:10], request(2, "echo:" + "b" * 10_000)[:6000]):
            with server.connect() as s:
                port = s.getsockname()[1]
                assert server.connection_count(1) == 1
                s.sendall(cut)
            assert server.connection_count(0) == 0
            (line,) = server_lines(caplog, f"127.0.0.1:{port}")
            assert "closed by the peer in the middle of a request" in line
        with server.connect() as s:
            port = s.getsockname()[1]
            s.sendall(request(3, "echo:bye"))
            assert recv_response(s) == (3, b"bye")
        assert server.connection_count(0) == 0
    assert server_lines(caplog, f"(10 of {len(request(1, 'echo:' + 'a' * 10))} bytes received)")
    assert server_lines(caplog, f"(6000 of {len(request(2, 'echo:' + 'b' * 10_000))} bytes received)")
    assert not server_lines(caplog, f"127.0.0.1:{port}")


def test_read_ahead_is_bounded_in_bytes(start: Any) -> None:
    limits = Limits(max_queued_requests=100, max_queued_bytes=1 << 20)
    server = start(limits=limits)
    size = 300_000
    with server.connect() as s:
        payload = b"".join(
            request(i, "sleep:0.5:" + "p" * size) if i == 0 else request(i, "echo:" + "p" * size)
            for i in range(30)
        )
        s.setblocking(False)
        sent = 0
        conn = server.connection()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # send until the server stops reading and the buffers are full
            try:
                sent += s.send(payload[sent:])
            except BlockingIOError:
                _, writable, _ = select.select([], [s], [], 0.05)
                if not writable and not server.call(lambda: conn.reading):
                    break

        def state() -> tuple[int, int, bool]:
            return conn.queued_bytes, conn.queued_requests, conn.reading

        queued_bytes, queued, reading = server.call(state)
        assert sent < len(payload)  # the kernel buffers filled up behind the paused reader
        assert queued_bytes < limits.max_queued_bytes + size + 20
        assert 1 <= queued <= 5 and not reading
        s.setblocking(True)
        s.settimeout(10)
        rest = threading.Thread(target=s.sendall, args=(payload[sent:],))
        rest.start()
        for i in range(30):
            assert recv_response(s) == (i, b"p" * size)
        rest.join()
