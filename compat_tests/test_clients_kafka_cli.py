"""Apache Kafka's own command-line tools (Java client 4.x, run from the jars in .deps/) against
`kcompat serve`: topics, console producer/consumer, configs, offsets, delete records."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import kafka_tool

from compat_tests.client_data import unique

pytestmark = pytest.mark.timeout(300)


def test_features_describe(kcompat_session_broker: Any) -> None:
    """kafka-features describe: the levels a Kafka 4.3.1 broker formatted with defaults finalizes,
    and nothing kcompat lacks (no metadata.version: no KRaft metadata log)."""
    out = kafka_tool(
        "kafka-features", "--bootstrap-server", kcompat_session_broker.bootstrap, "describe"
    ).stdout
    rows = [line.split() for line in out.splitlines() if line.startswith("Feature:")]
    assert rows == [
        ["Feature:", name, "SupportedMinVersion:", "0", "SupportedMaxVersion:", top,
         "FinalizedVersionLevel:", top, "Epoch:", "0"]
        for name, top in (("eligible.leader.replicas.version", "1"), ("group.version", "1"),
                          ("share.version", "1"), ("streams.version", "1"), ("transaction.version", "2"))
    ]  # fmt: skip


def test_broker_api_versions_are_kafka_4_3s_where_implemented(kcompat_session_broker: Any) -> None:
    out = kafka_tool(
        "kafka-broker-api-versions", "--bootstrap-server", kcompat_session_broker.bootstrap
    ).stdout
    for row in ("Produce(0): 0 to 13 [usable: 13]", "ListOffsets(2): 1 to 11 [usable: 11]",
                "Metadata(3): 0 to 13 [usable: 13]", "OffsetCommit(8): 2 to 10 [usable: 10]",
                "OffsetFetch(9): 1 to 10 [usable: 10]", "DescribeGroups(15): 0 to 6 [usable: 6]",
                "DescribeLogDirs(35): 1 to 5 [usable: 5]", "DescribeCluster(60): 0 to 2 [usable: 2]",
                "ConsumerGroupDescribe(69): 0 to 1 [usable: 1]", "InitProducerId(22): 0 to 5 [usable: 5]"):  # fmt: skip
        assert row in out, out


def test_topics_create_describe_alter_delete(kcompat_session_broker: Any) -> None:
    bs = kcompat_session_broker.bootstrap
    topic = unique("cli-topics")
    kafka_tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "2",
               "--config", "retention.ms=3600000")  # fmt: skip
    again = kafka_tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic, check=False)
    assert again.returncode != 0 and "already exists" in (again.stdout + again.stderr)
    kafka_tool("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", topic, "--partitions", "3")
    described = kafka_tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", topic).stdout
    assert "PartitionCount: 3" in described and "retention.ms=3600000" in described
    listed = kafka_tool("kafka-topics", "--bootstrap-server", bs, "--list").stdout.split()
    assert topic in listed
    kafka_tool("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", topic)
    assert topic not in kafka_tool("kafka-topics", "--bootstrap-server", bs, "--list").stdout.split()


def test_console_produce_consume_offsets_and_delete_records(kcompat_session_broker: Any) -> None:
    bs = kcompat_session_broker.bootstrap
    topic = unique("cli-data")
    kafka_tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "1")
    lines = [f"key{i}\tvalue {i}" for i in range(10)]
    kafka_tool("kafka-console-producer", "--bootstrap-server", bs, "--topic", topic, "--compression-codec", "lz4",
               "--reader-property", "parse.key=true", input="\n".join(lines) + "\n")  # fmt: skip
    out = kafka_tool("kafka-console-consumer", "--bootstrap-server", bs, "--topic", topic, "--from-beginning",
                     "--max-messages", "10", "--formatter-property", "print.key=true", "--timeout-ms", "20000").stdout  # fmt: skip
    assert out.splitlines() == lines
    offsets = kafka_tool("kafka-get-offsets", "--bootstrap-server", bs, "--topic", topic).stdout
    assert offsets.split() == [f"{topic}:0:10"]
    earliest = kafka_tool(
        "kafka-get-offsets", "--bootstrap-server", bs, "--topic", topic, "--time", "-2"
    ).stdout
    assert earliest.split() == [f"{topic}:0:0"]
    spec = kcompat_session_broker.data_dir.parent / f"{topic}-delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 7}]}))
    kafka_tool("kafka-delete-records", "--bootstrap-server", bs, "--offset-json-file", str(spec))
    earliest = kafka_tool(
        "kafka-get-offsets", "--bootstrap-server", bs, "--topic", topic, "--time", "-2"
    ).stdout
    assert earliest.split() == [f"{topic}:0:7"]
    out = kafka_tool("kafka-console-consumer", "--bootstrap-server", bs, "--topic", topic, "--from-beginning",
                     "--max-messages", "3", "--timeout-ms", "20000").stdout  # fmt: skip
    assert out.splitlines() == ["value 7", "value 8", "value 9"]


def test_configs_altered_and_read_back(kcompat_session_broker: Any) -> None:
    bs = kcompat_session_broker.bootstrap
    topic = unique("cli-configs")
    kafka_tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic)
    kafka_tool("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name", topic,
               "--add-config", "retention.ms=1234567,cleanup.policy=[compact,delete]")  # fmt: skip
    out = kafka_tool("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                     "--entity-name", topic).stdout  # fmt: skip
    assert "retention.ms=1234567" in out and "cleanup.policy=compact,delete" in out
    kafka_tool("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name", topic,
               "--delete-config", "retention.ms")  # fmt: skip
    out = kafka_tool("kafka-configs", "--bootstrap-server", bs, "--describe", "--all", "--entity-type", "topics",
                     "--entity-name", topic).stdout  # fmt: skip
    assert "retention.ms=604800000" in out
    broker = kafka_tool("kafka-configs", "--bootstrap-server", bs, "--describe", "--all", "--entity-type", "brokers",
                        "--entity-name", "1").stdout  # fmt: skip
    assert "num.partitions=1" in broker
