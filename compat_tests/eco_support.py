"""Helpers of the ecosystem tests (test_eco_*.py): Kafka Connect and MirrorMaker 2 run from the
jars of .deps/kafka and .deps/connect, the Python stream processors from .deps/eco-venv (both made
by tools/setup-test-deps.sh), one module-scoped kcompat broker, and a read_committed reader that
says what a topic holds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from support import DEPS, SETUP_HINT, java_classpath, java_executable

from kcompat.testing import TEST_DEFAULTS, Broker, BrokerStartError

CONNECT_JARS = DEPS / "connect"  # tools/deps/connect/pom.xml: connect-file, connect-mirror(-client)
ECO_VENV = DEPS / "eco-venv"  # faust-streaming and quixstreams, pinned in setup-test-deps.sh
# Started once per test: the client JIT and a serial GC start a worker fastest on 2 shared cores.
CONNECT_JVM = [
    "-Xms64m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
]
LOG4J2 = """\
status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{HH:mm:ss,SSS}] %p %m (%c{1})%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
"""


def connect_classpath() -> str:
    java_classpath(CONNECT_JARS)  # fails the test clearly when the connect jars are missing
    return f"{java_classpath()}:{CONNECT_JARS / '*'}"


def eco_python() -> str:
    python = ECO_VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"no {python}: {SETUP_HINT}", pytrace=False)
    return str(python)


def module_broker(base: Path, **overrides: str) -> Iterator[Broker]:
    """One `kcompat serve` for a test module (the body of a module-scoped fixture)."""
    broker = Broker(base / "kcompat-data", base / "kcompat.log", overrides={**TEST_DEFAULTS, **overrides})
    try:
        broker.start()
    except BrokerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield broker
    finally:
        broker.stop()


def write_properties(path: Path, props: Mapping[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class JavaProcess:
    """A long-running JVM (a Connect worker, MirrorMaker 2) whose output goes to a log file."""

    def __init__(
        self, main: str, args: Sequence[str], log: Path, classpath: str, jvm: Sequence[str] = CONNECT_JVM
    ) -> None:
        # Kafka's jars ship no logging configuration: log4j2 would log errors only, and a failed
        # test would show nothing of what the worker did.
        config = log.with_suffix(".log4j2.properties")
        config.write_text(LOG4J2)
        self.cmd = [
            java_executable(),
            f"-Dlog4j2.configurationFile={config}",
            *jvm,
            "-cp",
            classpath,
            main,
            *args,
        ]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> JavaProcess:
        with open(self.log, "ab") as out:
            out.write(f"--- eco: starting {' '.join(self.cmd)}\n".encode())
            out.flush()
            self.process = subprocess.Popen(
                self.cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no chance to commit, flush or leave its group."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self, timeout: float = 20.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def wait_for(what: str, ok: Callable[[], object], timeout: float, why: Callable[[], str] = lambda: "") -> Any:
    """Poll `ok` until it returns something truthy; fail naming `what` (and `why()`) after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = ok()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s\n{why()}")
        time.sleep(0.25)


def http_json(method: str, url: str, body: object | None = None, timeout: float = 10.0) -> tuple[int, Any]:
    """One REST call; (status, decoded body); (0, None) when nothing answers yet."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw) if raw else None
        except ValueError:
            return exc.code, raw.decode(errors="replace")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, None


def read_committed(
    bootstrap: str, topic: str, partitions: int, want: int, timeout: float, settle: float = 2.0
) -> list[tuple[int, bytes, bytes]]:
    """Every committed record of `topic` as (partition, key, value), partition by partition in
    offset order: reads until `want` records came (or `timeout`), then `settle` s more so that a
    duplicate past `want` is seen too."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eco-check", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "enable.partition.eof": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + timeout
    settle_until: float | None = None
    try:
        while True:
            now = time.monotonic()
            if settle_until is None and len(got) >= want:
                settle_until = now + settle
            if now >= (settle_until if settle_until is not None else deadline):
                break
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            got.append((msg.partition(), msg.key() or b"", msg.value() or b""))
    finally:
        consumer.close()
    return got


def env_without_kafka() -> dict[str, str]:
    """This process's environment less anything that would steer a Kafka tool elsewhere."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "KCOMPAT_"))}
