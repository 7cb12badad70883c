"""Cluster mode, first step: a `kcompat serve` process with process.roles=broker and
controller.quorum.bootstrap.servers registers with a REAL Kafka 4.3 controller, is unfenced,
follows `__cluster_metadata` as a Raft observer, and its metadata image shows a topic created
through the controller with this broker as leader. Produce/fetch in cluster mode is not yet served."""

from __future__ import annotations

import re
import signal
import uuid
from pathlib import Path

from support import ClusterBrokerFactory, kafka_tool, log_has

from compat_tests.crash.wire_client import WireClient
from kcompat.testing import wait_until
from kcompat.testing_cluster import HOST, ControllerQuorum

BROKER_ID = 1
CREATE_TOPICS = 19


def test_broker_registers_is_unfenced_and_follows_metadata(
    kraft_quorum: ControllerQuorum, tmp_path: Path, cluster_broker_factory: ClusterBrokerFactory
) -> None:
    kraft_quorum.format_broker(tmp_path / f"data-{BROKER_ID}", BROKER_ID)  # Kafka's own kafka-storage format
    formatted = (tmp_path / f"data-{BROKER_ID}" / "meta.properties").read_text()
    broker = cluster_broker_factory(kraft_quorum, BROKER_ID)
    broker.start()
    try:
        wait_until(lambda: log_has(broker, "RECOVERY -> RUNNING"), "the broker to be unfenced", timeout=40)
        # The heartbeat answer may unfence before the observer fetched the UnfenceBrokerRecord.
        wait_until(
            lambda: log_has(broker, f"metadata: broker {BROKER_ID} is unfenced"),
            "the unfencing record",
            timeout=40,
        )
        status = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", kraft_quorum.bootstrap_servers,
                            "describe", "--status").stdout  # fmt: skip
        observers = next(line for line in status.splitlines() if line.startswith("CurrentObservers"))
        assert f'"id": {BROKER_ID}' in observers, status
        directory_id = next(
            line.split("=", 1)[1] for line in formatted.splitlines() if line.startswith("directory.id=")
        )
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
            wait_until(
                lambda p=p: log_has(
                    broker,
                    f"metadata: clustered-{p} leader: leader {BROKER_ID} epoch 0, replicas [{BROKER_ID}], isr [{BROKER_ID}]",
                ),
                f"partition {p} in the broker's image",
                timeout=40,
            )
    finally:
        broker.stop()
    # Stopping is a controlled shutdown through heartbeats, confirmed by the controller.
    assert log_has(broker, "PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN"), broker.log_path.read_text()[
        -3000:
    ]


def test_fenced_by_the_controller_then_unfenced_and_restart_registers_again(
    kraft_quorum: ControllerQuorum, cluster_broker_factory: ClusterBrokerFactory
) -> None:
    """A broker silent past the controller's session timeout (9 s) is fenced; when it speaks again
    its heartbeats (WantFence false, caught up) get it unfenced. A restart is a new incarnation
    and gets a new, higher broker epoch."""
    node_id = 2
    broker = cluster_broker_factory(kraft_quorum, node_id)
    broker.start()
    try:
        wait_until(lambda: log_has(broker, "RECOVERY -> RUNNING"), "the broker to be unfenced", timeout=40)
        assert broker.process is not None
        # Kafka's own account, in the controller's log: fenced for the lapsed session, then unfenced
        # by the next heartbeat (both records may reach the broker in one Fetch).
        controller_log = kraft_quorum.controllers[0].log_file
        fenced = f"Fencing broker {node_id} at epoch "
        unfenced = f"The request from broker {node_id} to unfence has been granted"

        def fenced_then_unfenced() -> bool:
            text = controller_log.read_text(errors="replace")
            return fenced in text and unfenced in text[text.index(fenced) :]

        broker.process.send_signal(signal.SIGSTOP)  # silent past the controller's 9 s session timeout
        try:
            wait_until(
                lambda: fenced in controller_log.read_text(errors="replace"),
                "the controller to fence the broker",
                timeout=40,
            )
        finally:
            broker.process.send_signal(signal.SIGCONT)
        wait_until(fenced_then_unfenced, "the controller to fence and then unfence the broker", timeout=40)
        assert "because its session has timed out" in controller_log.read_text(errors="replace")
    finally:
        broker.stop()
    epochs = [
        int(m)
        for m in re.findall(
            rf"broker {node_id} registered with broker epoch (\d+)", broker.log_path.read_text()
        )
    ]
    assert len(epochs) == 1
    broker.start()  # same log dir: same directory id, a new incarnation
    try:
        wait_until(
            lambda: (
                log_has(broker, "RECOVERY -> RUNNING")
                and len(re.findall("registered with broker epoch", broker.log_path.read_text())) == 2
            ),
            "the restarted broker to be unfenced",
            timeout=40,
        )
        again = [
            int(m)
            for m in re.findall(
                rf"broker {node_id} registered with broker epoch (\d+)", broker.log_path.read_text()
            )
        ]
        assert len(again) == 2 and again[1] > again[0]
    finally:
        broker.stop()


def test_secured_listeners_are_registered_with_their_protocol(
    kraft_quorum: ControllerQuorum, cluster_broker_factory: ClusterBrokerFactory
) -> None:
    """Every advertised listener is registered with its security protocol, so a client that
    bootstraps on the SASL_PLAINTEXT listener is told the brokers' SASL_PLAINTEXT endpoints
    (before, only the first listener was registered, as PLAINTEXT, and Metadata there named no broker)."""
    from confluent_kafka.admin import AdminClient

    from kcompat.testing import free_port

    node_id = 3
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";'
    broker = cluster_broker_factory(
        kraft_quorum,
        node_id,
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        },
    )
    broker.listeners["SASL_PLAINTEXT"] = sasl_port = free_port()
    broker.start()
    wait_until(
        lambda: log_has(broker, f"metadata: broker {node_id} is unfenced"), "the unfencing record", timeout=40
    )
    admin = AdminClient({"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "PLAIN", "sasl.username": "bob", "sasl.password": "bob-secret"})  # fmt: skip
    md = admin.list_topics(timeout=30)
    assert node_id in md.brokers, md.brokers
    assert (md.brokers[node_id].host, md.brokers[node_id].port) == (HOST, sasl_port)
    plain = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    assert (plain.brokers[node_id].host, plain.brokers[node_id].port) == (HOST, broker.port)
