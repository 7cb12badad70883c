"""Feature levels under a real Kafka 4.3.1 controller (issue 25 "Feature levels", issue 26 fault 3).

The controller is formatted as `kafka-storage format` does by default (share.version=1,
eligible.leader.replicas.version=1, group.version=1, transaction.version=2, streams.version=1,
metadata.version 4.3-IV0, kraft.version=1). A kcompat broker registers and is unfenced there, and
`kafka-features describe` through it lists what the controller lists, at the metadata image's
offset, as a Kafka broker reports it. (kcompat now claims every level Kafka 4.3.1 can finalize, so
no controller refuses it; tests/server/test_features.py checks the one-line refusal.)

Group configs in cluster mode (issue 25, "Group configs") share the controller: kafka-configs
through the kcompat broker is forwarded to the controller, which validates and writes
ConfigRecords; the broker describes them from its image and its consumer groups use them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from support import ClusterBrokerFactory, kafka_tool, log_has

from kcompat.testing import wait_until
from kcompat.testing_cluster import ControllerQuorum

RELEASE_DEFAULTS: dict[str, int] = {}  # no --feature: the 4.3 release defaults


@pytest.fixture(scope="module")
def default_quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerQuorum]:
    with ControllerQuorum(tmp_path_factory.mktemp("defaults"), features=RELEASE_DEFAULTS) as quorum:
        yield quorum


def describe(*where: str) -> tuple[dict[str, str], int]:
    """`kafka-features describe`: the finalized levels above 0 and the epoch they were read at."""
    out = kafka_tool("kafka-features", *where, "describe").stdout
    levels, epochs = {}, set()
    for line in out.splitlines():
        m = re.match(r"Feature: (\S+)\s.*FinalizedVersionLevel: (\S+)\s+Epoch: (\S+)", line)
        assert m is not None, out
        if m[2] not in ("-", "0"):
            levels[m[1]] = m[2]  # metadata.version as its name (4.3-IV0)
        if m[3] != "-":
            epochs.add(int(m[3]))
    assert len(epochs) == 1, out
    return levels, epochs.pop()


def test_registers_under_default_levels_and_reports_the_controllers(
    default_quorum: ControllerQuorum, cluster_broker_factory: ClusterBrokerFactory
) -> None:
    broker = cluster_broker_factory(default_quorum, 1)
    broker.start()
    wait_until(
        lambda: log_has(broker, "metadata: broker 1 is unfenced"), "the broker to be unfenced", timeout=60
    )
    controller_levels, changed_at = describe("--bootstrap-controller", default_quorum.bootstrap_servers)
    assert (
        controller_levels["share.version"] == "1"
        and controller_levels["eligible.leader.replicas.version"] == "1"
    )
    assert controller_levels["streams.version"] == "1" and len(controller_levels) == 7, controller_levels
    broker_levels, epoch = describe("--bootstrap-server", broker.bootstrap)
    status = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", default_quorum.bootstrap_servers,
                        "describe", "--status").stdout  # fmt: skip
    high_watermark = int(re.search(r"HighWatermark:\s+(\d+)", status)[1])  # type: ignore[index]
    assert broker_levels == controller_levels
    # As a Kafka 4.3.1 broker (KRaftMetadataCache.features): the offset of the image it serves,
    # never local configuration's 0. The controller reports the offset of the last feature change,
    # so the broker's is at or past it, and below the quorum's high watermark.
    assert 0 < changed_at <= epoch < high_watermark, (changed_at, epoch, high_watermark)


def test_group_configs_are_config_records_of_the_image(
    default_quorum: ControllerQuorum, cluster_broker_factory: ClusterBrokerFactory
) -> None:
    broker = cluster_broker_factory(default_quorum, 4)
    broker.start()
    wait_until(
        lambda: log_has(broker, "metadata: broker 4 is unfenced"), "the broker to be unfenced", timeout=60
    )
    where = ("--bootstrap-server", broker.bootstrap, "--entity-type", "groups", "--entity-name", "cg")
    kafka_tool("kafka-configs", *where, "--alter", "--add-config", "consumer.heartbeat.interval.ms=6000")

    # The broker writes nothing itself in cluster mode: what it describes is the image's record.
    def described() -> str:
        return kafka_tool("kafka-configs", *where, "--describe").stdout

    wait_until(
        lambda: "consumer.heartbeat.interval.ms=6000" in described(),
        "the ConfigRecord in the image",
        timeout=30,
    )
    listed = kafka_tool("kafka-configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "groups",
                        "--describe").stdout  # fmt: skip
    assert "cg" in listed
    refused = kafka_tool("kafka-configs", *where, "--alter", "--add-config", "consumer.session.timeout.ms=1000",
                         check=False)  # fmt: skip
    assert (
        "must be greater than or equal to group.consumer.min.session.timeout.ms"
        in refused.stdout + refused.stderr
    )
    # Broker loggers are the broker's own: answered here, never forwarded to the controller.
    loggers = (
        "--bootstrap-server",
        broker.bootstrap,
        "--entity-type",
        "broker-loggers",
        "--entity-name",
        "4",
    )
    kafka_tool("kafka-configs", *loggers, "--alter", "--add-config", "kcompat.cluster=DEBUG")
    assert "kcompat.cluster=DEBUG" in kafka_tool("kafka-configs", *loggers, "--describe").stdout
