"""Follower fetching (KIP-392) with real parts: three `kcompat serve` brokers in racks a, b and c
under a REAL Kafka 4.3 controller, rack-aware replica selection on (one broker names Kafka's class,
the others kcompat's short name), and the Java 4.3 and librdkafka consumers with `client.rack`.

Topic `rack-reads` has one partition on all three brokers, led by broker 1 (rack a). A consumer in
rack b must read every record exactly once from broker 2, one in rack c from broker 3: checked by
the brokers' own byte counters on /metrics (kafka_server_brokertopicmetrics_bytesout, consumers
only; followers' replication fetches count apart): the leader sends that consumer no record
bytes, the follower in its rack all of them. Then, with a producer going on, the follower in rack
c is killed (-9) mid-read and comes back lagging, and last the leader moves mid-read (broker 1
stopped, then back): the consumer in rack c loses and repeats nothing.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from groups_members import KAFKA_JARS, Member, compile_java, java_member, python_member
from prometheus_client.parser import text_string_to_metric_families
from support import cluster_broker

from kcompat.testing import Broker, free_port, wait_until
from kcompat.testing_cluster import ControllerQuorum

pytestmark = pytest.mark.timeout(240)

TOPIC = "rack-reads"
RACKS = {1: "a", 2: "b", 3: "c"}
SELECTOR = {1: "org.apache.kafka.common.replica.RackAwareReplicaSelector", 2: "rack-aware", 3: "rack-aware"}
COUNT = 300
LAGGED = COUNT + 600  # the records there are after the lagging follower's test


@pytest.fixture(scope="module")
def brokers(
    kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[int, Broker]]:
    base: Path = tmp_path_factory.mktemp("follower-fetch")
    made = {
        i: cluster_broker(kraft_quorum, base, i, **{"admin.listener": f"127.0.0.1:{free_port()}",
                                                     "broker.rack": RACKS[i],
                                                     "replica.selector.class": SELECTOR[i],
                                                     "replica.fetch.backoff.ms": "200"})
        for i in (1, 2, 3)
    }  # fmt: skip
    try:
        for b in made.values():
            b.start()
        admin = AdminClient({"bootstrap.servers": made[1].bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])[TOPIC].result(30)
        wait_until(lambda: isr(made[1]) == [1, 2, 3], "a full ISR", timeout=60)
        produce(made[1], range(COUNT))
        yield made
    finally:
        for b in made.values():
            if b.running:
                b.stop()


def isr(b: Broker) -> list[int]:
    md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(TOPIC, timeout=10).topics[TOPIC]
    p = md.partitions.get(0)  # not there yet right after CreateTopics
    return [] if p is None else sorted(p.isrs)


def produce(b: Broker, values: range, bootstrap: str | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap or b.bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})  # fmt: skip
    for i in values:
        producer.produce(TOPIC, f"0-{i}".encode(), partition=0)
    assert producer.flush(60) == 0


def counters(b: Broker) -> dict[str, float]:
    """The topic's consumer and replication bytes out, and bytes in, from the broker's /metrics."""
    assert b.admin_url is not None
    conn = http.client.HTTPConnection(b.admin_url.removeprefix("http://"), timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    prefix = "kafka_server_brokertopicmetrics_"
    return {
        s.name.removeprefix(prefix).removesuffix("_total"): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name.startswith(prefix) and s.labels.get("topic") == TOPIC
    }


def read_all(member: Member, expected: int) -> list[str]:
    try:
        wait_until(lambda: len(member.records()) >= expected, f"{expected} records read", timeout=90)
        member.leave()
    finally:
        member.stop()
    values = [r["v"] for r in member.records()]
    assert sorted(values, key=lambda v: int(v.split("-")[1])) == [f"0-{i}" for i in range(expected)], (
        member.log()
    )
    return values


def bytes_out(brokers: dict[int, Broker]) -> dict[int, float]:
    return {i: counters(b).get("bytesout", 0.0) for i, b in brokers.items()}


def check_read_from(brokers: dict[int, Broker], member: Member, rack_broker: int) -> None:
    before = bytes_out(brokers)
    read_all(member, COUNT)
    after = bytes_out(brokers)
    log_bytes = counters(brokers[1])["bytesin"]  # what was produced to the leader: the whole log
    sent = {i: after[i] - before[i] for i in brokers}
    assert sent[rack_broker] >= log_bytes > 0, sent
    assert all(sent[i] == 0 for i in brokers if i != rack_broker), sent  # the leader sent it nothing


def test_librdkafka_consumer_reads_everything_from_the_follower_in_its_rack(
    brokers: dict[int, Broker],
) -> None:
    start = python_member("confluent", brokers[1].bootstrap, TOPIC, "rack-b-confluent", {"client.rack": "b"})
    check_read_from(brokers, start("confluent-b"), rack_broker=2)
    # followers' own fetches are replication bytes, not consumer bytes out
    assert counters(brokers[1])["replicationbytesout"] > 0


def test_java_consumer_reads_everything_from_the_follower_in_its_rack(
    brokers: dict[int, Broker], tmp_path: Path
) -> None:
    classes = compile_java(tmp_path / "classes", KAFKA_JARS)
    start = java_member(classes, KAFKA_JARS, brokers[1].bootstrap, TOPIC, "rack-c-java", {"client.rack": "c"})
    check_read_from(brokers, start("java-c"), rack_broker=3)


def test_follower_killed_and_lagging_mid_read_loses_and_repeats_nothing(brokers: dict[int, Broker]) -> None:
    """The follower a consumer reads from dies (kill -9) mid-read while a producer goes on: the
    consumer goes back to the leader; restarted, the follower catches up from behind (lagging, out
    of the ISR, then back in it) and may serve the consumer again."""
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    start = python_member("confluent", bootstrap, TOPIC, "rack-c-lagging", {"client.rack": "c"})
    served = bytes_out(brokers)[3]
    member = start("confluent-c")
    writer = threading.Thread(target=produce, args=(brokers[1], range(COUNT, LAGGED), bootstrap))
    try:
        wait_until(lambda: len(member.records()) >= COUNT // 2, "half the records read", timeout=90)
        wait_until(lambda: bytes_out(brokers)[3] > served, "broker 3 serving the consumer", timeout=30)
        writer.start()
        brokers[3].kill()
        wait_until(lambda: isr(brokers[1]) == [1, 2], "broker 3 out of the ISR", timeout=60)
        brokers[3].start()
        writer.join(120)
        assert not writer.is_alive()
        wait_until(lambda: isr(brokers[1]) == [1, 2, 3], "broker 3 back in the ISR", timeout=60)
    finally:
        writer.join(120)
    values = read_all(member, LAGGED)
    assert len(values) == len(set(values)) == LAGGED


def test_leader_moving_mid_read_loses_and_repeats_nothing(brokers: dict[int, Broker]) -> None:
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    start = python_member("confluent", bootstrap, TOPIC, "rack-c-moving", {"client.rack": "c"})
    served = bytes_out(brokers)[3]
    member = start("confluent-c")
    more = LAGGED + 600
    writer = threading.Thread(target=produce, args=(brokers[2], range(LAGGED, more), bootstrap))
    try:
        wait_until(lambda: len(member.records()) >= COUNT // 2, "half the records read", timeout=90)
        wait_until(lambda: bytes_out(brokers)[3] > served, "broker 3 serving the consumer", timeout=30)
        writer.start()
        brokers[1].stop()  # controlled shutdown: the leadership moves to broker 2
        wait_until(lambda: isr(brokers[2]) == [2, 3], "broker 2 leading without broker 1", timeout=60)
        brokers[1].start()
        writer.join(120)
        assert not writer.is_alive()
        wait_until(lambda: isr(brokers[2]) == [1, 2, 3], "broker 1 back in the ISR", timeout=60)
    finally:
        writer.join(120)
    values = read_all(member, more)
    assert len(values) == len(set(values)) == more
