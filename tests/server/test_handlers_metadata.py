"""Metadata (all-topics encodings, auto-creation, ids, epochs) and DescribeTopicPartitions paging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcompat.kafka_uuid import ZERO_UUID
from kcompat.server.handlers.metadata import TOPIC_OPERATIONS
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_partitions import CREATE_PARTITIONS
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.delete_topics import DELETE_TOPICS
from kcompat.wire.messages.describe_topic_partitions import DESCRIBE_TOPIC_PARTITIONS
from kcompat.wire.messages.metadata import METADATA
from tests.server.broker_harness import BrokerHarness, HarnessFactory


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    return broker_harness({"num.partitions": "2", "broker.rack": "r1", "node.id": "3"})


def create(h: BrokerHarness, name: str, partitions: int = 1) -> None:
    body = {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}],
        "timeout_ms": 100,
    }
    assert h.call(CREATE_TOPICS, 7, body).topics[0].error_code == 0


def names(resp: Any) -> list[str]:
    return sorted(t.name for t in resp.topics)


def test_all_topics_encodings(h: BrokerHarness) -> None:
    create(h, "a")
    create(h, "b")
    assert names(h.call(METADATA, 0, {"topics": []})) == ["a", "b"]
    assert names(h.call(METADATA, 1, {"topics": None})) == ["a", "b"]
    assert names(h.call(METADATA, 12, {"topics": None})) == ["a", "b"]
    assert h.call(METADATA, 1, {"topics": []}).topics == []
    assert h.call(METADATA, 12, {"topics": []}).topics == []


def test_brokers_controller_and_partitions(h: BrokerHarness) -> None:
    create(h, "a", 3)
    r = h.call(METADATA, 12, {"topics": [{"name": "a"}]})
    assert [(b.node_id, b.host, b.port, b.rack) for b in r.brokers] == [(3, "127.0.0.1", 19092, "r1")]
    assert r.controller_id == 3 and r.cluster_id
    t = r.topics[0]
    assert (t.error_code, t.is_internal, t.topic_authorized_operations) == (0, False, -(2**31))
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas)
            for p in t.partitions] == [(i, 3, 0, [3], [3], []) for i in range(3)]  # fmt: skip


def test_auto_creation_rules(tmp_path: Path, broker_harness: HarnessFactory) -> None:
    h = broker_harness()
    r = h.call(METADATA, 8, {"topics": [{"name": "new"}], "allow_auto_topic_creation": False})
    assert r.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    r = h.call(METADATA, 8, {"topics": [{"name": "new"}], "allow_auto_topic_creation": True})
    assert r.topics[0].error_code == 0 and len(r.topics[0].partitions) == 1
    r = h.call(METADATA, 3, {"topics": [{"name": "old-client"}]})  # before v4 the request always allows it
    assert r.topics[0].error_code == 0
    r = h.call(METADATA, 8, {"topics": [{"name": "bad name!"}], "allow_auto_topic_creation": True})
    assert r.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    off = broker_harness({"auto.create.topics.enable": "false"}, path=tmp_path / "off")
    r = off.call(METADATA, 12, {"topics": [{"name": "new"}], "allow_auto_topic_creation": True})
    assert r.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert r.topics[0].partitions == []


def test_topic_ids_and_lookup_by_id(h: BrokerHarness) -> None:
    create(h, "a")
    topic_id = h.call(METADATA, 10, {"topics": [{"name": "a"}]}).topics[0].topic_id
    assert topic_id.int != 0
    by_id = h.call(METADATA, 12, {"topics": [{"name": None, "topic_id": topic_id}]}).topics[0]
    assert (by_id.error_code, by_id.name, by_id.topic_id) == (0, "a", topic_id)
    import uuid

    missing = h.call(METADATA, 12, {"topics": [{"name": None, "topic_id": uuid.uuid4()}]}).topics[0]
    assert (missing.error_code, missing.name) == (ErrorCode.UNKNOWN_TOPIC_ID, None)


def test_authorized_operations_on_request(h: BrokerHarness) -> None:
    create(h, "a")
    r = h.call(METADATA, 8, {"topics": None, "include_cluster_authorized_operations": True,
                             "include_topic_authorized_operations": True})  # fmt: skip
    assert r.topics[0].topic_authorized_operations > 0 and r.cluster_authorized_operations > 0


def test_internal_topic_is_marked(h: BrokerHarness) -> None:
    r = h.call(METADATA, 12, {"topics": [{"name": "__consumer_offsets"}], "allow_auto_topic_creation": True})
    t = r.topics[0]
    assert t.error_code == 0 and t.is_internal
    configs = h.broker.metadata.topic("__consumer_offsets").configs
    assert configs["cleanup.policy"] == "compact"


def test_leader_epoch_never_goes_back_across_restarts(h: BrokerHarness) -> None:
    create(h, "a")
    before = h.call(METADATA, 12, {"topics": None}).topics[0].partitions[0].leader_epoch
    h.restart()
    after = h.call(METADATA, 12, {"topics": None}).topics[0].partitions[0].leader_epoch
    assert after >= before >= 0


def test_describe_topic_partitions_pages_with_a_cursor(h: BrokerHarness) -> None:
    create(h, "a", 3)
    create(h, "b", 2)
    create(h, "c", 1)
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        r = h.call(
            DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 2, "cursor": cursor}
        )
        pages += 1
        seen += [(t.name, p.partition_index) for t in r.topics for p in t.partitions]
        if r.next_cursor is None:
            break
        cursor = {"topic_name": r.next_cursor.topic_name, "partition_index": r.next_cursor.partition_index}
    assert seen == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("c", 0)]
    # Empty, never null: Java's admin client streams both arrays without a null check.
    r = h.call(DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "c"}]})
    p = r.topics[0].partitions[0]
    assert (p.eligible_leader_replicas, p.last_known_elr) == ([], [])
    assert pages == 3
    r = h.call(DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "zz"}, {"name": "b"}]})
    assert [(t.name, t.error_code, len(t.partitions)) for t in r.topics] == [
        ("b", 0, 2),
        ("zz", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0),
    ]


def test_cached_partition_rows_follow_added_partitions_and_recreation(h: BrokerHarness) -> None:
    """Metadata reuses each topic's partition rows: adding partitions, or deleting and re-creating
    the topic with another count, must show at once (for all topics, by name and paged)."""

    def counts() -> list[int]:
        every = h.call(METADATA, 12, {"topics": None}).topics
        named = h.call(METADATA, 12, {"topics": [{"name": "a"}]}).topics
        paged = h.call(
            DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "a"}], "response_partition_limit": 2000}
        )
        return [len(every[0].partitions), len(named[0].partitions), len(paged.topics[0].partitions)]

    create(h, "a", 2)
    assert counts() == [2, 2, 2]
    body = {
        "topics": [{"name": "a", "count": 5, "assignments": None}],
        "timeout_ms": 100,
        "validate_only": False,
    }
    assert h.call(CREATE_PARTITIONS, 3, body).results[0].error_code == 0
    assert counts() == [5, 5, 5]
    assert (
        h.call(DELETE_TOPICS, 6, {"topics": [{"name": "a"}], "timeout_ms": 100}).responses[0].error_code == 0
    )
    create(h, "a", 3)
    assert counts() == [3, 3, 3]
    assert [p.partition_index for p in h.call(METADATA, 12, {"topics": None}).topics[0].partitions] == [
        0,
        1,
        2,
    ]


def test_encoded_topics_per_api_version_and_operations(h: BrokerHarness) -> None:
    """A topic's entry is encoded once per api version and authorized operations: asking in turn at
    versions whose topic and partition layouts differ must give each version's own encoding."""
    create(h, "a", 3)
    create(h, "b", 1)
    topic_id = h.call(METADATA, 12, {"topics": None}).topics[0].topic_id
    for v in (12, 1, 5, 12, 0, 7, 9, 10, 13, 1, 12):
        body: dict[str, Any] = {"topics": [] if v == 0 else None}
        if v >= 8:
            body["include_topic_authorized_operations"] = (
                v % 2 == 0
            )  # the cache keys on the answer's operations
        r = h.call(METADATA, v, body)
        assert names(r) == ["a", "b"], v
        a = next(t for t in r.topics if t.name == "a")
        assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in a.partitions] == [
            (i, 3, [3], [3]) for i in range(3)
        ], v
        assert a.topic_id == (topic_id if v >= 10 else ZERO_UUID), v
        assert [p.leader_epoch for p in a.partitions] == [0 if v >= 7 else -1] * 3, v
        ops = a.topic_authorized_operations
        assert ops == (TOPIC_OPERATIONS if v >= 8 and v % 2 == 0 else -(2**31)), v
