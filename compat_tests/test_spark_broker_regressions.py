"""Broker bugs found by running Spark's Kafka connector against kcompat, each pinned by the smallest
real-client reproduction (fast: no Spark here; the Spark tests are in compat_tests/spark/).

1. DescribeTopicPartitions v0 returned null for EligibleLeaderReplicas and LastKnownElr. The schema
   allows null, but the Java admin client (3.9 and 4.x, `DescribeTopicPartitionsResponse.
   partitionToTopicPartitionInfo`) calls `.stream()` on both without a null check, so
   `Admin.describeTopics` fails with a NullPointerException. Spark's connector describes every topic
   it reads before planning, so every `format("kafka")` read failed. Kafka sends empty arrays
   (fixed in the server by fc4ea68).
"""

from __future__ import annotations

from typing import Any

import pytest
from support import kafka_tool

pytestmark = pytest.mark.timeout(120)


def test_java_admin_describe_topics(kcompat_broker: Any) -> None:
    bootstrap = kcompat_broker.bootstrap
    kafka_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "described",
               "--partitions", "3")  # fmt: skip
    result = kafka_tool("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "described",
                        check=False)  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "NullPointerException" not in output
    lines = [line for line in result.stdout.splitlines() if "Partition:" in line]
    assert [line.split("Partition:")[1].split()[0] for line in lines] == ["0", "1", "2"], result.stdout
