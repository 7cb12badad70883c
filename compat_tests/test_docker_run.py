"""The image's start script (docker/run, installed at /etc/kafka/docker/run) run outside a
container, since no Docker engine runs here: once exactly as Testcontainers' KafkaContainer runs it
(its environment, its `sh -c` wait loop and its bash starter script exporting
KAFKA_ADVERTISED_LISTENERS, container ports mapped to free 127.0.0.1 ports), and once with no
configuration at all, as `docker run -p 9092:9092 IMAGE` does. Each time records go through it.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from kcompat.testing import free_port

ROOT = Path(__file__).resolve().parent.parent
RUN_SCRIPT = ROOT / "docker" / "run"
READY_LINE = "Transitioning from RECOVERY to RUNNING"  # KafkaHelper.WAIT_STRATEGY's pattern
_SCRIPT = Path(sys.executable).parent / "kcompat"
KCOMPAT = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "kcompat"]

pytestmark = pytest.mark.timeout(180)


def kafka_container_env(plaintext: int, broker: int, controller: int) -> dict[str, str]:
    """KafkaHelper.envVars() of testcontainers-java's kafka module, the container ports 9092/9093/9094
    replaced by free ones (a container has its own network namespace; this machine does not)."""
    return {
        "CLUSTER_ID": "4L6g3nShT-eMCtK--X86sw",
        "KAFKA_LISTENERS": f"PLAINTEXT://:{plaintext},BROKER://:{broker},CONTROLLER://:{controller}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "BROKER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "BROKER",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_NODE_ID": "1",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_LOG_FLUSH_INTERVAL_MESSAGES": str(2**63 - 1),
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
    }


def base_env(data_dir: Path) -> dict[str, str]:
    """What a container's process would see besides the image's ENV: no KAFKA_* from this shell."""
    keep = ("PATH", "HOME", "PYTHONPATH", "LANG", "LC_ALL", "TMPDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env["KCOMPAT_DATA_DIR"] = str(data_dir)  # /var/lib/kafka/data inside the image
    env["KCOMPAT_PROBE_FILE"] = str(data_dir.parent / "kcompat.probe")  # /tmp/kcompat.probe
    env["KCOMPAT_MOUNTED_CONFIG_DIR"] = str(data_dir.parent / "mnt-shared-config")  # /mnt/shared/config
    env["KCOMPAT_SECRETS_DIR"] = str(data_dir.parent / "secrets")  # /etc/kafka/secrets
    # The admin listener's port (127.0.0.1:9644) is the container's own; here it may be another
    # broker's (a `make run` beside the tests), so it moves to a free one, as the other ports do.
    env["KAFKA_ADMIN_LISTENER"] = f"127.0.0.1:{free_port()}"
    return env


class Started:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:  # closed at the end of the output, not left to the garbage collector
            for line in self.process.stdout:
                self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            if self.process.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        pytest.fail(
            f"no line with {text!r} (exit {self.process.poll()}); output:\n" + "\n".join(self.lines),
            pytrace=False,
        )

    def stop(self, *, group: bool = False) -> int:
        """SIGTERM to the first process, as `docker stop` sends it to the container's PID 1 (or to
        every process of the group); the exit code of that first process."""
        if self.process.poll() is None:
            if group:
                os.killpg(self.process.pid, signal.SIGTERM)
            else:
                self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            pytest.fail("the broker did not stop within 30 s of SIGTERM", pytrace=False)


def start(command: list[str], env: dict[str, str], cwd: Path) -> Started:
    process = subprocess.Popen(
        command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    return Started(process)


def kc(bootstrap: str, *args: str, input: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    result = subprocess.run(
        [*KCOMPAT, *args, "--brokers", bootstrap],
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def roundtrip(bootstrap: str) -> dict[str, object]:
    """Create a topic, produce 200 lines and read them back; the cluster's self-description."""
    kc(bootstrap, "topic", "create", "through-run", "-p", "2")
    lines = [f"record {i}" for i in range(200)]
    kc(bootstrap, "produce", "through-run", input="\n".join(lines) + "\n")
    assert sorted(kc(bootstrap, "consume", "through-run").splitlines()) == sorted(lines)
    info: dict[str, object] = json.loads(kc(bootstrap, "cluster", "info", "--format", "json"))
    return info


@pytest.fixture
def started() -> Iterator[list[Started]]:
    running: list[Started] = []
    yield running
    for s in running:
        if s.process.poll() is None:
            s.stop()
        s.process.wait()
        s._reader.join(30)  # its `with` closes the pipe at EOF


def test_as_testcontainers_kafka_module_runs_it(tmp_path: Path, started: list[Started]) -> None:
    plaintext, broker, controller = free_port(), free_port(), free_port()
    env = {**base_env(tmp_path / "data"), **kafka_container_env(plaintext, broker, controller)}
    # KafkaContainer.containerIsStarting writes this starter script once the container runs:
    # PLAINTEXT advertises the mapped host port, BROKER the container's hostname and port 9093.
    starter = tmp_path / "testcontainers_start.sh"
    command = ["sh", "-c", f"while [ ! -f {starter} ]; do sleep 0.1; done; {starter}"]
    started.append(s := start(command, env, tmp_path))
    advertised = f"PLAINTEXT://127.0.0.1:{plaintext},BROKER://{socket.gethostname()}:{broker}"
    # Whole and executable before the loop can see it: written under another name, then renamed
    # (the loop may otherwise run it between the write and the chmod: "Permission denied").
    partial = starter.with_name(starter.name + ".partial")
    partial.write_text(f"#!/bin/bash\nexport KAFKA_ADVERTISED_LISTENERS={advertised}\n{RUN_SCRIPT} \n")
    partial.chmod(0o777)
    partial.rename(starter)

    s.wait_for_line(READY_LINE)
    info = roundtrip(f"127.0.0.1:{plaintext}")
    assert info["cluster_id"] == "4L6g3nShT-eMCtK--X86sw"
    assert info["brokers"] == [{"node_id": 1, "host": "127.0.0.1", "port": plaintext, "rack": None}]
    assert any(f"data in {tmp_path / 'data'}" in line for line in s.lines)
    # The controller listener is Kafka's KRaft quorum port: kcompat runs no quorum and does not open it.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", controller), timeout=2).close()
    # Testcontainers removes the container; a signal to all its processes still stops the broker cleanly.
    s.stop(group=True)
    s._reader.join(10)
    assert any("kcompat stopped" in line for line in s.lines), "\n".join(s.lines)


def test_with_no_environment_it_serves_localhost_9092(tmp_path: Path, started: list[Started]) -> None:
    port = free_port()
    env = {**base_env(tmp_path / "data"), "KCOMPAT_PORT": str(port)}  # 9092 inside the image
    started.append(s := start([str(RUN_SCRIPT)], env, tmp_path))
    s.wait_for_line(READY_LINE)
    assert any(f"listening on PLAINTEXT://0.0.0.0:{port}" in line for line in s.lines), "\n".join(s.lines)
    info = roundtrip(f"127.0.0.1:{port}")  # `localhost` as advertised resolves to this same socket
    assert info["brokers"] == [{"node_id": 1, "host": "localhost", "port": port, "rack": None}]
    assert (tmp_path / "data").is_dir()
    # `docker stop`: SIGTERM to the run script alone, which hands it to the broker and exits with it.
    assert s.stop() == 0
    s._reader.join(10)
    assert any("kcompat stopped" in line for line in s.lines), "\n".join(s.lines)


def test_a_bad_setting_exits_1_without_the_ready_line(tmp_path: Path, started: list[Started]) -> None:
    env = {**base_env(tmp_path / "data"), "KCOMPAT_PORT": str(free_port()), "KAFKA_NUM_PARTITIONS": "many"}
    started.append(s := start([str(RUN_SCRIPT)], env, tmp_path))
    assert s.process.wait(30) == 1
    s._reader.join(5)
    assert not any(READY_LINE in line for line in s.lines)
    assert any("invalid configuration: num.partitions='many'" in line for line in s.lines)


def compose_environment() -> dict[str, str]:
    """docker/compose.yaml's `environment:` mapping (read as text, as tests/test_docker_files.py does)."""
    lines = [
        line.split("#")[0].rstrip() for line in (ROOT / "docker" / "compose.yaml").read_text().splitlines()
    ]
    start = lines.index("    environment:") + 1
    env = {}
    for line in lines[start:]:
        if not line.startswith("      ") or ": " not in line:
            break
        key, value = line.strip().split(": ", 1)
        env[key] = value.strip('"')
    return env


def healthcheck(env: dict[str, str], cwd: Path) -> int:
    """The image's HEALTHCHECK command, run with the container's environment (not the script's)."""
    text = (ROOT / "docker" / "Dockerfile").read_text().replace("\\\n", " ")
    command = json.loads(text.split("HEALTHCHECK", 1)[1].split("CMD", 1)[1].splitlines()[0].strip())
    command = [env["KCOMPAT_PROBE_FILE"] if a == "/tmp/kcompat.probe" else a for a in command]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, timeout=30).returncode


def test_arguments_go_to_serve_and_the_probe_reads_them(tmp_path: Path, started: list[Started]) -> None:
    """`--override listeners=...` moves the port: the ready line still comes (the probe tries that
    port, not 9092), and so does the health check. NAME=value arguments are exported, as
    apache/kafka's run script does."""
    port = free_port()
    env = {**base_env(tmp_path / "data"), "KCOMPAT_PORT": str(free_port())}  # 9092: not where it listens
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    command = [str(RUN_SCRIPT), "KAFKA_NODE_ID=7", "--override", f"listeners={listener}",
               "--override", f"advertised.listeners={listener}"]  # fmt: skip
    started.append(s := start(command, env, tmp_path))
    assert "id=7" in s.wait_for_line(READY_LINE, timeout=45)
    info = roundtrip(f"127.0.0.1:{port}")
    assert info["brokers"] == [{"node_id": 7, "host": "127.0.0.1", "port": port, "rack": None}]
    assert healthcheck(env, tmp_path) == 0
    assert s.stop() == 0


def test_listeners_come_from_the_advertised_ones(tmp_path: Path, started: list[Started]) -> None:
    port = free_port()
    env = {**base_env(tmp_path / "data"), "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}"}
    started.append(s := start([str(RUN_SCRIPT)], env, tmp_path))
    s.wait_for_line(READY_LINE, timeout=45)
    assert any(f"listening on PLAINTEXT://0.0.0.0:{port}" in line for line in s.lines), "\n".join(s.lines)
    info = roundtrip(f"127.0.0.1:{port}")
    assert info["brokers"] == [{"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None}]
    assert s.stop() == 0


def test_as_compose_file_runs_it(tmp_path: Path, started: list[Started]) -> None:
    """docker/compose.yaml's environment, its ports moved to free ones: the broker serves, its admin
    listener answers /metrics, and the image's health check passes."""
    port, admin = free_port(), free_port()
    compose = compose_environment()
    assert compose["KAFKA_ADMIN_LISTENER"] == "0.0.0.0:9644"
    env = {**base_env(tmp_path / "data"), **compose, "KCOMPAT_PORT": str(port),
           "KAFKA_ADMIN_LISTENER": f"127.0.0.1:{admin}"}  # fmt: skip
    started.append(s := start([str(RUN_SCRIPT)], env, tmp_path))
    s.wait_for_line(READY_LINE, timeout=45)
    roundtrip(f"127.0.0.1:{port}")
    conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=10)
    conn.request("GET", "/metrics")
    assert b"kafka_network_requestmetrics_totaltimems" in conn.getresponse().read()
    conn.close()
    assert healthcheck(env, tmp_path) == 0
    assert s.stop() == 0
    assert healthcheck(env, tmp_path) == 1


def test_mounted_config_ssl_secrets_and_log_variables(tmp_path: Path, started: list[Started]) -> None:
    """apache/kafka's inputs: /mnt/shared/config/server.properties (below the variables), the SSL
    key store named by KAFKA_SSL_*_FILENAME with its passwords in _CREDENTIALS files, the root log
    level; log4j's other variables and files are named once each as ignored."""
    plain, tls = free_port(), free_port()
    mounted = tmp_path / "mnt-shared-config"
    mounted.mkdir()
    (mounted / "server.properties").write_text("node.id=5\nnum.partitions=4\n")
    (mounted / "log4j.properties").write_text("log4j.rootLogger=INFO, stdout\n")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    key = serialization.load_pem_private_key(server.private_key_pem.bytes(), None)
    cert = x509.load_pem_x509_certificate(server.cert_chain_pems[0].bytes())
    p12 = pkcs12.serialize_key_and_certificates(
        b"kcompat",
        key,
        cert,
        None,
        serialization.BestAvailableEncryption(b"store-pw"),  # type: ignore[arg-type]
    )
    (secrets / "kafka.keystore.p12").write_bytes(p12)
    (secrets / "keystore_creds").write_text("store-pw\n")
    (secrets / "key_creds").write_text("store-pw\n")
    env = {
        **base_env(tmp_path / "data"),
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "KAFKA_NUM_PARTITIONS": "2",  # the variable wins over the mounted file
        "KAFKA_SSL_KEYSTORE_FILENAME": "kafka.keystore.p12",
        "KAFKA_SSL_KEYSTORE_CREDENTIALS": "keystore_creds",
        "KAFKA_SSL_KEY_CREDENTIALS": "key_creds",
        "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN",
        "KAFKA_LOG4J_LOGGERS": "kafka.controller=TRACE",
        "KAFKA_HEAP_OPTS": "-Xmx1G",
    }
    started.append(s := start([str(RUN_SCRIPT)], env, tmp_path))
    s.wait_for_line(READY_LINE, timeout=45)
    bootstrap = f"127.0.0.1:{plain}"
    info = roundtrip(bootstrap)
    assert info["brokers"] == [{"node_id": 5, "host": "127.0.0.1", "port": plain, "rack": None}]
    kc(bootstrap, "topic", "create", "auto-made")  # no partition count: num.partitions
    described = json.loads(kc(bootstrap, "topic", "describe", "auto-made", "--format", "json"))
    assert len(described["partitions"]) == 2
    context = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    with (
        socket.create_connection(("127.0.0.1", tls), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls_socket,
    ):
        assert tls_socket.version() is not None  # the handshake used the mounted key store
    assert s.stop() == 0
    s._reader.join(10)
    text = "\n".join(s.lines)
    assert " INFO " not in text, text  # KAFKA_LOG4J_ROOT_LOGLEVEL=WARN
    for ignored in (
        "KAFKA_LOG4J_LOGGERS is ignored",
        "KAFKA_HEAP_OPTS is ignored",
        "log4j.properties is ignored",
    ):
        assert sum(ignored in line for line in s.lines) == 1, text
    assert not any("unknown" in line.lower() for line in s.lines), text  # *_FILENAME are not properties


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({"KAFKA_ADVERTISED_LISTENERS": "SSL://127.0.0.1:{port}"}, "KAFKA_SSL_KEYSTORE_FILENAME is not set"),
        ({"KAFKA_ADVERTISED_LISTENERS": "SSL://127.0.0.1:{port}", "KAFKA_SSL_KEYSTORE_FILENAME": "nope.p12"},
         "nope.p12 does not exist"),
        ({"KAFKA_LOG4J_ROOT_LOGLEVEL": "LOUD"}, "KAFKA_LOG4J_ROOT_LOGLEVEL=LOUD is not a log level"),
    ],
)  # fmt: skip
def test_what_it_cannot_use_is_refused_with_one_line(
    tmp_path: Path, started: list[Started], env: dict[str, str], line: str
) -> None:
    port = free_port()
    env = {**base_env(tmp_path / "data"), "KCOMPAT_PORT": str(port),
           **{k: v.format(port=port) for k, v in env.items()}}  # fmt: skip
    started.append(s := start([str(RUN_SCRIPT)], env, tmp_path))
    assert s.process.wait(30) == 1
    s._reader.join(5)
    said = [x for x in s.lines if x.strip()]
    assert len(said) == 1 and said[0].startswith("kcompat: ") and line in said[0], s.lines
