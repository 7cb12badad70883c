"""Kafka 4.3.1's admin tools against one `kcompat serve` (issue 29): what a one-node Kafka answers.

kafka-configs with the broker properties and topic configs Kafka accepts (Kerberos and tiered
storage ones included, as Kafka takes them without a Kerberos login or tiered storage), and the
bounds Kafka enforces on the consumer protocol's heartbeat interval.
"""

from __future__ import annotations

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
