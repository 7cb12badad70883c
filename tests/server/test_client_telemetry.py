"""The broker's hold on client telemetry: what ApiVersions said about each connection's software
before Kafka's ClientMetricsManager was built reaches it when it is, so that a subscription
matching on the software name still matches the clients that connected first."""

from __future__ import annotations

import uuid

from kcompat.server.client_telemetry import ClientTelemetry
from kcompat.telemetry.client_metrics import Peer

JAVA = {"java": {"metrics": "org.apache.kafka.", "match": "client_software_name=apache-kafka-java"}}


def peer(connection_id: str) -> Peer:
    return Peer(client_id="app", connection_id=connection_id, host="10.0.0.7", port=50123)


def test_software_named_before_the_manager_is_built_still_matches() -> None:
    telemetry = ClientTelemetry(lambda: 1024, uuid.uuid4)
    telemetry.client_information("c1", "apache-kafka-java", "4.3.1")
    telemetry.client_information("c2", "apache-kafka-java", "4.3.1")
    telemetry.connection_closed("c2")  # gone before the manager was built: nothing of it is kept
    manager = telemetry.manager
    assert telemetry.manager is manager  # built once
    manager.update_subscriptions(JAVA)
    assert manager.get(uuid.UUID(int=0), peer("c1"), 1_000).metrics == ["org.apache.kafka."]
    assert manager.get(uuid.UUID(int=0), peer("c2"), 1_000).metrics == []
    # Once built, what the broker tells goes straight to the manager.
    telemetry.client_information("c3", "apache-kafka-java", "4.3.1")
    assert manager.get(uuid.UUID(int=0), peer("c3"), 1_000).metrics == ["org.apache.kafka."]
