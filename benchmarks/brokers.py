"""The two brokers under test, each started the way its users start it, on a fresh log dir.

kcompat:  `python -m kcompat serve <dir>/server.properties`
Kafka:    `java ... kafka.tools.StorageTool format -t <id> -c <props>`, then
          `java <heap and GC flags of kafka-server-start.sh / kafka-run-class.sh> kafka.Kafka <props>`
          in KRaft combined mode (one node: broker and controller), from the jars of .deps/kafka.

Both get the same broker settings (COMMON): one partition per new topic, one partition for the
internal offsets topic, no initial rebalance delay, 1 s share-group heartbeats; everything else is each broker's default.
`start()` returns the cold start: seconds from spawning the process to its first answered
Metadata request (Kafka's storage format step is timed apart, as `format_s`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.metadata_probe import wait_for_metadata
from kcompat.kafka_uuid import random_uuid_base64

ROOT = Path(__file__).resolve().parent.parent
KAFKA_JARS = ROOT / ".deps" / "kafka"

COMMON = {
    "num.partitions": "1",
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    # A share-group member gets its partitions a heartbeat after it joins: 1 s rather than 5 s keeps
    # the share rows (benchmarks/share.py) from waiting on joins. Share groups only.
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
}

# kafka-server-start.sh sets the heap; kafka-run-class.sh adds these performance options.
KAFKA_HEAP = ["-Xmx1G", "-Xms1G"]
KAFKA_JVM_PERFORMANCE = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
# A short-lived tool (the storage format) starts faster on the client JIT alone.
QUICK_JVM = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]

START_TIMEOUT_S = 90.0
RELAY = "RELAY"  # the listener a byte relay forwards to (benchmarks/proxy.py), advertising the relay


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_properties(path: Path, props: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


class BrokerProcess:
    name = "?"

    def __init__(self, workdir: Path, relay_listener: bool = False) -> None:
        self.workdir = workdir
        # A second listener, RELAY, whose Metadata names the relay's port (relay_port), not its own
        # (relay_upstream_port): a client bootstrapping through the relay keeps going through it.
        self.relay_listener = relay_listener
        self.relay_port = 0
        self.relay_upstream_port = 0
        self.data_dir = workdir / "data"
        self.log_path = workdir / "broker.log"
        self.host = "127.0.0.1"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.format_s: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def command(self, properties: Path) -> list[str]:
        raise NotImplementedError

    def properties(self) -> dict[str, str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Steps before the broker process starts (not part of the cold start)."""

    def start(self) -> float:
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self.data_dir.mkdir(parents=True)
        self.port = free_port()
        props_path = self.workdir / "server.properties"
        props = self.properties()
        _write_properties(props_path, self._with_relay_listener(props) if self.relay_listener else props)
        self.prepare()
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        with open(self.log_path, "ab") as log:
            started = time.perf_counter()
            self.process = subprocess.Popen(
                self.command(props_path), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, cwd=self.workdir,
            )  # fmt: skip
        try:
            return wait_for_metadata(self.host, self.port, started, START_TIMEOUT_S, self.alive)
        except (RuntimeError, TimeoutError) as e:
            self.stop()
            raise RuntimeError(f"{self.name} did not start: {e}; log tail:\n{self.log_tail()}") from None

    def _with_relay_listener(self, props: dict[str, str]) -> dict[str, str]:
        self.relay_port, self.relay_upstream_port = free_port(), free_port()
        own = props.get("advertised.listeners", f"PLAINTEXT://{self.host}:{self.port}")
        return {
            **props,
            "listeners": f"{props['listeners']},{RELAY}://{self.host}:{self.relay_upstream_port}",
            "advertised.listeners": f"{own},{RELAY}://{self.host}:{self.relay_port}",
            "listener.security.protocol.map": props.get(
                "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT"
            )
            + f",{RELAY}:PLAINTEXT",
        }

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def cleanup(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class KcompatBroker(BrokerProcess):
    name = "kcompat"

    def __init__(self, workdir: Path, python: str = sys.executable, relay_listener: bool = False) -> None:
        super().__init__(workdir, relay_listener)
        self.python = python

    def properties(self) -> dict[str, str]:
        return {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            # On, as by default, but on a port of its own: 9644 may be another broker's (`make run`).
            "admin.listener": f"{self.host}:{free_port()}",
            **COMMON,
        }

    def prepare(self) -> None:
        # kcompat as pip installs it: byte-compiled (an editable install, or PYTHONDONTWRITEBYTECODE,
        # would leave every start compiling the sources, ~90 ms). Up-to-date files are skipped.
        subprocess.run(
            [self.python, "-m", "compileall", "-q", str(ROOT / "kcompat")], check=True, timeout=120
        )

    def command(self, properties: Path) -> list[str]:
        return [self.python, "-m", "kcompat", "serve", str(properties)]


class KafkaBroker(BrokerProcess):
    name = "kafka"

    def __init__(
        self, workdir: Path, jars: Path = KAFKA_JARS, java: str | None = None, relay_listener: bool = False
    ) -> None:
        super().__init__(workdir, relay_listener)
        self.jars = jars
        self.java = java or shutil.which("java") or "java"
        self.controller_port = 0

    @staticmethod
    def available(jars: Path = KAFKA_JARS) -> str | None:
        """None when Kafka can run here, else why not."""
        if not any(jars.glob("kafka_2.13-*.jar")):
            return f"no Kafka jars in {jars} (run `bash tools/setup-test-deps.sh`)"
        if shutil.which("java") is None:
            return "java is not on PATH"
        return None

    def properties(self) -> dict[str, str]:
        self.controller_port = free_port()
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **COMMON,
        }

    def _java(self, jvm: list[str], main: str, *args: str) -> list[str]:
        return [self.java, *jvm, "-cp", str(self.jars / "*"), main, *args]

    def prepare(self) -> None:
        cluster_id = random_uuid_base64()  # never starting with '-', which the tool would take for an option
        t0 = time.perf_counter()
        result = subprocess.run(
            self._java(QUICK_JVM, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                       "-c", str(self.workdir / "server.properties")),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        self.format_s = time.perf_counter() - t0
        if result.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{result.stdout}\n{result.stderr}")

    def command(self, properties: Path) -> list[str]:
        return self._java(KAFKA_HEAP + KAFKA_JVM_PERFORMANCE, "kafka.Kafka", str(properties))
