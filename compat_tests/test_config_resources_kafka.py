"""Group configs, client-metrics subscriptions and broker loggers with Kafka 4.3.1's own
kafka-configs (the Java admin client: describeConfigs, incrementalAlterConfigs,
listConfigResources), side by side with a real Kafka 4.3.1 broker formatted with defaults: the same
commands give the same output (issue 25, "Group configs").
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import pytest
from support import kafka_tool

from benchmarks.brokers import COMMON, KafkaBroker
from kcompat.testing import Broker

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    why = KafkaBroker.available()
    if why is not None:
        pytest.fail(why, pytrace=False)
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-group-configs"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def kcompat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("kcompat-group-configs")
    # The Kafka broker runs with the bench's settings (COMMON): the group.share.* ones show in the
    # share.* group configs' synonyms, so kcompat gets them too.
    share = {k: v for k, v in COMMON.items() if k.startswith("group.share.")}
    broker = Broker(base / "data", base / "kcompat.log", python=sys.executable, overrides=share)
    broker.start()
    yield broker
    broker.stop()


def configs(bootstrap: str, *args: str, check: bool = True) -> str:
    result = kafka_tool("kafka-configs", "--bootstrap-server", bootstrap, *args, check=check)
    return result.stdout + (result.stderr if not check else "")


def both(kafka: KafkaBroker, kcompat: Broker, *args: str, check: bool = True) -> tuple[str, str]:
    return configs(f"{kafka.host}:{kafka.port}", *args, check=check), configs(
        kcompat.bootstrap, *args, check=check
    )


def reasons(output: str) -> list[str]:
    """The exceptions a failed command names (`...InvalidConfigurationException: why`)."""
    return re.findall(r"(\w+Exception: [^\n]*)", output)


def test_group_configs_as_kafka(kafka: KafkaBroker, kcompat: Broker) -> None:
    alter = ("--alter", "--entity-type", "groups", "--entity-name", "g1", "--add-config",
             "consumer.session.timeout.ms=50000,share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000")  # fmt: skip
    theirs, ours = both(kafka, kcompat, *alter)
    assert ours == theirs and "Completed updating config for group g1." in ours
    theirs, ours = both(
        kafka, kcompat, "--describe", "--entity-type", "groups", "--entity-name", "g1", "--all"
    )
    assert ours == theirs
    assert "consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:" in ours, ours
    assert len([line for line in ours.splitlines() if "sensitive=" in line]) == 17
    theirs, ours = both(kafka, kcompat, "--describe", "--entity-type", "groups", "--entity-name", "g1")
    assert ours == theirs  # only the group's own: "Dynamic configs for group g1 are:"
    # Without a name: ListConfigResources, then each group's configs.
    theirs, ours = both(kafka, kcompat, "--describe", "--entity-type", "groups")
    assert ours == theirs and "g1" in ours
    # Refused as Kafka refuses, with Kafka's reason.
    for bad in (
        "consumer.session.timeout.ms=1000",
        "share.record.lock.duration.ms=999999",
        "no.such.config=1",
    ):
        theirs, ours = both(kafka, kcompat, "--alter", "--entity-type", "groups", "--entity-name", "g1",
                            "--add-config", bad, check=False)  # fmt: skip
        assert reasons(theirs) and reasons(ours) == reasons(theirs), (bad, theirs, ours)
    theirs, ours = both(kafka, kcompat, "--alter", "--entity-type", "groups", "--entity-name", "g1",
                        "--delete-config", "consumer.session.timeout.ms")  # fmt: skip
    assert ours == theirs


def test_client_metrics_as_kafka(kafka: KafkaBroker, kcompat: Broker) -> None:
    alter = ("--alter", "--entity-type", "client-metrics", "--entity-name", "producers", "--add-config",
             "metrics=[org.apache.kafka.producer.],interval.ms=60000,match=[client_software_name=apache-kafka-java]")  # fmt: skip
    theirs, ours = both(kafka, kcompat, *alter)
    assert ours == theirs
    theirs, ours = both(
        kafka, kcompat, "--describe", "--entity-type", "client-metrics", "--entity-name", "producers"
    )
    assert ours == theirs and "interval.ms=60000" in ours
    theirs, ours = both(kafka, kcompat, "--describe", "--entity-type", "client-metrics")
    assert ours == theirs
    theirs, ours = both(kafka, kcompat, "--alter", "--entity-type", "client-metrics", "--entity-name", "producers",
                        "--add-config", "interval.ms=5", check=False)  # fmt: skip
    assert reasons(ours) == reasons(theirs) and "interval must be between 100 and 3600000" in ours


def test_broker_loggers_change_at_run_time(kcompat: Broker) -> None:
    where = ("--entity-type", "broker-loggers", "--entity-name", "1")
    out = configs(kcompat.bootstrap, "--describe", *where)
    assert "root=" in out and "kcompat.server=" in out
    assert "kcompat.server=DEBUG" not in out
    configs(kcompat.bootstrap, "--alter", *where, "--add-config", "kcompat.server=DEBUG")
    assert "kcompat.server=DEBUG sensitive=false" in configs(kcompat.bootstrap, "--describe", *where)
    configs(kcompat.bootstrap, "--alter", *where, "--delete-config", "kcompat.server")
    assert "kcompat.server=DEBUG" not in configs(kcompat.bootstrap, "--describe", *where)
