"""The partition logs run with the typed values of their topic's config: broker synonyms set at
start-up and changed at run time reach every live log, with no string round trip in between."""

from __future__ import annotations

from typing import Any

import pytest

from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from tests.server.broker_harness import BrokerHarness, HarnessFactory

BROKER = 4
MIB = 1024 * 1024


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    return broker_harness({"log.segment.bytes": str(3 * MIB), "producer.id.expiration.ms": "90000"})


def create(h: BrokerHarness, name: str, configs: dict[str, str] | None = None) -> None:
    topic = {"name": name, "num_partitions": 2, "replication_factor": -1,
             "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}  # fmt: skip
    (r,) = h.call(CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 100, "validate_only": False}).topics
    assert r.error_code == 0


def alter_broker(h: BrokerHarness, name: str, value: str | None) -> Any:
    op = 0 if value is not None else 1
    body = {"resources": [{"resource_type": BROKER, "resource_name": str(h.broker.node_id), "configs": [
        {"name": name, "config_operation": op, "value": value}]}], "validate_only": False}  # fmt: skip
    return h.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]


def segment_bytes(h: BrokerHarness, topic: str) -> list[int]:
    return [h.broker.replicas.partition_log(topic, p).config.segment_bytes for p in range(2)]


def test_log_segment_bytes_reaches_the_partition_logs(h: BrokerHarness) -> None:
    create(h, "plain")
    create(h, "own", {"segment.bytes": str(5 * MIB)})
    assert segment_bytes(h, "plain") == [3 * MIB, 3 * MIB]  # the static broker value
    assert segment_bytes(h, "own") == [5 * MIB, 5 * MIB]  # the topic's override wins
    assert h.broker.replicas.partition_log("plain", 0).config.producer_id_expiration_ms == 90000

    assert alter_broker(h, "log.segment.bytes", str(7 * MIB)).error_code == 0
    assert segment_bytes(h, "plain") == [7 * MIB, 7 * MIB]  # live logs, at once
    assert all(
        s.config.segment_bytes == 7 * MIB for s in h.broker.replicas.partition_log("plain", 1).segments
    )
    assert segment_bytes(h, "own") == [5 * MIB, 5 * MIB]
    create(h, "later")
    assert segment_bytes(h, "later") == [7 * MIB, 7 * MIB]

    h.restart()  # the dynamic value is persisted and read back
    assert segment_bytes(h, "plain") == [7 * MIB, 7 * MIB]
    assert alter_broker(h, "log.segment.bytes", None).error_code == 0
    assert segment_bytes(h, "plain") == [3 * MIB, 3 * MIB]
