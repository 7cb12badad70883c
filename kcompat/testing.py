"""pytest plugin: a real kcompat broker as the Kafka stand-in for your tests.

Installing kcompat registers this plugin (entry point ``kcompat`` in the ``pytest11`` group), so the
fixtures below are available in any test suite without a conftest import. Each broker is started
the way a user starts it, ``python -m kcompat serve``, as a subprocess on a free port of 127.0.0.1
with a fresh data directory, and is ready when it has answered a real ApiVersions request.

Fixtures
--------
``kcompat_broker``
    Function-scoped broker; ``broker.bootstrap`` is ``"127.0.0.1:PORT"`` for ``bootstrap.servers``::

        def test_roundtrip(kcompat_broker):
            producer = KafkaProducer(bootstrap_servers=kcompat_broker.bootstrap)

``kcompat_broker_factory``
    Starts brokers with your own settings; all are stopped when the test ends. Settings are
    Kafka's property names, as a mapping, or as keywords with ``_`` for ``.``::

        def test_no_auto_create(kcompat_broker_factory):
            broker = kcompat_broker_factory(auto_create_topics_enable=False)
            broker = kcompat_broker_factory({"message.max.bytes": 2048})

``kcompat_session_broker``: one broker shared by every test of the session (use unique topics).

``kcompat_faults``, ``kcompat_capture``: fault rules and traffic captures on a broker's admin
    listener (kcompat.testing_faults: ``.add("drop", api="Fetch")``; kcompat.testing_capture).

``kcompat_cluster``
    Module-scoped cluster (cluster mode, the same as ``kcompat dev-cluster``): one Apache Kafka
    controller from the Kafka jars ($KAFKA_HOME/libs, or the project's .deps/kafka; java on PATH)
    and ``kcompat_cluster_brokers`` kcompat brokers (3; override that fixture in a module to change
    it). ``cluster.bootstrap_servers``, ``cluster.brokers``, ``cluster.quorum`` (the controller),
    ``cluster.pids``; everything is stopped when the module's tests are done::

        def test_replicated(kcompat_cluster):
            admin = AdminClient({"bootstrap.servers": kcompat_cluster.bootstrap_servers})

The ``Broker`` object
---------------------
``bootstrap``, ``host``, ``port``, ``data_dir`` (a ``pathlib.Path``), ``process`` (the
``subprocess.Popen``), ``log_path`` (the broker's stdout+stderr), and

* ``stop()``: SIGTERM, then wait for a clean exit (SIGKILL after a timeout); returns the exit code.
* ``kill()``: SIGKILL, as a crash would.
* ``start(wait=False)``, then ``wait_ready()``: start several at once and wait for each after
  (a cluster-mode broker answers only once its controller has unfenced it, as Kafka's does).
* ``restart(clean=True)``: stop (``clean=False``: kill) and start again on the same port and data.
* ``logs()``: the text the broker has logged so far.

When a test that used a broker fails, the tail of each broker's log is added to the report.
``wait_until(condition, what, timeout=10)`` polls until ``condition()`` is truthy and returns it
(``wait_until_async`` in a coroutine); ``free_port()`` gives a port for any other listener.

Test-friendly defaults
----------------------
Brokers started here use ``group[.streams].initial.rebalance.delay.ms=0`` (groups form at once) and
one partition for the internal ``__consumer_offsets`` and ``__transaction_state`` topics, and no
HTTP admin listener (``admin.listener`` empty: brokers side by side cannot all have port 9644;
``kcompat_broker_factory({"admin.listener": f"127.0.0.1:{free_port()}"})`` starts one, and
``broker.admin_url`` is then its ``http://host:port``); anything can be overridden through the
factory. ``KAFKA_*`` variables of the calling environment are not passed on. The start timeout is
30 s, or ``KCOMPAT_START_TIMEOUT`` seconds when set.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kcompat.testing_capture import kcompat_capture as kcompat_capture
from kcompat.testing_faults import kcompat_faults

__all__ = [
    "TEST_DEFAULTS",
    "Broker",
    "BrokerFactory",
    "BrokerStartError",
    "api_versions_ready",
    "closed_by_peer",
    "free_port",
    "kcompat_broker",
    "kcompat_broker_factory",
    "kcompat_faults",
    "kcompat_session_broker",
    "recv_exact",
    "wait_until",
    "wait_until_async",
]

# Settings that make a broker pleasant in tests; the factory's overrides win over these.
TEST_DEFAULTS: dict[str, str] = {
    **{f"group.{kind}initial.rebalance.delay.ms": "0" for kind in ("", "streams.")},
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
}

_DEFAULT_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 20.0
_LOG_TAIL_LINES = 200

BrokerFactory = Callable[..., "Broker"]


class BrokerStartError(RuntimeError):
    """The broker did not become ready; the message carries its log."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the OS considers free right now on `host`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_until(
    condition: Callable[[], Any],
    what: str | None = None,
    *,
    timeout: float = 10.0,
    interval: float = 0.1,
    sleep: Callable[[float], object] = time.sleep,
) -> Any:
    """Call `condition()` until it returns something truthy and return that; AssertionError naming
    `what` after `timeout` seconds. `sleep` waits between tries: one that runs an event loop
    (``lambda s: loop.run_until_complete(asyncio.sleep(s))``) lets the loop work meanwhile."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what or condition}")
        sleep(interval)
    return value


async def wait_until_async(
    condition: Callable[[], Any],
    what: str | None = None,
    *,
    timeout: float = 10.0,  # noqa: ASYNC109 (fails the test naming `what`, as wait_until's does)
    interval: float = 0.001,
) -> Any:
    """`wait_until` inside a coroutine: the event loop runs other tasks between tries."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what or condition}")
        await asyncio.sleep(interval)
    return value


# ApiVersions v0 request, request header v1 (the readiness probe speaks the real protocol):
#
#   int32 size | int16 api_key=18 | int16 api_version=0 | int32 correlation_id
#   | int16 client_id length | client_id bytes          (v0 body is empty)
#
# The response always uses response header v0:
#
#   int32 size | int32 correlation_id | int16 error_code | array of api ranges ...
_API_VERSIONS = 18
_PROBE_CLIENT_ID = b"kcompat-testing"


def _api_versions_v0_request(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", _API_VERSIONS, 0, correlation_id, len(_PROBE_CLIENT_ID)) + _PROBE_CLIENT_ID
    return struct.pack(">i", len(body)) + body


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly n bytes from a blocking socket, or ConnectionError if the peer closes first."""
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(min(n - len(chunks), 1 << 20))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(chunks)} of {n} bytes")
        chunks += chunk
    return bytes(chunks)


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the peer closes the connection (EOF or reset) within `timeout`; what arrives first is skipped."""
    sock.settimeout(timeout)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def api_versions_ready(host: str, port: int, timeout: float = 2.0, correlation_id: int = 0x6B63) -> bool:
    """True when host:port answers ApiVersions v0 with our correlation id and error code 0."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_api_versions_v0_request(correlation_id))
            (size,) = struct.unpack(">i", recv_exact(sock, 4))
            if size < 6:
                return False
            head = recv_exact(sock, 6)
            got_id, error_code = struct.unpack(">ih", head)
            return bool(got_id == correlation_id and error_code == 0)
    except (OSError, struct.error):
        return False


def _property_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _merge_overrides(
    overrides: Mapping[str, object] | None, keywords: Mapping[str, object]
) -> dict[str, str]:
    merged = dict(TEST_DEFAULTS)
    for key, value in (overrides or {}).items():
        merged[key] = _property_value(value)
    for key, value in keywords.items():
        merged[key.replace("_", ".")] = _property_value(value)
    return merged


class Broker:
    """A `kcompat serve` subprocess owned by a test."""

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        overrides: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        start_timeout: float | None = None,
        python: str = sys.executable,
        listeners: Mapping[str, int] | None = None,
        args: Sequence[str] = (),
    ) -> None:
        self.host = host
        self.port = port if port is not None else free_port(host)
        # More listeners beside the PLAINTEXT one the readiness probe uses: name -> port (SSL, SASL_SSL,
        # or any name mapped in listener.security.protocol.map).
        self.listeners: dict[str, int] = dict(listeners or {})
        self.args = list(args)  # more `kcompat serve` options, e.g. --add-scram
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.overrides: dict[str, str] = dict(overrides or {})
        env_timeout = os.environ.get("KCOMPAT_START_TIMEOUT")
        self.start_timeout = start_timeout or (float(env_timeout) if env_timeout else _DEFAULT_START_TIMEOUT)
        self.python = python
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def admin_url(self) -> str | None:
        """``http://host:port`` of the admin listener (/metrics) when started with ``admin.listener``."""
        value = self.overrides.get("admin.listener")
        return f"http://{value}" if value else None

    def command(self) -> list[str]:
        props = dict(self.overrides)
        # Where it listens and stores data is the fixture's business, not the caller's.
        props["listeners"] = ",".join(
            [f"PLAINTEXT://{self.host}:{self.port}"]
            + [f"{n}://{self.host}:{p}" for n, p in self.listeners.items()]
        )
        props.pop("advertised.listeners", None)
        # No admin listener unless asked for: brokers side by side would all want port 9644.
        props.setdefault("admin.listener", "")
        props.setdefault("log.dirs", str(self.data_dir))  # several (JBOD): data_dir the first of them
        props.pop("log.dir", None)
        cmd = [self.python, "-m", "kcompat", "serve", *self.args]
        for key, value in props.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def address(self, listener: str) -> str:
        """host:port of one of the extra listeners."""
        return f"{self.host}:{self.listeners[listener]}"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_") and k != "CLUSTER_ID"}
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def start(self, wait: bool = True) -> Broker:
        """Start the process and (unless `wait` is False: then call wait_ready()) wait until it
        answers ApiVersions."""
        if self.running:
            raise RuntimeError(f"broker on {self.bootstrap} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"--- kcompat-testing: starting {' '.join(self.command())}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=str(self.data_dir.parent),
            )
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout
        delay = 0.02
        while True:
            code = self.process.poll()
            if code is not None:
                raise BrokerStartError(
                    f"kcompat broker exited with code {code} before answering ApiVersions on "
                    f"{self.bootstrap}; its log ({self.log_path}):\n{self._tail()}"
                )
            if api_versions_ready(self.host, self.port):
                return
            if time.monotonic() >= deadline:
                self.kill()
                raise BrokerStartError(
                    f"kcompat broker did not answer ApiVersions on {self.bootstrap} within "
                    f"{self.start_timeout:.0f}s; its log ({self.log_path}):\n{self._tail()}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, timeout: float = _STOP_TIMEOUT) -> int | None:
        """SIGTERM and wait for a graceful exit; SIGKILL if it takes longer than `timeout`."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                warnings.warn(
                    f"kcompat broker on {self.bootstrap} ignored SIGTERM for {timeout:.0f}s; killed it",
                    stacklevel=2,
                )
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def kill(self) -> int | None:
        """SIGKILL: the broker gets no chance to close its files."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        return self.process.returncode

    def restart(self, clean: bool = True) -> Broker:
        """Stop (SIGTERM, or SIGKILL when clean=False) and start again: same port, same data dir."""
        if clean:
            self.stop()
        else:
            self.kill()
        return self.start()

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return "\n".join(self.logs().splitlines()[-lines:])

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited {self.returncode}"
        return f"<kcompat Broker {self.bootstrap} {state} data_dir={self.data_dir}>"


# --- pytest wiring -----------------------------------------------------------------------------

_BROKERS_KEY = pytest.StashKey[list[Broker]]()


def _remember(node: Any, broker: Broker) -> None:
    stash = getattr(node, "stash", None)
    if stash is not None:
        stash.setdefault(_BROKERS_KEY, []).append(broker)


def _start(base: Path, name: str, overrides: Mapping[str, str], start_timeout: float | None) -> Broker:
    broker = Broker(
        data_dir=base / f"{name}-data",
        log_path=base / f"{name}.log",
        overrides=overrides,
        start_timeout=start_timeout,
    )
    try:
        broker.start()
    except BrokerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    return broker


@pytest.fixture
def kcompat_broker_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerFactory]:
    """Call with Kafka properties (a mapping and/or keywords with `_` for `.`) to start a broker."""
    started: list[Broker] = []

    def factory(
        overrides: Mapping[str, object] | None = None, /, *, start_timeout: float | None = None, **kw: object
    ) -> Broker:
        name = "kcompat" if not started else f"kcompat-{len(started) + 1}"
        broker = _start(tmp_path, name, _merge_overrides(overrides, kw), start_timeout)
        started.append(broker)
        _remember(request.node, broker)
        return broker

    yield factory
    for broker in started:
        broker.stop()


@pytest.fixture
def kcompat_broker(kcompat_broker_factory: BrokerFactory) -> Broker:
    """A fresh broker with the test defaults; stopped when the test ends."""
    return kcompat_broker_factory()


@pytest.fixture(scope="session")
def kcompat_session_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the whole session."""
    broker = _start(tmp_path_factory.mktemp("kcompat-session"), "kcompat", dict(TEST_DEFAULTS), None)
    yield broker
    broker.stop()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        remembered: list[Broker] = item.stash.get(_BROKERS_KEY, [])
        brokers = list(remembered)
        if "kcompat_session_broker" in getattr(item, "fixturenames", ()):
            session_broker = (
                item.funcargs.get("kcompat_session_broker") if hasattr(item, "funcargs") else None
            )
            if isinstance(session_broker, Broker) and session_broker not in brokers:
                brokers.append(session_broker)
        for broker in brokers:
            report.sections.append((f"kcompat broker {broker.bootstrap} log (tail)", broker._tail()))
    return report


@pytest.fixture(scope="module")
def kcompat_cluster_brokers() -> int:
    """How many kcompat brokers `kcompat_cluster` starts (override in a module)."""
    return 3


@pytest.fixture(scope="module")
def kcompat_cluster(tmp_path_factory: pytest.TempPathFactory, kcompat_cluster_brokers: int) -> Iterator[Any]:
    """One Kafka controller and `kcompat_cluster_brokers` kcompat brokers (kcompat.testing_cluster.DevCluster)."""
    from kcompat.testing_cluster import ControllerQuorum, ControllerStartError, DevCluster, kafka_jars

    why_not = ControllerQuorum.available(kafka_jars())
    if why_not is not None:
        pytest.fail(f"kcompat_cluster: {why_not}", pytrace=False)
    cluster = DevCluster(tmp_path_factory.mktemp("kcompat-cluster"), brokers=kcompat_cluster_brokers)
    try:
        cluster.start()
    except ControllerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield cluster
    cluster.stop()
