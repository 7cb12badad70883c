"""Kafka 4.3.1's admin tools against one `kcompat serve` (issue 29): what a one-node Kafka answers.

kafka-configs with the broker properties and topic configs Kafka accepts (Kerberos and tiered
storage ones included, as Kafka takes them without a Kerberos login or tiered storage), and the
bounds Kafka enforces on the consumer protocol's heartbeat interval. The controller's admin APIs a
single node answers as its own controller: kafka-leader-election, kafka-reassign-partitions
--list/--verify/--execute, kafka-metadata-quorum describe, kafka-features describe/upgrade/downgrade
(persisted across a restart), kafka-cluster unregister.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import kafka_tool

from compat_tests.client_data import unique
from kcompat.testing import Broker, BrokerStartError

pytestmark = pytest.mark.timeout(300)


def configs(bootstrap: str, *args: str, check: bool = True) -> Any:
    return kafka_tool("kafka-configs", "--bootstrap-server", bootstrap, *args, check=check)


def test_kerberos_broker_config_is_accepted_and_reported(kcompat_session_broker: Any) -> None:
    bs = kcompat_session_broker.bootstrap
    out = configs(bs, "--entity-type", "brokers", "--entity-name", "1", "--alter",
                  "--add-config", "sasl.kerberos.min.time.before.relogin=58000").stdout  # fmt: skip
    assert "Completed updating config for broker 1." in out, out
    described = configs(bs, "--entity-type", "brokers", "--entity-name", "1", "--describe").stdout
    assert "sasl.kerberos.min.time.before.relogin=58000 sensitive=false" in described, described
    configs(bs, "--entity-type", "brokers", "--entity-name", "1", "--alter",
            "--delete-config", "sasl.kerberos.min.time.before.relogin")  # fmt: skip


def test_heartbeat_interval_below_kafkas_bound_stops_start_up(
    kcompat_broker_factory: Any, tmp_path: Path
) -> None:
    """group.consumer.min.heartbeat.interval.ms (5 s) bounds group.consumer.heartbeat.interval.ms, and
    Kafka refuses to start below it (GroupCoordinatorConfig); lowering the bound lets it start."""
    refused = Broker(data_dir=tmp_path / "refused", log_path=tmp_path / "refused.log",
                     overrides={"group.consumer.heartbeat.interval.ms": "1000"}, start_timeout=30)  # fmt: skip
    with pytest.raises(BrokerStartError) as info:
        refused.start()
    assert (
        "group.consumer.heartbeat.interval.ms must be greater than or equal to "
        "group.consumer.min.heartbeat.interval.ms" in str(info.value)
    )
    b = kcompat_broker_factory({"group.consumer.heartbeat.interval.ms": "1000",
                                "group.consumer.min.heartbeat.interval.ms": "500"})  # fmt: skip
    out = configs(b.bootstrap, "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all").stdout
    assert "group.consumer.heartbeat.interval.ms=1000 sensitive=false" in out, out


def test_remote_log_topic_configs_are_accepted(kcompat_session_broker: Any) -> None:
    bs = kcompat_session_broker.bootstrap
    topic = unique("remote-cfg")
    kafka_tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "1")
    out = configs(bs, "--entity-type", "topics", "--entity-name", topic, "--alter",
                  "--add-config", "remote.log.delete.on.disable=true,remote.log.copy.disable=false").stdout  # fmt: skip
    assert f"Completed updating config for topic {topic}." in out, out
    described = configs(bs, "--entity-type", "topics", "--entity-name", topic, "--describe", "--all").stdout
    assert "remote.log.delete.on.disable=true sensitive=false" in described, described
    assert "remote.log.copy.disable=false sensitive=false" in described, described
    refused = configs(bs, "--entity-type", "topics", "--entity-name", topic, "--alter",
                      "--add-config", "remote.storage.enable=true", check=False)  # fmt: skip
    assert refused.returncode != 0  # no tiered storage: only the values that mean none


@pytest.fixture(scope="module")
def topic(kcompat_session_broker: Any) -> str:
    name = unique("admin-tools")
    kafka_tool("kafka-topics", "--bootstrap-server", kcompat_session_broker.bootstrap, "--create",
               "--topic", name, "--partitions", "2")  # fmt: skip
    return name


def tool(broker: Any, name: str, *args: str, check: bool = True) -> Any:
    return kafka_tool(name, "--bootstrap-server", broker.bootstrap, *args, check=check)


def test_leader_election_is_not_needed(kcompat_session_broker: Any, topic: str) -> None:
    b = kcompat_session_broker
    out = tool(
        b, "kafka-leader-election", "--election-type", "preferred", "--topic", topic, "--partition", "0"
    )
    assert f"Valid replica already elected for partitions {topic}-0" in out.stdout, out.stdout
    every = tool(b, "kafka-leader-election", "--election-type", "unclean", "--all-topic-partitions")
    assert "could not be elected" not in every.stdout + every.stderr
    missing = tool(b, "kafka-leader-election", "--election-type", "preferred", "--topic", "no-such-topic",
                   "--partition", "0", check=False)  # fmt: skip
    assert missing.returncode != 0 and "No such topic as no-such-topic" in missing.stdout + missing.stderr


def test_reassignments_list_verify_and_execute(
    kcompat_session_broker: Any, topic: str, tmp_path: Path
) -> None:
    b = kcompat_session_broker
    assert "No partition reassignments found." in tool(b, "kafka-reassign-partitions", "--list").stdout
    here = tmp_path / "here.json"
    here.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1]}]})
    )
    executed = tool(b, "kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(here)).stdout
    assert f"Successfully started partition reassignment for {topic}-0" in executed, executed
    verified = tool(b, "kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(here)).stdout
    assert f"Reassignment of partition {topic}-0 is completed." in verified, verified
    # A broker that is not there: the tool refuses it first (it reads DescribeCluster), and the
    # API answers as Kafka's controller does when asked directly.
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2]}]})
    )
    refused = tool(b, "kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(elsewhere),
                   check=False)  # fmt: skip
    assert refused.returncode != 0 and "Unknown broker id 2" in refused.stdout + refused.stderr


def test_metadata_quorum_is_this_broker(kcompat_session_broker: Any) -> None:
    b = kcompat_session_broker
    status = tool(b, "kafka-metadata-quorum", "describe", "--status").stdout
    meta = (b.data_dir / "meta.properties").read_text()
    directory_id = re.search(r"directory.id=(\S+)", meta).group(1)  # type: ignore[union-attr]
    assert re.search(r"LeaderId:\s+1\n", status), status
    assert (f'CurrentVoters:          [{{"id": 1, "directoryId": "{directory_id}", "endpoints": '
            f'["PLAINTEXT://{b.host}:{b.port}"]}}]') in status, status  # fmt: skip
    assert "CurrentObservers:       []" in status
    replication = tool(b, "kafka-metadata-quorum", "describe", "--replication").stdout.splitlines()
    assert replication[1].split()[:3] == ["1", directory_id, "0"] and replication[1].split()[-1] == "Leader"


def feature_levels(broker: Any) -> dict[str, tuple[str, str]]:
    rows = [line.split() for line in tool(broker, "kafka-features", "describe").stdout.splitlines()]
    return {r[1]: (r[7], r[9]) for r in rows if r and r[0] == "Feature:"}


def test_features_downgrade_and_upgrade_persist(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory()
    assert feature_levels(b)["transaction.version"] == ("2", "0")
    out = tool(b, "kafka-features", "downgrade", "--feature", "transaction.version=1").stdout
    assert "transaction.version was downgraded to 1." in out, out
    assert feature_levels(b)["transaction.version"] == ("1", "1")
    b.stop()
    b.start()
    assert feature_levels(b)["transaction.version"] == ("1", "1")  # persisted
    out = tool(b, "kafka-features", "upgrade", "--feature", "transaction.version=2").stdout
    assert "transaction.version was upgraded to 2." in out, out
    too_high = tool(b, "kafka-features", "upgrade", "--feature", "transaction.version=3", check=False)
    assert too_high.returncode != 0
    assert "Invalid update version 3 for feature transaction.version. Local controller 1 only supports " \
        "versions 0-2" in too_high.stdout  # fmt: skip
    wrong_way = tool(b, "kafka-features", "upgrade", "--feature", "transaction.version=1", check=False)
    assert wrong_way.returncode != 0 and "without setting the upgrade type" in wrong_way.stdout
    assert feature_levels(b)["transaction.version"] == ("2", "2")


def test_cluster_unregister(kcompat_session_broker: Any) -> None:
    b = kcompat_session_broker
    other = kafka_tool(
        "kafka-cluster", "unregister", "--bootstrap-server", b.bootstrap, "--id", "5", check=False
    )
    assert other.returncode != 0 and "Broker ID 5 is not currently registered" in other.stdout + other.stderr
    mine = kafka_tool("kafka-cluster", "unregister", "--bootstrap-server", b.bootstrap, "--id", "1")
    assert "Broker 1 is no longer registered." in mine.stdout, mine.stdout
