"""Network partitions without root (tcp_proxy.py): every broker advertises a proxy in front of its
listener, and the controller a proxy in front of its own, so the test can cut a leader off from its
followers (their fetchers' connections, one way or both) or a broker off from the controller (all
its controller channels), while an idempotent acks=all producer writes and a ledger records every
acknowledged record. Three kcompat brokers under one Kafka 4.3.1 controller; RF=3,
min.insync.replicas=2. After each cut heals, every acknowledged record is read back exactly once.

* Leader cut off from its followers: its followers stop reaching it, so it shrinks the ISR to itself
  (replica.lag.time.max.ms) and, below min.insync.replicas, acknowledges nothing; healed, they catch
  up, rejoin the ISR and writes go on.
* Broker (the leader) cut off from the controller: it misses its heartbeats and is fenced; the
  controller elects a follower; the old leader, not hearing of it, must not acknowledge an acks=all
  write (nobody fetches from it); healed, it learns it follows, truncates what it alone had, and
  rejoins the ISR.

The same cluster pins the high-watermark checkpoint: a leader restarted alone in its ISR serves
every record acknowledged before (replica.high.watermark.checkpoint.interval.ms is 1 s here).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.cluster.tcp_proxy import TcpProxy
from compat_tests.cluster.test_failover_rounds import (
    LedgerProducer,
    fault_report,
    first_ack_after,
    longest_pause,
    read_all,
)
from compat_tests.cluster.test_replication import BROKER_IDS, LAG_MAX_MS, Cluster
from compat_tests.crash.wire_client import WireClient, produce_body
from kcompat.log.checkpoints import REPLICATION_OFFSET_CHECKPOINT, read_offsets
from kcompat.testing import Broker, wait_until
from kcompat.testing_cluster import FEATURES, HOST, ControllerQuorum

SESSION_TIMEOUT_MS = 4000  # the controller fences a broker silent this long (Kafka's default is 9 s)


class ProxiedBroker(Broker):
    """A cluster broker that advertises `advertised` (its proxy) instead of its own port."""

    advertised = ""

    def command(self) -> list[str]:
        return [*super().command(), "--override", f"advertised.listeners=PLAINTEXT://{self.advertised}"]


class ProxiedCluster(Cluster):
    def __init__(self, quorum: ControllerQuorum, root: Path, controller_proxy: TcpProxy) -> None:
        super().__init__(quorum, root)
        self.proxies: dict[int, TcpProxy] = {}
        for node_id in BROKER_IDS:
            b = ProxiedBroker(
                root / f"broker-{node_id}",
                root / f"broker-{node_id}.log",
                overrides={
                    "process.roles": "broker",
                    "node.id": str(node_id),
                    "cluster.id": quorum.cluster_id,
                    "controller.quorum.bootstrap.servers": controller_proxy.endpoint,
                    "controller.listener.names": "CONTROLLER",
                    "broker.heartbeat.interval.ms": "500",
                    "replica.fetch.backoff.ms": "200",
                    "replica.fetch.wait.max.ms": "500",
                    "replica.lag.time.max.ms": str(LAG_MAX_MS),
                    "replica.high.watermark.checkpoint.interval.ms": "1000",
                },
            )
            proxy = self.proxies[node_id] = TcpProxy((HOST, b.port)).start()
            b.advertised = proxy.endpoint
            self.brokers[node_id] = b

    def isr(self, topic: str, via: int | None = None) -> list[int]:
        return sorted(self.partitions(topic, via)[0][3])


def fetchers_of(leader: int) -> re.Pattern[str]:
    """Client ids of the followers' fetchers that fetch from `leader`."""
    return re.compile(rf"^kcompat-replica-fetcher-\d+-{leader}$")


def channels_of(node_id: int) -> re.Pattern[str]:
    """Client ids of every controller channel of broker `node_id`."""
    return re.compile(rf"^(kcompat-)?broker-{node_id}(-|$)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedCluster]:
    why_not = ControllerQuorum.available()
    if why_not is not None:
        pytest.fail(why_not, pytrace=False)
    root = tmp_path_factory.mktemp("partitions")
    # ELR off: with it (KIP-966) the controller takes a sole ISR member killed -9 out of ISR and ELR
    # and leaves the partition leaderless (Kafka 4.3.1's controller does so for a Java broker too),
    # while the high-watermark checkpoint test needs that member back as leader.
    quorum = ControllerQuorum(
        root / "quorum", voters=1, features={**FEATURES, "eligible.leader.replicas.version": 0}
    )
    controller_proxy = TcpProxy((HOST, quorum.controllers[0].port)).start()
    quorum.extra_properties.update({
        # What the controller tells brokers to reach it at (NodeEndpoints): the proxy too.
        "advertised.listeners": f"CONTROLLER://{controller_proxy.endpoint}",
        "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    })  # fmt: skip
    c = ProxiedCluster(quorum, root, controller_proxy)
    c.controller_proxy = controller_proxy  # type: ignore[attr-defined]
    with quorum:
        try:
            with c.running(BROKER_IDS):
                yield c
        finally:
            for p in [controller_proxy, *c.proxies.values()]:
                p.close()


def _check(cluster: ProxiedCluster, topic: str, kind: str, rounds: int, producer: LedgerProducer,
           failovers: list[float], **report: str) -> list[bytes]:  # fmt: skip
    seen = read_all(cluster, topic, set(producer.acked))
    lost, duplicates = fault_report(kind, rounds, producer, seen, failovers, **report)
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
    assert duplicates == 0, f"{duplicates} records written twice"
    return seen


@pytest.mark.parametrize(
    "direction", [pytest.param("down", marks=pytest.mark.slow), "both"]
)  # one way: the slow layer's
def test_leader_cut_off_from_its_followers(cluster: ProxiedCluster, direction: str) -> None:
    topic = f"cut-followers-{direction}"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    producer = LedgerProducer(cluster.bootstrap, topic)
    producer.start()
    failovers: list[float] = []
    try:
        wait_until(lambda: len(producer.acked) > 50, "writes acknowledged before the cut", timeout=40)
        leader = cluster.partitions(topic)[0][0]
        proxy = cluster.proxies[leader]
        cut_at = time.monotonic()
        proxy.cut(fetchers_of(leader).match, direction)
        wait_until(lambda: cluster.isr(topic) == [leader], "the ISR shrunk to the leader", timeout=30)
        acked_while_cut = len(producer.acked)
        time.sleep(1.0)  # writes keep coming: below min.insync.replicas none is acknowledged
        assert len(producer.acked) == acked_while_cut, "acknowledged below min.insync.replicas"
        proxy.heal()
        healed_at = time.monotonic()
        wait_until(lambda: cluster.isr(topic) == list(BROKER_IDS), "the ISR whole again", timeout=60)
        # An acknowledgement in flight may land just after the cut: the outage is the longest pause.
        end = healed_at + first_ack_after(producer, healed_at)
        failovers.append(longest_pause(producer, cut_at, end + 0.001))
        assert proxy.dropped > 0, "the cut dropped nothing: the fetchers did not go through the proxy"
    finally:
        producer.stopping.set()
        producer.join(150)
    _check(cluster, topic, f"leader cut off from its followers ({direction})", 1, producer, failovers,
           measure="longest pause in acknowledged writes")  # fmt: skip


def test_leader_cut_off_from_the_controller(cluster: ProxiedCluster) -> None:
    topic = "cut-controller"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    producer = LedgerProducer(cluster.bootstrap, topic)
    producer.start()
    controller_proxy: TcpProxy = cluster.controller_proxy  # type: ignore[attr-defined]
    failovers: list[float] = []
    try:
        wait_until(lambda: len(producer.acked) > 50, "writes acknowledged before the cut", timeout=40)
        leader, epoch, _replicas, _isr = cluster.partitions(topic)[0]
        other = next(i for i in BROKER_IDS if i != leader)
        cut_at = time.monotonic()
        controller_proxy.cut(channels_of(leader).match, "both")
        wait_until(
            lambda: (p := cluster.partitions(topic, other)[0])[0] not in (leader, -1) and p[1] > epoch,
            "a new leader elected without the isolated one",
            timeout=60,
        )
        first_ack_after(producer, cut_at)
        # The isolated broker still believes it leads: an acks=all write to it must not be acknowledged.
        client = WireClient(HOST, cluster.brokers[leader].port, timeout=30)
        try:
            body = produce_body(topic, b"to-the-isolated", acks=-1)
            body["timeout_ms"] = 3000
            answer = client.call(0, 9, body)
        finally:
            client.close()
        error = answer.responses[0].partition_responses[0].error_code
        assert error != 0, "the isolated leader acknowledged an acks=all write"
        assert controller_proxy.dropped > 0, (
            "the cut dropped nothing: the broker did not go through the proxy"
        )
        controller_proxy.heal()
        wait_until(
            lambda: cluster.isr(topic, other) == list(BROKER_IDS),
            "the old leader back in the ISR",
            timeout=90,
        )
        # Writes go on until the controller fences the isolated leader: the outage is the longest pause.
        failovers.append(longest_pause(producer, cut_at, time.monotonic()))
        print(f"the isolated leader answered error {error}")
    finally:
        controller_proxy.heal()
        producer.stopping.set()
        producer.join(150)
    seen = _check(
        cluster,
        topic,
        "leader cut off from the controller",
        1,
        producer,
        failovers,
        measure="longest pause in acknowledged writes",
    )
    assert b"to-the-isolated" not in seen


def test_a_restarted_leader_alone_in_its_isr_serves_what_was_committed(cluster: ProxiedCluster) -> None:
    """The high-watermark checkpoint: a leader restarted alone in its ISR (below min.insync.replicas,
    so its high watermark cannot move) starts from the checkpointed high watermark, not the log start,
    and consumers see every record acknowledged before."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = "hw-checkpoint"
    cluster.create_topic(topic, 1, 2, {"min.insync.replicas": "2"})
    leader, _epoch, replicas, _isr = cluster.partitions(topic)[0]
    follower = next(r for r in replicas if r != leader)
    witness = next(i for i in BROKER_IDS if i not in replicas)  # answers Metadata throughout
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "enable.idempotence": True, "log_level": 0})  # fmt: skip
    for i in range(100):
        producer.produce(topic, f"r-{i}".encode())
    assert producer.flush(30) == 0
    tp = confluent_kafka.TopicPartition(topic, 0)

    def high_watermark() -> int:
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.brokers[witness].bootstrap,
                                             "group.id": "unused", "log_level": 0})  # fmt: skip
        try:
            return int(consumer.get_watermark_offsets(tp, timeout=10)[1])
        except confluent_kafka.KafkaException:
            return -1
        finally:
            consumer.close()

    assert high_watermark() == 100
    cluster.brokers[follower].kill()
    wait_until(lambda: cluster.isr(topic, witness) == [leader], "the ISR shrunk to the leader", timeout=30)
    checkpoint = cluster.brokers[leader].data_dir / REPLICATION_OFFSET_CHECKPOINT
    wait_until(
        lambda: (read_offsets(checkpoint) or {}).get((topic, 0)) == 100,
        "the high watermark checkpointed",
        timeout=40,
    )
    cluster.brokers[leader].kill()
    cluster.start(leader)
    wait_until(
        lambda: (
            "RECOVERY -> RUNNING" in cluster.brokers[leader].logs().split("kcompat-testing: starting")[-1]
        ),
        "the leader restarted",
        timeout=40,
    )
    wait_until(
        lambda: high_watermark() == 100,
        "every acknowledged record served by the restarted leader",
        timeout=40,
    )
    assert cluster.isr(topic, witness) == [leader]  # alone in its ISR: nothing but the checkpoint set it
    cluster.start(follower)
    wait_until(lambda: cluster.isr(topic, witness) == sorted(replicas), "the ISR whole again", timeout=60)
