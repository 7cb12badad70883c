"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
DescribeCluster, DescribeLogDirs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_configs import ALTER_CONFIGS
from kcompat.wire.messages.create_partitions import CREATE_PARTITIONS
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.delete_topics import DELETE_TOPICS
from kcompat.wire.messages.describe_cluster import DESCRIBE_CLUSTER
from kcompat.wire.messages.describe_configs import DESCRIBE_CONFIGS
from kcompat.wire.messages.describe_log_dirs import DESCRIBE_LOG_DIRS
from kcompat.wire.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.messages.produce import PRODUCE
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch

TOPIC, BROKER = 2, 4


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    return broker_harness({"num.partitions": "2", "log.retention.hours": "48"})


def create(
    h: BrokerHarness, *topics: dict[str, Any], version: int = 7, validate_only: bool = False
) -> list[Any]:
    full = [{"num_partitions": -1, "replication_factor": -1, **t} for t in topics]
    return h.call(
        CREATE_TOPICS, version, {"topics": full, "timeout_ms": 100, "validate_only": validate_only}
    ).topics


def test_create_topics_defaults_and_answer(h: BrokerHarness) -> None:
    (r,) = create(h, {"name": "a", "configs": [{"name": "retention.ms", "value": "1000"}]})
    assert (r.error_code, r.num_partitions, r.replication_factor) == (0, 2, 1)
    assert r.topic_id.int != 0
    configs = {c.name: c for c in r.configs}
    assert configs["retention.ms"].value == "1000" and configs["retention.ms"].config_source == 1
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].config_source == 5
    md = h.call(METADATA, 12, {"topics": [{"name": "a"}]}).topics[0]
    assert md.topic_id == r.topic_id and len(md.partitions) == 2


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        ({"name": "bad/name"}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ({"name": "x" * 250}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ({"name": ".."}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ({"name": "p", "num_partitions": 0}, ErrorCode.INVALID_PARTITIONS),
        ({"name": "r", "replication_factor": 3}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ({"name": "r0", "replication_factor": 0}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ({"name": "c", "configs": [{"name": "no.such.config", "value": "1"}]}, ErrorCode.INVALID_CONFIG),
        ({"name": "c2", "configs": [{"name": "retention.ms", "value": "soon"}]}, ErrorCode.INVALID_CONFIG),
        ({"name": "c3", "configs": [{"name": "cleanup.policy", "value": "shred"}]}, ErrorCode.INVALID_CONFIG),
        ({"name": "__consumer_offsets"}, ErrorCode.INVALID_REQUEST),
        (
            {"name": "m", "assignments": [{"partition_index": 0, "broker_ids": [5]}]},
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
    ],
)
def test_create_topics_validation(h: BrokerHarness, topic: dict[str, Any], error: ErrorCode) -> None:
    (r,) = create(h, topic)
    assert r.error_code == error, r
    assert r.error_message
    assert h.broker.metadata.topic(topic["name"]) is None


def test_create_topics_conflicts(h: BrokerHarness) -> None:
    create(h, {"name": "a.b"})
    assert create(h, {"name": "a.b"})[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert create(h, {"name": "a_b"})[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    dup = create(h, {"name": "d"}, {"name": "d"})
    assert [r.error_code for r in dup] == [ErrorCode.INVALID_REQUEST] * 2


def test_create_topics_manual_assignment(h: BrokerHarness) -> None:
    node = h.broker.node_id
    (r,) = create(
        h, {"name": "m", "assignments": [{"partition_index": i, "broker_ids": [node]} for i in range(3)]}
    )
    assert (r.error_code, r.num_partitions) == (0, 3)


def test_validate_only_creates_nothing(h: BrokerHarness) -> None:
    (r,) = create(h, {"name": "v", "num_partitions": 4}, validate_only=True)
    assert (r.error_code, r.num_partitions, r.topic_id.int) == (0, 4, 0)
    assert h.broker.metadata.topic("v") is None


@pytest.mark.parametrize("version", range(2, 8))  # Kafka 4 removed v0-1 (KIP-896)
def test_create_topics_every_version(h: BrokerHarness, version: int) -> None:
    (r,) = create(h, {"name": f"v{version}", "num_partitions": 1, "replication_factor": 1}, version=version)
    assert r.error_code == 0


def test_delete_topics_by_name_and_id(h: BrokerHarness, tmp_path: Path) -> None:
    create(h, {"name": "a"}, {"name": "b"})
    h.call(
        PRODUCE,
        9,
        {
            "acks": 1,
            "timeout_ms": 100,
            "topic_data": [{"name": "a", "partition_data": [{"index": 0, "records": batch(b"x")}]}],
        },
    )
    r = h.call(DELETE_TOPICS, 5, {"topic_names": ["a", "nope"], "timeout_ms": 100}).responses
    assert [(x.name, x.error_code) for x in r] == [("a", 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert not (tmp_path / "data" / "a-0").exists()
    b_id = h.broker.metadata.topic("b").topic_id
    r = h.call(DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": b_id}], "timeout_ms": 100}).responses
    assert [(x.name, x.topic_id, x.error_code) for x in r] == [("b", b_id, 0)]
    assert h.call(METADATA, 12, {"topics": None}).topics == []
    (again,) = create(h, {"name": "a"})
    assert again.error_code == 0 and again.topic_id != b_id
    h.restart()
    assert [t.name for t in h.call(METADATA, 12, {"topics": None}).topics] == ["a"]


def test_delete_topic_disabled(broker_harness: HarnessFactory) -> None:
    h = broker_harness({"delete.topic.enable": "false"})
    create(h, {"name": "a"})
    r = h.call(DELETE_TOPICS, 4, {"topic_names": ["a"], "timeout_ms": 100}).responses[0]
    assert r.error_code == ErrorCode.TOPIC_DELETION_DISABLED


def test_create_partitions(h: BrokerHarness) -> None:
    create(h, {"name": "a"})

    def grow(count: int, validate_only: bool = False, assignments: Any = None, name: str = "a") -> Any:
        body = {
            "topics": [{"name": name, "count": count, "assignments": assignments}],
            "timeout_ms": 100,
            "validate_only": validate_only,
        }
        return h.call(CREATE_PARTITIONS, 3, body).results[0]

    assert grow(5, validate_only=True).error_code == 0
    assert h.broker.metadata.topic("a").partitions == 2
    assert grow(4).error_code == 0 and h.broker.metadata.topic("a").partitions == 4
    assert grow(4).error_code == ErrorCode.INVALID_PARTITIONS
    assert grow(3).error_code == ErrorCode.INVALID_PARTITIONS
    assert (
        grow(6, assignments=[{"broker_ids": [h.broker.node_id]}]).error_code
        == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    )
    assert grow(2, name="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    md = h.call(METADATA, 12, {"topics": [{"name": "a"}]}).topics[0]
    assert [p.partition_index for p in md.partitions] == [0, 1, 2, 3]
    r = h.call(
        PRODUCE,
        9,
        {
            "acks": 1,
            "timeout_ms": 100,
            "topic_data": [{"name": "a", "partition_data": [{"index": 3, "records": batch(b"x")}]}],
        },
    )
    assert r.responses[0].partition_responses[0].error_code == 0


def describe(h: BrokerHarness, rtype: int, name: str, keys: list[str] | None = None, version: int = 4,
             synonyms: bool = True, docs: bool = True) -> Any:  # fmt: skip
    body = {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": synonyms, "include_documentation": docs}  # fmt: skip
    return h.call(DESCRIBE_CONFIGS, version, body).results[0]


def test_describe_topic_configs_with_synonyms(h: BrokerHarness) -> None:
    create(h, {"name": "a", "configs": [{"name": "segment.bytes", "value": "2000000"}]})
    r = describe(h, TOPIC, "a")
    configs = {c.name: c for c in r.configs}
    seg = configs["segment.bytes"]
    assert (seg.value, seg.config_source, seg.read_only, seg.is_sensitive) == ("2000000", 1, False, False)
    assert [(s.name, s.source) for s in seg.synonyms][:2] == [("segment.bytes", 1), ("log.segment.bytes", 5)]
    ret = configs["retention.ms"]
    # From log.retention.hours, but Kafka lists only log.retention.ms's synonyms (none: it is unset)
    # and then calls the source DEFAULT_CONFIG.
    assert ret.value == str(48 * 3600 * 1000) and (ret.config_source, ret.synonyms) == (5, [])
    assert seg.documentation and seg.config_type == 3
    only = describe(h, TOPIC, "a", ["cleanup.policy", "nonsense"], version=1, synonyms=False, docs=False)
    assert [(c.name, c.value, c.config_source) for c in only.configs] == [
        ("cleanup.policy", "delete", 5)
    ]  # DEFAULT_CONFIG
    assert describe(h, TOPIC, "nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_broker_configs(h: BrokerHarness) -> None:
    r = describe(h, BROKER, str(h.broker.node_id), ["num.partitions", "log.retention.hours", "node.id"])
    configs = {c.name: c for c in r.configs}
    assert configs["num.partitions"].value == "2" and configs["num.partitions"].config_source == 4
    assert configs["node.id"].read_only
    assert describe(h, BROKER, "99").error_code == ErrorCode.INVALID_REQUEST
    assert describe(h, 8, "x").error_code == ErrorCode.INVALID_REQUEST


def test_incremental_alter_topic_configs(h: BrokerHarness) -> None:
    create(h, {"name": "a"})

    def alter(*ops: tuple[str, int, str | None], validate_only: bool = False, name: str = "a") -> Any:
        body = {"resources": [{"resource_type": TOPIC, "resource_name": name,
                               "configs": [{"name": n, "config_operation": o, "value": v} for n, o, v in ops]}],
                "validate_only": validate_only}  # fmt: skip
        return h.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]

    assert alter(("retention.ms", 0, "5000")).error_code == 0
    assert alter(("cleanup.policy", 2, "compact")).error_code == 0
    configs = {c.name: c.value for c in describe(h, TOPIC, "a").configs}
    assert configs["retention.ms"] == "5000" and configs["cleanup.policy"] == "delete,compact"
    assert h.broker.replicas.partition_log("a", 0).config.retention_ms == 5000
    assert h.broker.replicas.partition_log("a", 1).config.compact
    assert alter(("cleanup.policy", 3, "delete")).error_code == 0
    assert alter(("retention.ms", 1, None)).error_code == 0
    configs = {c.name: (c.value, c.config_source) for c in describe(h, TOPIC, "a").configs}
    # The override gone, the value is the broker's again (48 h; Kafka calls that source DEFAULT_CONFIG).
    assert configs["cleanup.policy"] == ("compact", 1) and configs["retention.ms"] == (str(48 * 3_600_000), 5)
    assert alter(("retention.ms", 2, "1")).error_code == ErrorCode.INVALID_CONFIG  # APPEND on a non-list
    assert alter(("bogus", 0, "1")).error_code == ErrorCode.INVALID_CONFIG
    assert alter(("retention.ms", 0, "1"), ("retention.ms", 0, "2")).error_code == ErrorCode.INVALID_REQUEST
    assert alter(("retention.ms", 0, "7"), validate_only=True).error_code == 0
    assert h.broker.metadata.topic("a").configs.get("retention.ms") is None
    assert alter(("retention.ms", 0, "7"), name="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    h.restart()
    assert h.broker.metadata.topic("a").configs == {"cleanup.policy": "compact"}
    assert h.broker.replicas.partition_log("a", 0).config.compact


def test_alter_configs_replaces_all_overrides(h: BrokerHarness) -> None:
    create(h, {"name": "a", "configs": [{"name": "retention.ms", "value": "1000"}]})
    body = {"resources": [{"resource_type": TOPIC, "resource_name": "a",
                           "configs": [{"name": "max.message.bytes", "value": "5000"}]}], "validate_only": False}  # fmt: skip
    assert h.call(ALTER_CONFIGS, 2, body).responses[0].error_code == 0
    assert h.broker.metadata.topic("a").configs == {"max.message.bytes": "5000"}
    body["resources"][0]["configs"] = [{"name": "max.message.bytes", "value": "lots"}]
    assert h.call(ALTER_CONFIGS, 0, body).responses[0].error_code == ErrorCode.INVALID_CONFIG


def test_alter_dynamic_broker_config(h: BrokerHarness) -> None:
    create(h, {"name": "a"})
    node = str(h.broker.node_id)
    body = {
        "resources": [
            {
                "resource_type": BROKER,
                "resource_name": node,
                "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "12345"}],
            }
        ],
        "validate_only": False,
    }
    assert h.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0].error_code == 0
    ret = {c.name: c for c in describe(h, TOPIC, "a").configs}["retention.ms"]
    assert (ret.value, ret.config_source) == ("12345", 2)
    assert h.broker.replicas.partition_log("a", 0).config.retention_ms == 12345
    body["resources"][0]["configs"] = [{"name": "node.id", "config_operation": 0, "value": "5"}]
    assert h.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0].error_code == ErrorCode.INVALID_CONFIG
    h.restart()
    assert h.broker.replicas.partition_log("a", 0).config.retention_ms == 12345


def test_describe_cluster(h: BrokerHarness) -> None:
    r = h.call(DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
    assert (r.error_code, r.controller_id, r.cluster_id) == (0, h.broker.node_id, h.broker.cluster_id)
    assert [(b.broker_id, b.host, b.port) for b in r.brokers] == [(h.broker.node_id, "127.0.0.1", 19092)]
    assert h.call(DESCRIBE_CLUSTER, 1, {"endpoint_type": 2}).error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    assert h.call(DESCRIBE_CLUSTER, 0, {}).error_code == 0
    v2 = h.call(DESCRIBE_CLUSTER, 2, {"endpoint_type": 1, "include_fenced_brokers": True})  # KIP-1073
    assert [(b.broker_id, b.is_fenced) for b in v2.brokers] == [(h.broker.node_id, False)]


def test_metadata_v13_has_a_top_level_error_code(h: BrokerHarness) -> None:
    create(h, {"name": "a"})
    r = h.call(
        METADATA, 13, {"topics": [{"name": "a"}, {"name": "nope"}], "allow_auto_topic_creation": False}
    )
    assert r.error_code == 0
    assert [(t.name, t.error_code) for t in r.topics] == [
        ("a", 0),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]


def test_describe_log_dirs(h: BrokerHarness, tmp_path: Path) -> None:
    create(h, {"name": "a"}, {"name": "b"})
    h.call(
        PRODUCE,
        9,
        {
            "acks": 1,
            "timeout_ms": 100,
            "topic_data": [{"name": "a", "partition_data": [{"index": 1, "records": batch(b"x" * 100)}]}],
        },
    )
    r = h.call(DESCRIBE_LOG_DIRS, 5, {"topics": None})
    (d,) = r.results
    assert d.log_dir == str(tmp_path / "data") and d.total_bytes > 0 and d.usable_bytes > 0
    assert d.is_cordoned is False  # v5 (KIP-1066): nothing is cordoned
    sizes = {(t.name, p.partition_index): p.partition_size for t in d.topics for p in t.partitions}
    assert set(sizes) == {("a", 0), ("a", 1), ("b", 0), ("b", 1)}
    assert sizes[("a", 1)] > 100 and sizes[("a", 0)] == 0
    r = h.call(DESCRIBE_LOG_DIRS, 1, {"topics": [{"topic": "a", "partitions": [1]}]})
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.results[0].topics] == [("a", [1])]


def test_more_than_ten_thousand_partitions_in_one_request_is_a_policy_violation(h: BrokerHarness) -> None:
    # As Kafka's controller (KAFKA-17870): the limit is on the request's total, and refuses it whole.
    a, b = create(h, {"name": "a", "num_partitions": 6000}, {"name": "b", "num_partitions": 4001})
    assert (a.error_code, b.error_code) == (ErrorCode.POLICY_VIOLATION, ErrorCode.POLICY_VIOLATION)
    assert h.broker.metadata.topic("a") is None and h.broker.metadata.topic("b") is None
    (c,) = create(h, {"name": "c", "num_partitions": 1})
    assert c.error_code == 0
    body = {
        "topics": [{"name": "c", "count": 10_002, "assignments": None}],
        "timeout_ms": 100,
        "validate_only": False,
    }
    assert h.call(CREATE_PARTITIONS, 3, body).results[0].error_code == ErrorCode.POLICY_VIOLATION
    assert h.broker.metadata.topic("c").partitions == 1
