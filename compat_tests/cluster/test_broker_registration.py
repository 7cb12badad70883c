"""Cluster mode, first step: a `kcompat serve` process with process.roles=broker and
controller.quorum.bootstrap.servers registers with a REAL Kafka 4.3 controller, is unfenced,
follows `__cluster_metadata` as a Raft observer, and its metadata image shows a topic created
through the controller with this broker as leader. Produce/fetch in cluster mode is not yet served."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

from compat_tests.conftest import kafka_tool
from compat_tests.crash.wire_client import WireClient
from kcompat.testing import Broker
from kcompat.testing_cluster import HOST, ControllerQuorum

BROKER_ID = 1
CREATE_TOPICS = 19


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def log_has(broker: Broker, text: str) -> bool:
    return text in broker.log_path.read_text(errors="replace")


def test_broker_registers_is_unfenced_and_follows_metadata(kraft_quorum: ControllerQuorum, tmp_path: Path) -> None:
    kraft_quorum.format_broker(tmp_path / "data", BROKER_ID)  # Kafka's own kafka-storage format
    formatted = (tmp_path / "data" / "meta.properties").read_text()
    broker = Broker(
        tmp_path / "data",
        tmp_path / "kcompat.log",
        overrides={
            "process.roles": "broker",
            "node.id": str(BROKER_ID),
            "cluster.id": kraft_quorum.cluster_id,
            "controller.quorum.bootstrap.servers": kraft_quorum.bootstrap_servers,
            "controller.listener.names": "CONTROLLER",
            "broker.heartbeat.interval.ms": "500",
        },
    )
    broker.start()
    try:
        wait_for(lambda: log_has(broker, "RECOVERY -> RUNNING"), "the broker to be unfenced")
        assert log_has(broker, f"metadata: broker {BROKER_ID} is unfenced")
        status = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", kraft_quorum.bootstrap_servers,
                            "describe", "--status").stdout  # fmt: skip
        observers = next(line for line in status.splitlines() if line.startswith("CurrentObservers"))
        assert f'"id": {BROKER_ID}' in observers, status
        directory_id = next(line.split("=", 1)[1] for line in formatted.splitlines() if line.startswith("directory.id="))
        assert directory_id in observers  # the observer is known by the directory id Kafka's format wrote

        # A topic created on the controller (--bootstrap-controller semantics: CreateTopics sent
        # straight to the controller listener) reaches the broker's image with it as leader.
        client = WireClient(HOST, kraft_quorum.controllers[0].port)
        try:
            response = client.call(CREATE_TOPICS, 7, {
                "topics": [{"name": "clustered", "num_partitions": 2, "replication_factor": 1,
                            "assignments": [], "configs": []}],
                "timeout_ms": 10000, "validate_only": False,
            })  # fmt: skip
        finally:
            client.close()
        created = response.topics[0]
        assert created.error_code == 0, created
        assert isinstance(created.topic_id, uuid.UUID)
        for p in (0, 1):
            wait_for(lambda p=p: log_has(broker, f"metadata: clustered-{p} leader: leader {BROKER_ID} epoch 0, replicas [{BROKER_ID}], isr [{BROKER_ID}]"),
                     f"partition {p} in the broker's image")  # fmt: skip
    finally:
        broker.stop()
    # Stopping is a controlled shutdown through heartbeats, confirmed by the controller.
    assert log_has(broker, "PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN"), broker.log_path.read_text()[-3000:]

