"""The receiver's state without a broker: subscriptions a client matches, merged; what is kept
bounded; a subscription Python cannot compile (set through Kafka's controller) matching nobody."""

from __future__ import annotations

import uuid

import pytest

from kcompat.telemetry import client_metrics
from kcompat.telemetry.client_metrics import ClientMetricsManager, Peer
from kcompat.telemetry.otlp import DataPoint, MetricsData

PEER = Peer(client_id="app-1", connection_id="c1", host="10.0.0.7", port=50123)


def manager() -> ClientMetricsManager:
    return ClientMetricsManager(lambda: 1024, uuid.uuid4)


def test_matching_subscriptions_merge() -> None:
    m = manager()
    m.client_information("c1", "apache-kafka-java", "4.3.1")
    m.update_subscriptions({
        "a": {"metrics": "org.apache.kafka.producer.", "interval.ms": "60000", "match": "client_id=app-.*"},
        "b": {"metrics": "org.apache.kafka.consumer.", "interval.ms": "20000",
              "match": "client_software_name=apache-kafka-java,client_source_address=10\\.0\\..*"},
        "c": {"metrics": "*", "match": "client_software_version=3\\..*"},  # not this client
        "empty": {},  # every config deleted: no subscription
    })  # fmt: skip
    inst = m.get(uuid.UUID(int=0), PEER, 1_000)
    assert (inst.metrics, inst.interval_ms) == (
        ["org.apache.kafka.consumer.", "org.apache.kafka.producer."],
        20000,
    )
    assert [s.name for s in m.subscriptions] == ["a", "b", "c"]
    # One asking for everything makes it "*" alone.
    m.update_subscriptions({"all": {"metrics": "*,org.apache.kafka.producer."}})
    assert m.get(inst.instance_id, PEER, 400_000).metrics == ["*"]


def test_a_pattern_python_cannot_compile_matches_nobody() -> None:
    m = manager()
    m.update_subscriptions({"java-named-group": {"metrics": "*", "match": "client_id=(?<n>app)-1"},
                            "ok": {"metrics": "org.apache.kafka.", "interval.ms": "1000"}})  # fmt: skip
    assert [s.name for s in m.subscriptions] == ["ok"]
    assert m.get(uuid.UUID(int=0), PEER, 1_000).metrics == ["org.apache.kafka."]


def test_instances_and_series_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_metrics, "MAX_INSTANCES", 3)
    monkeypatch.setattr(client_metrics, "MAX_SERIES", 5)
    m = manager()
    m.update_subscriptions({"all": {"metrics": "*", "interval.ms": "100"}})
    made = [m.get(uuid.UUID(int=0), Peer("x", f"c{i}", "h", i), 1_000).instance_id for i in range(5)]
    assert list(m.instances) == made[2:]  # the least recently seen went first
    inst = m.instances[made[-1]]
    points = [DataPoint(f"m{i}", "gauge", (), float(i), 0) for i in range(8)]
    m.record(inst, MetricsData((), points, 0), 1_000)
    m.record(inst, MetricsData((), [DataPoint("m0", "gauge", (), 42.0, 0)], 0), 1_100)
    assert {k[0]: s.value for k, s in inst.series.items()} == {
        "m0": 42.0,
        "m1": 1.0,
        "m2": 2.0,
        "m3": 3.0,
        "m4": 4.0,
    }
