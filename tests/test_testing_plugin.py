"""The kcompat.testing pytest plugin: readiness probe, start failures, the broker fixtures."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcompat.testing import (
    Broker,
    BrokerFactory,
    BrokerStartError,
    api_versions_ready,
    free_port,
    wait_until,
    wait_until_async,
)


class FakeApiVersionsServer:
    """Answers one ApiVersions v0 request per connection with a chosen error code / correlation id."""

    def __init__(self, error_code: int = 0, correlation_delta: int = 0) -> None:
        self.error_code = error_code
        self.correlation_delta = correlation_delta
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                (size,) = struct.unpack(">i", conn.recv(4))
                body = b""
                while len(body) < size:
                    body += conn.recv(size - len(body))
                self.requests.append(body)
                correlation_id = struct.unpack(">i", body[4:8])[0] + self.correlation_delta
                # correlation id, error code, empty api array (v0 layout)
                reply = struct.pack(">ihi", correlation_id, self.error_code, 0)
                conn.sendall(struct.pack(">i", len(reply)) + reply)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def fake_server() -> Iterator[Callable[..., FakeApiVersionsServer]]:
    servers: list[FakeApiVersionsServer] = []

    def make(**kw: int) -> FakeApiVersionsServer:
        server = FakeApiVersionsServer(**kw)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def test_probe_sends_api_versions_v0(fake_server: Callable[..., FakeApiVersionsServer]) -> None:
    server = fake_server()
    assert api_versions_ready("127.0.0.1", server.port)
    (request,) = server.requests
    api_key, api_version, _correlation, client_id_len = struct.unpack(">hhih", request[:10])
    assert (api_key, api_version) == (18, 0)
    assert request[10:] == b"kcompat-testing" and client_id_len == len(b"kcompat-testing")


def test_probe_rejects_errors_and_wrong_correlation(
    fake_server: Callable[..., FakeApiVersionsServer],
) -> None:
    assert not api_versions_ready("127.0.0.1", fake_server(error_code=35).port)
    assert not api_versions_ready("127.0.0.1", fake_server(correlation_delta=1).port)
    assert not api_versions_ready("127.0.0.1", free_port(), timeout=0.5)


def test_start_failure_carries_the_broker_output(tmp_path: Path) -> None:
    broker = Broker(tmp_path / "data", tmp_path / "broker.log", overrides={"num.partitions": "abc"})
    with pytest.raises(BrokerStartError) as info:
        broker.start()
    message = str(info.value)
    assert "exited with code 1" in message
    assert "kcompat: invalid configuration: num.partitions='abc' is invalid" in message
    assert "num.partitions='abc'" in broker.logs()


def test_kcompat_broker_fixture(kcompat_broker: Broker, tmp_path: Path) -> None:
    assert kcompat_broker.bootstrap == f"127.0.0.1:{kcompat_broker.port}"
    assert kcompat_broker.host == "127.0.0.1"
    assert kcompat_broker.running and kcompat_broker.process is not None
    assert kcompat_broker.data_dir.parent == tmp_path and kcompat_broker.data_dir.is_dir()
    assert kcompat_broker.log_path.parent == tmp_path
    assert api_versions_ready(kcompat_broker.host, kcompat_broker.port)
    command = " ".join(kcompat_broker.command())
    assert f"listeners=PLAINTEXT://127.0.0.1:{kcompat_broker.port}" in command
    assert "group.initial.rebalance.delay.ms=0" in command


def test_factory_restart_and_stop(kcompat_broker_factory: BrokerFactory) -> None:
    broker = kcompat_broker_factory({"message.max.bytes": 2048}, auto_create_topics_enable=False)
    command = broker.command()
    assert "message.max.bytes=2048" in command and "auto.create.topics.enable=false" in command
    assert broker.process is not None
    port, data_dir, first_pid = broker.port, broker.data_dir, broker.process.pid
    broker.restart()
    assert broker.port == port and broker.data_dir == data_dir
    assert broker.process is not None and broker.process.pid != first_pid
    assert api_versions_ready(broker.host, broker.port)
    broker.restart(clean=False)
    assert api_versions_ready(broker.host, broker.port)
    assert broker.stop() == 0  # SIGTERM is a clean shutdown
    assert not broker.running
    assert broker.logs().count("kcompat-testing: starting") == 3


def test_session_broker(kcompat_session_broker: Broker) -> None:
    assert api_versions_ready(kcompat_session_broker.host, kcompat_session_broker.port)


def test_failed_test_report_shows_broker_log(tmp_path: Path) -> None:
    """Run a failing test in a child pytest: the plugin (loaded via its entry point) adds the log."""
    (tmp_path / "test_fails.py").write_text(
        textwrap.dedent(
            """
            def test_fails(kcompat_broker):
                assert kcompat_broker.running
                assert False, "deliberate"
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_fails.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "deliberate" in result.stdout
    assert "kcompat broker 127.0.0.1:" in result.stdout and "log (tail)" in result.stdout
    assert "kcompat-testing: starting" in result.stdout


def test_wait_until_returns_the_first_truthy_value_and_names_what_timed_out() -> None:
    tries = iter([0, None, "ready"])
    slept: list[float] = []
    assert wait_until(lambda: next(tries), "the value", interval=0.5, sleep=slept.append) == "ready"
    assert slept == [0.5, 0.5]  # the given sleep waits between tries
    with pytest.raises(AssertionError, match=r"timed out after 0\.01s waiting for the flag"):
        wait_until(lambda: False, "the flag", timeout=0.01, interval=0.001)


def test_wait_until_async_lets_the_loop_run_between_tries() -> None:
    async def main() -> str:
        flag: list[str] = []
        asyncio.get_running_loop().call_later(0.01, flag.append, "set")
        return (await wait_until_async(lambda: flag, timeout=5))[0]

    assert asyncio.run(main()) == "set"
