"""Helpers shared by the compatibility tests (fixtures live in conftest.py, which pytest loads;
tests import these from here): Apache Kafka's command-line tools and the Java clients, run from the
jars tools/setup-test-deps.sh resolves into .deps/ (`make test` runs it), and cluster-mode brokers.

`kafka_tool(name, *args)` runs `java -cp '.deps/kafka/*' <main class> args...` (no wrapper scripts of
Kafka's are needed) and fails the test with the tool's output when it exits non-zero.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from kcompat.testing import Broker, free_port
from kcompat.testing_cluster import ControllerQuorum

ROOT = Path(__file__).resolve().parent.parent
DEPS = ROOT / ".deps"
KAFKA_JARS = DEPS / "kafka"  # Apache Kafka 4.x broker, tools and their dependencies
KAFKA_CLIENTS_39_JARS = DEPS / "kafka-clients-3.9"  # the Java client line Spark 4 uses
SETUP_HINT = "run `bash tools/setup-test-deps.sh` (make test does) to install it"

# Kafka's bin/*.sh scripts name these main classes (Kafka 4.3; tools moved from kafka.* in core
# to org.apache.kafka.tools.* over the 3.x/4.x releases).
KAFKA_TOOLS: dict[str, str] = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-verifiable-share-consumer": "org.apache.kafka.tools.VerifiableShareConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-server-start": "kafka.Kafka",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
}

# Short-lived tools start faster with the client JIT only and a serial GC (2 shared cores).
QUICK_JVM = ["-Xms32m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
# Throughput-measuring or long-running ones get the full JIT.
FULL_JVM = ["-Xms256m", "-Xmx1g", "-Djava.awt.headless=true"]
_FULL_JIT_TOOLS = {"kafka-producer-perf-test", "kafka-consumer-perf-test", "kafka-server-start"}


def java_classpath(folder: Path = KAFKA_JARS) -> str:
    """`folder/*` for java -cp; fails the test clearly when the jars were never installed."""
    if not any(folder.glob("*.jar")):
        pytest.fail(f"no jars in {folder}: {SETUP_HINT}", pytrace=False)
    return str(folder / "*")


def java_executable() -> str:
    java = shutil.which("java")
    if java is None:
        pytest.fail(f"java is not on PATH: {SETUP_HINT}", pytrace=False)
    return java


def kafka_tool_command(name: str, *args: str, jvm_opts: Sequence[str] | None = None) -> list[str]:
    """The java command line that runs Kafka tool `name` (a key of KAFKA_TOOLS) with `args`."""
    if name not in KAFKA_TOOLS:
        raise KeyError(f"unknown Kafka tool {name!r}; known: {', '.join(sorted(KAFKA_TOOLS))}")
    opts = list(jvm_opts) if jvm_opts is not None else (FULL_JVM if name in _FULL_JIT_TOOLS else QUICK_JVM)
    return [java_executable(), *opts, "-cp", java_classpath(KAFKA_JARS), KAFKA_TOOLS[name], *args]


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def kafka_tool(
    name: str,
    *args: str,
    input: str | None = None,
    timeout: float = 120,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    jvm_opts: Sequence[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a Kafka command-line tool to completion; with `check`, a non-zero exit fails the test
    showing the command and its output."""
    cmd = kafka_tool_command(name, *args, jvm_opts=jvm_opts)
    try:
        result = subprocess.run(
            cmd,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=None if env is None else dict(env),
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise AssertionError(
            f"{name} did not finish within {timeout}s: {' '.join(args)}\n--- stdout\n{_tail(out)}\n--- stderr\n{_tail(err)}"
        ) from None
    if check and result.returncode != 0:
        raise AssertionError(
            f"{name} exited with {result.returncode}: {' '.join(args)}\n"
            f"--- stdout\n{_tail(result.stdout)}\n--- stderr\n{_tail(result.stderr)}"
        )
    return result


def kcat_executable() -> str:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.fail(f"kcat is not on PATH: {SETUP_HINT}", pytrace=False)
    return kcat


ReportFigure = Callable[[str, str], None]  # the report_figure fixture: (name, text)

DEFAULT_ADMIN_PORT = 9644  # admin.listener's default (127.0.0.1:9644), held by a developer's `make run`


@contextmanager
def default_admin_port_taken() -> Iterator[None]:
    """127.0.0.1:9644 held for the duration, as a `make run` beside the tests holds it (when
    something else already has it, it is taken all the same)."""
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            held.bind(("127.0.0.1", DEFAULT_ADMIN_PORT))
            held.listen(1)
        except OSError:
            pass
        yield


# -- cluster mode: `kcompat serve` brokers under a real Kafka controller quorum -------------------

ClusterBrokerFactory = Callable[..., Broker]  # the cluster_broker_factory fixture


def cluster_broker(quorum: ControllerQuorum, base: Path, node_id: int, **overrides: str) -> Broker:
    """A (not yet started) `kcompat serve` in cluster mode under `quorum`: data in base/data-<id>,
    its log in base/kcompat-<id>.log; `overrides` are more properties (Kafka's names)."""
    return Broker(
        base / f"data-{node_id}",
        base / f"kcompat-{node_id}.log",
        overrides={
            "process.roles": "broker",
            "node.id": str(node_id),
            "cluster.id": quorum.cluster_id,
            "controller.quorum.bootstrap.servers": quorum.bootstrap_servers,
            "controller.listener.names": "CONTROLLER",
            "broker.heartbeat.interval.ms": "500",
            **overrides,
        },
    )


def log_has(broker: Broker, text: str) -> bool:
    return text in broker.logs()


def scram_broker(base: Path, users: Mapping[str, str], props: Mapping[str, str]) -> Broker:
    """A started broker with a SASL_PLAINTEXT listener (beside its PLAINTEXT one) whose SCRAM-SHA-512
    credentials for `users` (name: password) are stored before it starts, as `kcompat serve --add-scram` does."""
    scram = [a for u, pw in users.items() for a in ("--add-scram", f"SCRAM-SHA-512=[name={u},password={pw}]")]
    b = Broker(
        base / "data",
        base / "kcompat.log",
        overrides=dict(props),
        listeners={"SASL_PLAINTEXT": free_port()},
        args=scram,
    )
    b.start()
    return b
