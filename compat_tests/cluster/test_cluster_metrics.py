"""Cluster mode's /metrics and console, scraped over HTTP from three `kcompat serve` brokers under a
REAL Kafka 4.3 controller: Kafka's ReplicaManager gauges (partition and leader counts,
under-replicated partitions) and ISR shrink/expand meters follow a follower's kill -9 and return,
and the console lists every broker and the controller, and each partition's leader, replicas and ISR.
A client-metrics subscription set through one broker is offered by another (KIP-714 telemetry).

Broker 3 follows every partition of a 4-partition topic (explicit assignment; brokers 1 and 2
lead two each). Killed, each leader shrinks its two ISRs through AlterPartition after
replica.lag.time.max.ms (4 s, well within the controller's 15 s session timeout, so the leaders'
own shrinks, which the meter counts, come before the controller's fencing): the under-replicated
gauges then read exactly 2 and 2; restarted, broker 3 catches up and both gauges are back to 0.
"""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from support import cluster_broker

from kcompat.client.connection import Connection
from kcompat.kafka_uuid import ZERO_UUID
from kcompat.testing import Broker, free_port, wait_until
from kcompat.testing_cluster import ControllerQuorum
from kcompat.wire.messages.get_telemetry_subscriptions import GET_TELEMETRY_SUBSCRIPTIONS
from kcompat.wire.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from kcompat.wire.messages.push_telemetry import PUSH_TELEMETRY
from tests.telemetry.otlp_encode import metric, metrics_data, number_point

pytestmark = pytest.mark.timeout(180)

TOPIC = "watched"
ASSIGNMENT = [[1, 2, 3], [2, 1, 3], [1, 3, 2], [2, 3, 1]]  # broker 3 never leads
LED = {1: 2, 2: 2, 3: 0}
RM = "kafka_server_replicamanager_"


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerQuorum]:
    why_not = ControllerQuorum.available()
    if why_not is not None:
        pytest.fail(why_not, pytrace=False)
    with ControllerQuorum(tmp_path_factory.mktemp("quorum"), voters=1,
                          properties={"broker.session.timeout.ms": "15000"}) as q:  # fmt: skip
        yield q


@pytest.fixture(scope="module")
def brokers(
    quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[int, Broker]]:
    base: Path = tmp_path_factory.mktemp("metrics")
    made = {
        i: cluster_broker(quorum, base, i, **{"admin.listener": f"127.0.0.1:{free_port()}",
                                               "replica.lag.time.max.ms": "4000",
                                               "replica.fetch.backoff.ms": "200"})
        for i in (1, 2, 3)
    }  # fmt: skip
    try:
        for b in made.values():
            b.start()
        yield made
    finally:
        for b in made.values():
            if b.running:
                b.stop()


def scrape(b: Broker) -> dict[str, float]:
    """The unlabelled samples of a broker's /metrics, by name."""
    assert b.admin_url is not None
    conn = http.client.HTTPConnection(b.admin_url.removeprefix("http://"), timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


def page(b: Broker, path: str) -> str:
    assert b.admin_url is not None
    conn = http.client.HTTPConnection(b.admin_url.removeprefix("http://"), timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read().decode()
    conn.close()
    assert resp.status == 200, body
    return body


def gauges(brokers: dict[int, Broker], name: str, ids: tuple[int, ...] = (1, 2)) -> dict[int, float]:
    return {i: scrape(brokers[i])[RM + name] for i in ids}


def isr_of(b: Broker) -> dict[int, list[int]]:
    md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(TOPIC, timeout=10).topics[TOPIC]
    return {p.id: sorted(p.isrs) for p in md.partitions.values()}


def test_under_replicated_follows_a_killed_follower_and_the_console_shows_the_cluster(
    brokers: dict[int, Broker],
) -> None:
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic(TOPIC, len(ASSIGNMENT), replica_assignment=ASSIGNMENT,
                                  config={"min.insync.replicas": "2"})])[TOPIC].result(30)  # fmt: skip
    wait_until(
        lambda: all(isr == [1, 2, 3] for isr in isr_of(brokers[1]).values()) and len(isr_of(brokers[1])) == 4,
        "every partition with a full ISR",
        timeout=60,
    )
    wait_until(
        lambda: gauges(brokers, "leadercount", (1, 2, 3)) == LED,
        "leader counts from the image",
        timeout=60,
    )
    assert gauges(brokers, "partitioncount", (1, 2, 3)) == {1: 4, 2: 4, 3: 4}
    assert gauges(brokers, "underreplicatedpartitions", (1, 2, 3)) == {1: 0, 2: 0, 3: 0}
    assert gauges(brokers, "offlinereplicacount", (1, 2, 3)) == {1: 0, 2: 0, 3: 0}
    shrinks_before = gauges(brokers, "isrshrinks_total")
    expands_before = gauges(brokers, "isrexpands_total")

    producer = Producer({"bootstrap.servers": brokers[1].bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(400):
        producer.produce(TOPIC, f"r{i}".encode(), partition=i % 4)
    assert producer.flush(30) == 0

    # The console: every registered broker, the controller, and each partition's replicas and ISR.
    html = page(brokers[1], "/brokers")
    for i, b in brokers.items():
        assert (
            f'<tr data-node="{i}"><td class="num">{i}</td><td>127.0.0.1</td><td class="num">{b.port}</td>'
            in html
        )
    assert html.count('<td class="state">unfenced</td>') == 3, html
    controller = brokers[1].overrides["controller.quorum.bootstrap.servers"].rsplit(":", 1)[1]
    assert f'<td class="num">{controller}</td><td>active controller (quorum leader)</td>' in html, html

    # The ISR may flap under load and come back in another order: wait for the page to show it
    # whole again (any order), in the row of the partition assigned [1, 3, 2].
    def full_isr_shown() -> bool:
        row = re.search(r'<td class="replicas">1,3,2</td><td class="isr">([0-9,]+)</td>',
                        page(brokers[2], f"/topic?name={TOPIC}"))  # fmt: skip
        return row is not None and sorted(map(int, row.group(1).split(","))) == [1, 2, 3]

    wait_until(
        full_isr_shown,
        "the topic page shows the full ISR of the partition assigned [1, 3, 2]",
        timeout=60,
    )

    brokers[3].kill()
    wait_until(
        lambda: gauges(brokers, "underreplicatedpartitions") == {1: 2, 2: 2},
        "2 under-replicated partitions on each leader",
        timeout=60,
    )
    assert all(isr == [1, 2] for isr in isr_of(brokers[1]).values())
    shrinks = gauges(brokers, "isrshrinks_total")
    assert {i: shrinks[i] - shrinks_before[i] for i in shrinks} == {1: 2, 2: 2}
    assert scrape(brokers[1])["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
    assert gauges(brokers, "underminisrpartitioncount") == {1: 0, 2: 0}
    assert gauges(brokers, "atminisrpartitioncount") == {1: 2, 2: 2}
    assert '<td class="replicas">1,3,2</td><td class="isr under">1,2</td>' in page(
        brokers[1], f"/topic?name={TOPIC}"
    )

    # Not waiting for it to serve: its fetches (broker epoch -1 until it registers again, which the
    # controller allows once the old session ends) already rejoin the ISR, as with Kafka (KIP-903
    # accepts -1); the controller then drops the old incarnation and a second expand would count.
    brokers[3].start(wait=False)
    wait_until(
        lambda: gauges(brokers, "underreplicatedpartitions") == {1: 0, 2: 0},
        "the follower back in every ISR",
        timeout=60,
    )
    expands = gauges(brokers, "isrexpands_total")
    assert {i: expands[i] - expands_before[i] for i in expands} == {1: 2, 2: 2}
    assert all(isr == [1, 2, 3] for isr in isr_of(brokers[1]).values())


def test_client_metrics_subscription_reaches_every_broker_through_the_image(
    brokers: dict[int, Broker],
) -> None:
    """Set through broker 1 (forwarded to the controller, a ConfigRecord in the image), the
    subscription is what broker 2 offers; what a client pushes there shows on broker 2's /metrics."""
    with Connection(brokers[1].host, brokers[1].port, client_id="admin") as admin:
        ops = [{"name": "metrics", "config_operation": 0, "value": "org.apache.kafka.producer."},
               {"name": "interval.ms", "config_operation": 0, "value": "1000"},
               {"name": "match", "config_operation": 0, "value": "client_id=cluster-telemetry"}]  # fmt: skip
        body = {"resources": [{"resource_type": 16, "resource_name": "cluster", "configs": ops}],
                "validate_only": False}  # fmt: skip
        _, resp = admin.request(INCREMENTAL_ALTER_CONFIGS.key, body, 1)
        assert resp.responses[0].error_code == 0, resp
    with Connection(brokers[2].host, brokers[2].port, client_id="cluster-telemetry") as conn:

        def subscribed() -> Any:
            _, sub = conn.request(GET_TELEMETRY_SUBSCRIPTIONS.key, {"client_instance_id": ZERO_UUID}, 0)
            return sub if sub.error_code == 0 and sub.requested_metrics else None

        sub = wait_until(subscribed, "broker 2 offers the subscription from the image", timeout=30)
        assert sub.push_interval_ms == 1000
        payload = metrics_data(
            metric("org.apache.kafka.producer.record.send.rate", "gauge", number_point(4.5))
        )
        push = {"client_instance_id": sub.client_instance_id, "subscription_id": sub.subscription_id,
                "terminating": False, "compression_type": 0, "metrics": payload}  # fmt: skip
        _, resp = conn.request(PUSH_TELEMETRY.key, push, 0)
        assert resp.error_code == 0
    text = page(brokers[2], "/metrics")
    sent = [s for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == "kcompat_client_telemetry_value" and s.labels["client_id"] == "cluster-telemetry"]  # fmt: skip
    assert [(s.labels["metric"], s.value) for s in sent] == [
        ("org.apache.kafka.producer.record.send.rate", 4.5)
    ]
