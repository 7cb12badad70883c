"""Cluster mode, client quotas (issue 29): kafka-configs --entity-type users|clients through a
kcompat broker is forwarded to Kafka 4.3.1's controller (AlterClientQuotas in an Envelope), the
quotas come back in the metadata image's ClientQuotaRecords (the other broker describes them),
and they are enforced: a producer over its producer_byte_rate is throttled.
One Kafka controller and two kcompat brokers for the module.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer
from support import kafka_tool

from kcompat.testing import wait_until
from kcompat.testing_cluster import DevCluster

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def kcompat_cluster_brokers() -> int:
    return 2


def configs(where: tuple[str, str], *args: str, check: bool = True) -> str:
    result = kafka_tool("kafka-configs", *where, *args, check=check)
    return (result.stdout + result.stderr).strip()


def test_quotas_go_through_the_controller_and_are_enforced(kcompat_cluster: DevCluster) -> None:
    broker = ("--bootstrap-server", kcompat_cluster.brokers[0].endpoint)
    other = ("--bootstrap-server", kcompat_cluster.brokers[1].endpoint)
    alice = ("--entity-type", "users", "--entity-name", "alice")
    app = ("--entity-type", "clients", "--entity-name", "throttled")
    assert configs(broker, "--alter", *alice, "--add-config", "consumer_byte_rate=2097152") == (
        "Completed updating config for user alice."
    )
    assert configs(broker, "--alter", *app, "--add-config", "producer_byte_rate=102400") == (
        "Completed updating config for client throttled."
    )
    expected = "Quota configs for user-principal 'alice' are consumer_byte_rate=2097152.0"
    # The other broker has it from the controller, through its image (a broker keeps none itself).
    wait_until(
        lambda: configs(other, "--describe", *alice) == expected, "the quota in broker 2's image", timeout=30
    )
    assert configs(broker, "--describe", *alice) == expected
    bad = configs(broker, "--alter", *alice, "--add-config", "producer_byte_rate=-1", check=False)
    assert (
        "InvalidRequestException: Quota producer_byte_rate must be greater than 0" in bad
    )  # the controller's answer

    # 100 KiB/s: the first 1 MiB goes through (10 windows' worth), then the producer is throttled.
    throttles: list[int] = []
    p = Producer(
        {
            "bootstrap.servers": kcompat_cluster.brokers[0].endpoint,
            "client.id": "throttled",
            "throttle_cb": lambda e: throttles.append(int(e.throttle_time * 1000)),
        }
    )
    delivered: list[Any] = []
    start = time.monotonic()
    for _ in range(200):
        p.produce("quota-cluster", b"x" * 10_000, callback=lambda err, msg: delivered.append(err))
        p.poll(0)
    deadline = time.monotonic() + 60
    while (len(delivered) < 200 or not throttles) and time.monotonic() < deadline:
        p.poll(0.2)
    elapsed = time.monotonic() - start
    assert len(delivered) == 200 and not any(delivered)  # nothing lost
    assert throttles and max(throttles) > 0
    assert elapsed > 5  # 2 MB at 100 KiB/s past the first 1 MiB: not at full speed

    configs(broker, "--alter", *app, "--delete-config", "producer_byte_rate")
    configs(broker, "--alter", *alice, "--delete-config", "consumer_byte_rate")
    wait_until(
        lambda: configs(other, "--describe", "--entity-type", "users") == "",
        "the quotas removed",
        timeout=30,
    )
