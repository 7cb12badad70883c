"""Cluster-mode identity and storage: a log dir formatted by Kafka's own `kafka-storage format` is
taken as it is (the registration test checks its directory id is the one the controller sees); a
dir formatted for another node or cluster, or a broker id equal to a controller's, is refused at
start with one line and exit 1, writing nothing."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from kcompat.testing import Broker, api_versions_ready
from kcompat.testing_cluster import ControllerQuorum

BROKER_ID = 1


def test_a_dir_formatted_for_another_node_or_cluster_is_refused(
    kraft_quorum: ControllerQuorum, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    kraft_quorum.format_broker(data, BROKER_ID)
    before = {p.name: p.read_bytes() for p in data.iterdir()}
    for overrides, reason in (
        ({"node.id": "2", "cluster.id": kraft_quorum.cluster_id}, "belongs to node 1, not 2"),
        (
            {"node.id": str(BROKER_ID), "cluster.id": "AAAAAAAAAAAAAAAAAAAAAg"},
            f"belongs to cluster {kraft_quorum.cluster_id}",
        ),
    ):
        cmd = [sys.executable, "-m", "kcompat", "serve", "--override", f"log.dirs={data}",
               "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "admin.listener=",
               "--override", "process.roles=broker",
               "--override", f"controller.quorum.bootstrap.servers={kraft_quorum.bootstrap_servers}"]  # fmt: skip
        for key, value in overrides.items():
            cmd += ["--override", f"{key}={value}"]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, result.stderr
        errors = [line for line in result.stderr.splitlines() if " ERROR " in line or "Traceback" in line]
        assert len(errors) == 1 and reason in errors[0], result.stderr
        assert {p.name: p.read_bytes() for p in data.iterdir()} == before  # nothing written


def test_a_broker_id_equal_to_a_controller_id_is_refused(
    kraft_quorum: ControllerQuorum, tmp_path: Path
) -> None:
    controller = kraft_quorum.controllers[0]
    cmd = [sys.executable, "-m", "kcompat", "serve", "--override", f"log.dirs={tmp_path / 'data'}",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "admin.listener=",
           "--override", "process.roles=broker", "--override", f"node.id={controller.node_id}",
           "--override", f"controller.quorum.voters={controller.node_id}@{controller.endpoint}"]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "is a controller's id" in result.stderr, result.stderr
    assert not (tmp_path / "data").exists()


def test_unreachable_controllers_are_retried_and_said_so(tmp_path: Path) -> None:
    """As a Kafka broker does, start-up goes on while no controller answers; one warning line says
    so (every 10 s, not at every retry); the client listener is not served until the broker is
    unfenced (Kafka enables request processing only then); and SIGTERM still stops the broker."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens here once the socket closes
    broker = Broker(tmp_path / "data", tmp_path / "kcompat.log", overrides={
        "process.roles": "broker", "node.id": "1", "controller.quorum.bootstrap.servers": f"127.0.0.1:{dead}",
    })  # fmt: skip
    broker.start(wait=False)  # never unfenced, so it never answers ApiVersions
    try:
        deadline = time.monotonic() + 20
        while "cannot reach the controllers" not in broker.logs() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2)  # two more seconds of retrying (a dozen attempts) must not add lines
        lines = [line for line in broker.logs().splitlines() if "cannot reach the controllers" in line]
        assert len(lines) == 1, lines
        assert f"127.0.0.1:{dead}" in lines[0] and "still trying" in lines[0]
        assert broker.running
        assert not api_versions_ready(broker.host, broker.port, timeout=1.0)
    finally:
        assert broker.stop() == 0
