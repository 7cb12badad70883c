"""The clusters the cluster suite compares, each on one Kafka 4.3.1 KRaft controller of its own:

    KcompatCluster(workdir, brokers=3)   `kcompat serve` brokers in cluster mode (testing_cluster.DevCluster)
    KafkaCluster(workdir, brokers=3)     Apache Kafka 4.3.1 brokers (process.roles=broker) from .deps/kafka,
                                         started as kafka-server-start.sh starts them (1 GiB heap, G1)

Both get the same controller (and so the same broker.session.timeout.ms, which decides the
failover time after a kill -9), the same heartbeat interval and the same topic defaults; node ids
1..N. `start()` returns seconds from the controller's format to every broker answering ApiVersions
(Kafka's brokers also run kafka-storage format, one JVM each, within that time).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from benchmarks.brokers import KAFKA_HEAP, KAFKA_JVM_PERFORMANCE, free_port
from kcompat.testing_cluster import HOST, KAFKA_JARS, ControllerQuorum, DevCluster, answers_api_versions

SESSION_TIMEOUT_MS = 9000  # Kafka's default broker.session.timeout.ms, for the controller and brokers
HEARTBEAT_MS = 500
START_TIMEOUT_S = 120.0
# The same broker settings for both kinds (Kafka's names); replica.lag.time.max.ms is Kafka's default.
BROKER_COMMON = {
    "broker.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "group.initial.rebalance.delay.ms": "0",
}

# Kafka's brokers log to <workdir>/broker-N/server.log at INFO (as kafka-server-start.sh would).
LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
"""


class Cluster:
    name = "?"
    size = 0

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def pids(self) -> dict[int, int]:
        """node id -> pid of each running broker."""
        raise NotImplementedError

    def start(self) -> float:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def kill(self, node_id: int) -> None:
        os.kill(self.pids()[node_id], signal.SIGKILL)


class KcompatCluster(Cluster):
    name = "kcompat"

    def __init__(self, workdir: Path, brokers: int = 3) -> None:
        self.size = brokers
        self.dev = DevCluster(
            workdir, brokers=brokers, overrides=BROKER_COMMON, start_timeout=START_TIMEOUT_S
        )
        self.dev.quorum.extra_properties["broker.session.timeout.ms"] = str(SESSION_TIMEOUT_MS)

    @property
    def bootstrap(self) -> str:
        return self.dev.bootstrap_servers

    def pids(self) -> dict[int, int]:
        return {b.node_id: b.process.pid for b in self.dev.brokers if b.process and b.process.poll() is None}

    def start(self) -> float:
        t0 = time.perf_counter()
        self.dev.start()
        return time.perf_counter() - t0

    def stop(self) -> None:
        self.dev.stop()


class KafkaCluster(Cluster):
    name = "kafka"

    def __init__(self, workdir: Path, brokers: int = 3) -> None:
        self.size = brokers
        self.workdir = workdir
        self.quorum = ControllerQuorum(
            workdir / "quorum", voters=1, properties={"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
        )
        self.ports = {i: free_port() for i in range(1, brokers + 1)}
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{p}" for p in self.ports.values())

    def pids(self) -> dict[int, int]:
        return {i: p.pid for i, p in self.processes.items() if p.poll() is None}

    def _properties(self, node_id: int, data: Path) -> dict[str, str]:
        return {
            "process.roles": "broker", "node.id": str(node_id),
            "controller.quorum.bootstrap.servers": self.quorum.bootstrap_servers,
            "controller.listener.names": "CONTROLLER", "listeners": f"PLAINTEXT://{HOST}:{self.ports[node_id]}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(data), "offsets.topic.replication.factor": str(min(3, self.size)),
            **BROKER_COMMON,
        }  # fmt: skip

    def start(self) -> float:
        t0 = time.perf_counter()
        self.quorum.start()
        java = shutil.which("java") or "java"
        commands = {}
        for node_id in self.ports:
            home = self.workdir / f"broker-{node_id}"
            self.quorum.format_broker(home / "data", node_id)  # Kafka's own kafka-storage format
            props = home / "server.properties"
            (home / "log4j2.properties").write_text(LOG4J2.format(log=home / "server.log"))
            props.write_text(
                "".join(f"{k}={v}\n" for k, v in self._properties(node_id, home / "data").items())
            )
            log4j = f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}"
            commands[node_id] = [java, *KAFKA_HEAP, *KAFKA_JVM_PERFORMANCE, log4j, "-cp", str(KAFKA_JARS / "*"),
                                 "kafka.Kafka", str(props)]  # fmt: skip
        try:
            for node_id, command in commands.items():
                with (self.workdir / f"broker-{node_id}" / "stdout.log").open("wb") as out:
                    self.processes[node_id] = subprocess.Popen(
                        command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )  # fmt: skip
            deadline = time.monotonic() + START_TIMEOUT_S
            for node_id, port in self.ports.items():
                while not answers_api_versions(HOST, port, timeout=1.0):
                    if self.processes[node_id].poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"Kafka broker {node_id} did not start")
                    time.sleep(0.1)
        except BaseException:
            self.stop()
            raise
        return time.perf_counter() - t0

    def stop(self) -> None:
        for p in self.processes.values():
            if p.poll() is None:
                p.terminate()
        for p in self.processes.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.quorum.stop()
