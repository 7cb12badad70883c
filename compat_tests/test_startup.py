"""Start-up as a user meets it: the log dir lock, Kafka's own server.properties, readiness, and
the log dirs DescribeLogDirs names.

* A second `kcompat serve` on a running broker's log dir refuses with one line naming the dir and
  the holder's pid, exit 1, and leaves the dir as it was; after a kill -9 of the holder the lock is
  gone and a new broker recovers every acknowledged record. The lock is the one Kafka takes
  (compat_tests/java/TryDirLock.java does FileChannel.tryLock): a JVM holding it stops kcompat, and
  a running kcompat makes the JVM's tryLock fail.
* The settings of Kafka 4.x's config/server.properties (KRaft combined mode) start kcompat as they
  are, with only the ports and log.dirs moved; the controller listener is said to be skipped once.
* After a kill -9 with enough data that recovery takes a while, a client that connects during
  recovery gets its first answer only once the broker has logged that it is listening.
* DescribeLogDirs answers with absolute paths when log.dirs is relative.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from support import default_admin_port_taken, java_executable

from compat_tests.crash.ledger import read_topic
from kcompat.testing import Broker, BrokerFactory, api_versions_ready, free_port, recv_exact

pytestmark = pytest.mark.timeout(300)
BULK_RECORDS = 100_000


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def produce_acked(bootstrap: str, topic: str, count: int, value_size: int = 100, **conf: object) -> int:
    """Produce `count` records with acks=all; returns how many were acknowledged without error."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **conf})
    acked = 0
    failed: list[str] = []

    def done(err: object, _msg: object) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            failed.append(str(err))

    for i in range(count):
        while True:
            try:
                p.produce(
                    topic, key=str(i).encode(), value=str(i).encode().ljust(value_size, b"."), callback=done
                )
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    assert not failed, failed[:3]
    return acked


def dir_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and mtime (ns)."""
    state = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            st = path.stat()
            state[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return state


def test_second_broker_on_a_live_log_dir_refuses_and_kill9_frees_the_lock(
    kcompat_broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    first = kcompat_broker_factory()
    create_topic(first.bootstrap, "locked", 3)
    assert produce_acked(first.bootstrap, "locked", 500) == 500
    before = dir_state(first.data_dir)
    assert ".lock" in before

    second = Broker(first.data_dir, tmp_path / "second.log")  # same log dir, its own free port
    started = time.monotonic()
    result = subprocess.run(
        second.command(), capture_output=True, text=True, timeout=60, env=second._env(), cwd=tmp_path
    )
    took = time.monotonic() - started
    print(f"second broker refused in {took * 1000:.0f} ms: {result.stderr.strip()}")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line or "Traceback" in line]
    assert len(errors) == 1, result.stderr
    assert (
        f"log dir {first.data_dir} is in use by another broker process (pid {first.process.pid})" in errors[0]
    )
    assert "recover" not in result.stderr and "listening on" not in result.stderr
    assert not api_versions_ready(second.host, second.port, timeout=0.5)  # it never served
    # Nothing in the dir changed: no recovery, no checkpoint, no clean-shutdown marker.
    assert dir_state(first.data_dir) == before
    assert not (first.data_dir / ".kafka_cleanshutdown").exists()
    assert first.running and api_versions_ready(first.host, first.port)

    # The lock does not outlive its process: after kill -9 a new broker starts on the same dir
    # and every acknowledged record is there.
    first.restart(clean=False)
    stored = read_topic(first.bootstrap, "locked", 3)
    keys = sorted(int(r.key) for records in stored.values() for r in records)
    assert keys == list(range(500))
    for records in stored.values():
        assert [r.offset for r in records] == list(range(len(records)))


# Kafka 4.x's config/server.properties (KRaft combined mode), setting by setting.
KAFKA_SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_kafka_combined_mode_server_properties_starts_as_it_is(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(KAFKA_SERVER_PROPERTIES)
    port, controller_port, admin_port = free_port(), free_port(), free_port()
    cmd = [
        sys.executable, "-m", "kcompat", "serve", str(props),
        "--override", f"listeners=PLAINTEXT://:{port},CONTROLLER://:{controller_port}",
        "--override", f"advertised.listeners=PLAINTEXT://localhost:{port},CONTROLLER://localhost:{controller_port}",
        "--override", f"log.dirs={tmp_path / 'kraft-combined-logs'}",
        # kcompat's own listener too: its default port (9644) may be another broker's, as with
        # `make run` beside the tests (held below), and then it would warn.
        "--override", f"admin.listener=127.0.0.1:{admin_port}",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    log_path = tmp_path / "broker.log"
    with default_admin_port_taken():  # as a `make run` beside the tests holds it
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 30
            while not api_versions_ready("127.0.0.1", port):
                assert proc.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.05)
            # A real client round trip through the advertised PLAINTEXT listener (localhost).
            create_topic(f"localhost:{port}", "from-kafka-config", 1)
            assert produce_acked(f"localhost:{port}", "from-kafka-config", 10) == 10
            text = log_path.read_text()
            skipped = [line for line in text.splitlines() if "controller listener" in line]
            assert (
                len(skipped) == 1
                and " INFO " in skipped[0]
                and f"CONTROLLER://:{controller_port}" in skipped[0]
            )
            assert " ERROR " not in text and " WARNING " not in text, text
            assert f"metrics at http://127.0.0.1:{admin_port}/metrics" in text, text
            with socket.socket() as s:  # the controller port is not opened
                assert s.connect_ex(("127.0.0.1", controller_port)) != 0
        finally:
            proc.terminate()
            assert proc.wait(30) == 0


def _api_versions_v0(correlation_id: int) -> bytes:
    client_id = b"startup-probe"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def test_connections_are_answered_only_once_recovery_is_done(
    kcompat_broker_factory: BrokerFactory,
) -> None:
    broker = kcompat_broker_factory()
    create_topic(broker.bootstrap, "bulk", 8)
    # Enough batches that recovery after kill -9 takes a measurable time: it re-reads every batch
    # written since the last recovery point, so one record per batch.
    started = time.monotonic()
    produce_acked(
        broker.bootstrap, "bulk", BULK_RECORDS, value_size=10, **{"batch.num.messages": 1, "linger.ms": 0}
    )
    print(f"produced {BULK_RECORDS} one-record batches in {time.monotonic() - started:.1f} s")
    broker.kill()

    launched = time.monotonic()
    with open(broker.log_path, "ab") as out:
        offset = out.tell()
        broker.process = subprocess.Popen(
            broker.command(),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=broker._env(),
            cwd=broker.data_dir.parent,
        )
    # Connect as early as the port accepts a TCP connection, then ask.
    deadline = launched + 60
    while True:
        assert time.monotonic() < deadline and broker.running
        try:
            sock = socket.create_connection((broker.host, broker.port), timeout=60)
            break
        except ConnectionRefusedError:
            time.sleep(0.005)
    connected = time.monotonic()
    with sock:
        sock.sendall(_api_versions_v0(7))
        size, correlation = struct.unpack(">ii", recv_exact(sock, 8))
        answered = time.monotonic()
        assert correlation == 7 and size > 4
        log_then = broker.log_path.read_bytes()[offset:].decode(errors="replace")
    started = [line for line in log_then.splitlines() if "listening on" in line]
    recovered = [line for line in log_then.splitlines() if "recover" in line.lower()]
    print(
        f"connected {1000 * (connected - launched):.0f} ms after launch, first answer at "
        f"{1000 * (answered - launched):.0f} ms; broker said: {started[0].split(': ', 1)[-1] if started else '-'}"
    )
    # The answer came after the broker logged it was listening (the log line is written before
    # accepting starts) ...
    assert len(started) == 1, log_then
    # ... and the connection was made well before that, during recovery: the test saw the window.
    assert recovered, log_then
    assert answered - connected > 0.2, (connected - launched, answered - launched)


class _RelativeDirBroker(Broker):
    """A broker started with log.dirs relative to its working directory."""

    def command(self) -> list[str]:
        return [
            arg.replace(f"log.dirs={self.data_dir}", f"log.dirs={self.data_dir.name}")
            for arg in super().command()
        ]


def test_describe_log_dirs_names_absolute_paths(tmp_path: Path) -> None:
    broker = _RelativeDirBroker(tmp_path / "relative-data", tmp_path / "relative.log")
    assert f"log.dirs={broker.data_dir.name}" in " ".join(broker.command())
    broker.start()
    try:
        create_topic(broker.bootstrap, "where", 2)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            response = admin.describe_log_dirs()
        finally:
            admin.close()
        (answer,) = response  # one broker
        dirs = [entry["log_dir"] for entry in answer["log_dirs"]]
        print(f"log.dirs={broker.data_dir.name} (relative) -> DescribeLogDirs: {dirs}")
        assert dirs == [str(broker.data_dir)]
        assert Path(dirs[0]).is_absolute()
        assert answer["log_dirs"][0]["error_code"] == 0
        assert "where" in {t["name"] for t in answer["log_dirs"][0]["topics"]}
    finally:
        assert broker.stop() == 0


JAVA_LOCK = Path(__file__).parent / "java" / "TryDirLock.java"


def java_try_lock(directory: Path) -> subprocess.Popen[str]:
    """A JVM that takes `directory`/.lock as Kafka's broker does; its first line says how it went."""
    return subprocess.Popen(
        [java_executable(), str(JAVA_LOCK), str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_kcompat_and_kafka_exclude_each_other_on_a_log_dir(
    kcompat_broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    # A dir held the way Kafka holds it (FileChannel.tryLock): kcompat refuses, naming the JVM's pid.
    held = tmp_path / "held-by-java"
    held.mkdir()
    with java_try_lock(held) as jvm:  # its exit closes the JVM's pipes and waits for it
        try:
            assert jvm.stdout is not None and jvm.stdout.readline().strip() == "locked"
            refused = Broker(held, tmp_path / "refused.log")
            result = subprocess.run(
                refused.command(), capture_output=True, text=True, timeout=60, env=refused._env()
            )
            assert result.returncode == 1, result.stderr
            assert f"log dir {held} is in use by another broker process (pid {jvm.pid})" in result.stderr
        finally:
            assert jvm.stdin is not None
            jvm.stdin.close()
            jvm.wait(30)
    assert not (held / "meta.properties").exists()

    # A dir a running kcompat holds: Kafka's tryLock finds it taken.
    broker = kcompat_broker_factory()
    jvm = java_try_lock(broker.data_dir)
    out, _ = jvm.communicate(timeout=60)
    assert out.strip() == "busy"
