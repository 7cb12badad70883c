"""A real Apache Kafka KRaft controller quorum and kcompat brokers under it, for cluster-mode tests
and `kcompat dev-cluster`.

Cluster mode makes kcompat a KRaft broker under Kafka's own controllers: consensus is never ours.
`ControllerQuorum` formats and starts 1 or 3 Kafka 4.3 processes with `process.roles=controller`
from the jars in `.deps/kafka/`, waits until each answers ApiVersions on its controller listener,
and stops them. No pytest here, so a command can reuse it; the fixture lives in compat_tests/cluster.

    with ControllerQuorum(Path("/tmp/q"), voters=1) as quorum:
        quorum.bootstrap_servers     # "127.0.0.1:port" for controller.quorum.bootstrap.servers
        quorum.cluster_id

    with DevCluster(Path("/tmp/c"), brokers=3) as cluster:   # one controller and 3 `kcompat serve`
        cluster.bootstrap_servers   # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"

Storage is formatted with only the features kcompat can honour (FEATURES): a feature finalized at
a level means every registering broker must claim and implement it (KIP-584). That is Kafka 4.3's
default format (group.version 1, transaction.version 2, share.version 1, ELR 1, streams.version 1).
The controller's
log (log4j2 at INFO, through the log4j-slf4j binding already among the jars) goes to
`<workdir>/controller-<id>/controller.log`: a rejected registration is explained only there.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from kcompat.kafka_uuid import random_uuid_base64

ROOT = Path(__file__).resolve().parent.parent
KAFKA_JARS = ROOT / ".deps" / "kafka"


def kafka_jars() -> Path:
    """Kafka's jars: $KAFKA_HOME/libs when KAFKA_HOME is set, else the project's .deps/kafka."""
    home = os.environ.get("KAFKA_HOME")
    return Path(home) / "libs" if home else KAFKA_JARS


HOST = "127.0.0.1"

# A controller needs little: a small heap and the client JIT keep its start near 2 s on 2 cores.
CONTROLLER_JVM = [
    "-Xms64m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
]
TOOL_JVM = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]

# Finalized at format time (kafka-storage format --feature). metadata.version and kraft.version come
# from the release default (4.3-IV0 = 30; kraft.version=1 for a dynamic quorum); the others are the
# release defaults too (kcompat/metadata/features.py says what each means).
FEATURES = {
    "group.version": 1,
    "transaction.version": 2,
    "eligible.leader.replicas.version": 1,
    "share.version": 1,
    "streams.version": 1,
}

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
"""


class ControllerStartError(RuntimeError):
    """A controller did not format or start; the message carries its output."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def answers_api_versions(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when host:port answers an ApiVersions v0 request with error code 0."""
    client_id = b"kcompat-quorum"
    body = struct.pack(">hhih", 18, 0, 0x4B43, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 10:
                chunk = sock.recv(10 - len(head))
                if not chunk:
                    return False
                head += chunk
            _size, correlation, error_code = struct.unpack(">iih", head)
            return bool(correlation == 0x4B43 and error_code == 0)
    except OSError:
        return False


@dataclass
class Controller:
    node_id: int
    port: int
    workdir: Path
    directory_id: str
    process: subprocess.Popen[bytes] | None = None

    @property
    def log_dir(self) -> Path:
        return self.workdir / "metadata"

    @property
    def log_file(self) -> Path:
        return self.workdir / "controller.log"

    @property
    def endpoint(self) -> str:
        return f"{HOST}:{self.port}"

    def log_tail(self, lines: int = 60) -> str:
        out = []
        for name in ("controller.log", "stdout.log"):
            path = self.workdir / name
            if path.exists():
                out += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)


class ControllerQuorum:
    """`voters` Kafka controllers (node ids first_id, first_id+1, ...) formatted as one dynamic quorum."""

    def __init__(
        self,
        workdir: Path,
        *,
        voters: int = 1,
        first_id: int = 3000,
        features: dict[str, int] | None = None,
        jars: Path = KAFKA_JARS,
        java: str | None = None,
        start_timeout: float = 60.0,
        properties: dict[str, str] | None = None,
    ) -> None:
        if voters < 1:
            raise ValueError("a quorum needs at least one voter")
        self.workdir = Path(workdir)
        self.jars = jars
        self.java = java or shutil.which("java") or "java"
        self.features = dict(FEATURES if features is None else features)
        self.start_timeout = start_timeout
        self.extra_properties = dict(properties or {})  # more controller settings, Kafka's names
        self.cluster_id = random_uuid_base64()
        self.controllers = [
            Controller(
                first_id + i, _free_port(), self.workdir / f"controller-{first_id + i}", random_uuid_base64()
            )
            for i in range(voters)
        ]

    @staticmethod
    def available(jars: Path = KAFKA_JARS) -> str | None:
        """None when Kafka controllers can run here, else why not."""
        if not any(jars.glob("kafka_2.13-*.jar")):
            return f"no Kafka jars in {jars} (`bash tools/setup-test-deps.sh --only kafka` fetches just them with Maven)"
        if shutil.which("java") is None:
            return "java is not on PATH"
        return None

    @property
    def bootstrap_servers(self) -> str:
        """The value for a broker's controller.quorum.bootstrap.servers."""
        return ",".join(c.endpoint for c in self.controllers)

    @property
    def voter_ids(self) -> list[int]:
        return [c.node_id for c in self.controllers]

    def properties(self, c: Controller) -> dict[str, str]:
        return {
            "process.roles": "controller",
            "node.id": str(c.node_id),
            "controller.quorum.bootstrap.servers": self.bootstrap_servers,
            "listeners": f"CONTROLLER://{c.endpoint}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            "log.dirs": str(c.log_dir),
            **self.extra_properties,
        }

    def _java(self, jvm: list[str], main: str, *args: str) -> list[str]:
        return [self.java, *jvm, "-cp", str(self.jars / "*"), main, *args]

    def _write_config(self, c: Controller) -> Path:
        c.workdir.mkdir(parents=True, exist_ok=True)
        path = c.workdir / "controller.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties(c).items()))
        (c.workdir / "log4j2.properties").write_text(_LOG4J2.format(log=c.log_file))
        return path

    def format(self) -> None:
        """kafka-storage format every controller's metadata dir (kafka.tools.StorageTool in 4.3)."""
        if len(self.controllers) == 1:
            quorum = ["--standalone"]
        else:
            quorum = [
                "--initial-controllers",
                ",".join(f"{c.node_id}@{c.endpoint}:{c.directory_id}" for c in self.controllers),
            ]
        features = [arg for name, level in self.features.items() for arg in ("--feature", f"{name}={level}")]
        for c in self.controllers:
            config = self._write_config(c)
            result = subprocess.run(
                self._java(
                    TOOL_JVM,
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    self.cluster_id,
                    "-c",
                    str(config),
                    *quorum,
                    *features,
                ),
                capture_output=True,
                text=True,
                timeout=120,
            )
            if result.returncode != 0:
                raise ControllerStartError(f"kafka-storage format failed:\n{result.stdout}\n{result.stderr}")

    def format_broker(self, log_dir: Path, node_id: int) -> None:
        """`kafka-storage format` a broker's log dir for this cluster, as a Kafka operator would."""
        log_dir.mkdir(parents=True, exist_ok=True)
        config = log_dir.parent / f"broker-{node_id}.properties"
        config.write_text(
            "".join(
                f"{k}={v}\n"
                for k, v in {
                    "process.roles": "broker",
                    "node.id": str(node_id),
                    "controller.quorum.bootstrap.servers": self.bootstrap_servers,
                    "controller.listener.names": "CONTROLLER",
                    "listeners": f"PLAINTEXT://{HOST}:0",
                    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    "log.dirs": str(log_dir),
                }.items()
            )
        )
        result = subprocess.run(
            self._java(
                TOOL_JVM, "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(config)
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise ControllerStartError(
                f"kafka-storage format (broker) failed:\n{result.stdout}\n{result.stderr}"
            )

    def launch(self, c: Controller) -> None:
        """Start controller `c`'s process (formatted already), without waiting for it: also a restart
        after `kill`, as a fault test does."""
        jvm = [*CONTROLLER_JVM, f"-Dlog4j2.configurationFile={c.workdir / 'log4j2.properties'}"]
        with (c.workdir / "stdout.log").open("ab") as out:  # the child has its own copy of the fd
            c.process = subprocess.Popen(
                self._java(jvm, "kafka.Kafka", str(c.workdir / "controller.properties")),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def kill(self, c: Controller) -> None:
        """kill -9 of controller `c` (a fault test's)."""
        if c.process is not None and c.process.poll() is None:
            os.killpg(c.process.pid, signal.SIGKILL)
            c.process.wait()

    def start(self) -> None:
        self.format()
        for c in self.controllers:
            self.launch(c)
        deadline = time.monotonic() + self.start_timeout
        for c in self.controllers:
            while not answers_api_versions(HOST, c.port, timeout=1.0):
                assert c.process is not None
                if c.process.poll() is not None:
                    self.stop()
                    raise ControllerStartError(
                        f"controller {c.node_id} exited {c.process.returncode}:\n{c.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    self.stop()
                    raise ControllerStartError(
                        f"controller {c.node_id} not ready in {self.start_timeout}s:\n{c.log_tail()}"
                    )
                time.sleep(0.1)

    def stop(self, timeout: float = 20.0) -> None:
        for c in self.controllers:
            if c.process is not None and c.process.poll() is None:
                os.killpg(c.process.pid, signal.SIGTERM)
        for c in self.controllers:
            if c.process is None:
                continue
            try:
                c.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(c.process.pid, signal.SIGKILL)
                c.process.wait()

    def __enter__(self) -> ControllerQuorum:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def broker_properties(quorum: ControllerQuorum, node_id: int, data_dir: Path, port: int) -> dict[str, str]:
    """A kcompat broker's cluster-mode settings under `quorum` (Kafka's names)."""
    return {
        "process.roles": "broker",
        "node.id": str(node_id),
        "cluster.id": quorum.cluster_id,
        "controller.quorum.bootstrap.servers": quorum.bootstrap_servers,
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://{HOST}:{port}",
        "log.dirs": str(data_dir),
        "broker.heartbeat.interval.ms": "500",
    }


@dataclass
class BrokerProcess:
    """One `kcompat serve` in cluster mode, its output in `<workdir>/broker-<id>.log`."""

    node_id: int
    port: int
    data_dir: Path
    log_file: Path
    process: subprocess.Popen[bytes] | None = None
    admin_port: int = 0  # its admin listener (console and /metrics): brokers side by side need one each

    @property
    def endpoint(self) -> str:
        return f"{HOST}:{self.port}"


class DevCluster:
    """One Kafka controller and `brokers` kcompat brokers (node ids 1..N), all on 127.0.0.1."""

    def __init__(
        self,
        workdir: Path,
        *,
        brokers: int = 3,
        jars: Path | None = None,
        overrides: dict[str, str] | None = None,
        python: str = sys.executable,
        start_timeout: float = 60.0,
    ) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.workdir = Path(workdir)
        self.quorum = ControllerQuorum(self.workdir / "quorum", voters=1, jars=jars or kafka_jars())
        self.python = python
        self.start_timeout = start_timeout
        # __consumer_offsets cannot have more replicas than there are brokers
        self.overrides = {"offsets.topic.replication.factor": str(min(3, brokers)), **(overrides or {})}
        self.brokers = [
            BrokerProcess(
                i,
                _free_port(),
                self.workdir / f"broker-{i}" / "data",
                self.workdir / f"broker-{i}.log",
                admin_port=_free_port(),
            )
            for i in range(1, brokers + 1)
        ]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.endpoint for b in self.brokers)

    @property
    def pids(self) -> list[int]:
        """Every process of the cluster (controllers first)."""
        procs = [c.process for c in self.quorum.controllers] + [b.process for b in self.brokers]
        return [p.pid for p in procs if p is not None]

    @property
    def console_urls(self) -> list[str]:
        """Each broker's web console and /metrics (unless admin.listener was overridden)."""
        if "admin.listener" in self.overrides:
            return []
        return [f"http://{HOST}:{b.admin_port}" for b in self.brokers]

    def command(self, b: BrokerProcess) -> list[str]:
        props = {
            **broker_properties(self.quorum, b.node_id, b.data_dir, b.port),
            "admin.listener": f"{HOST}:{b.admin_port}",
            **self.overrides,
        }
        return [
            self.python,
            "-m",
            "kcompat",
            "serve",
            *(a for k, v in props.items() for a in ("--override", f"{k}={v}")),
        ]

    def start(self) -> None:
        self.quorum.start()
        try:
            for b in self.brokers:
                b.data_dir.mkdir(parents=True, exist_ok=True)
                with b.log_file.open("ab") as out:
                    b.process = subprocess.Popen(
                        self.command(b),
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
            deadline = time.monotonic() + self.start_timeout
            for b in self.brokers:
                while not answers_api_versions(HOST, b.port, timeout=1.0):
                    assert b.process is not None
                    if b.process.poll() is not None or time.monotonic() > deadline:
                        tail = "\n".join(b.log_file.read_text(errors="replace").splitlines()[-40:])
                        raise ControllerStartError(f"kcompat broker {b.node_id} did not start:\n{tail}")
                    time.sleep(0.1)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM every broker (a controlled shutdown each), then the controllers."""
        for b in self.brokers:
            if b.process is not None and b.process.poll() is None:
                os.killpg(b.process.pid, signal.SIGTERM)
        for b in self.brokers:
            if b.process is None:
                continue
            try:
                b.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(b.process.pid, signal.SIGKILL)
                b.process.wait()
        self.quorum.stop()

    def __enter__(self) -> DevCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
