"""Faults of the whole cluster, under three Kafka 4.3.1 controllers: kill -9 of the active
controller (the quorum elects another; brokers keep serving and producers keep writing), and every
broker killed at once and restarted (every acknowledged record is there, once). An idempotent
acks=all producer writes throughout and a ledger records what was acknowledged; three kcompat
brokers, RF=3, min.insync.replicas=2.

Slow layer (three controllers take long to start). KCOMPAT_QUORUM_ROUNDS sets the rounds of each
fault (3 by default).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from compat_tests.cluster.test_failover_rounds import (
    LedgerProducer,
    fault_report,
    first_ack_after,
    longest_pause,
    read_all,
)
from compat_tests.cluster.test_replication import BROKER_IDS, Cluster
from compat_tests.crash.wire_client import WireClient
from kcompat.log.checkpoints import REPLICATION_OFFSET_CHECKPOINT, read_offsets
from kcompat.testing import Broker, wait_until
from kcompat.testing_cluster import HOST, ControllerQuorum, answers_api_versions

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("KCOMPAT_QUORUM_ROUNDS", "3"))
CREATE_TOPICS, DESCRIBE_QUORUM = 19, 55
NOT_CONTROLLER = 41


def quorum_leader(quorum: ControllerQuorum) -> int:
    """The Raft leader's node id, as a live controller's DescribeQuorum says (-1 while none)."""
    for c in quorum.controllers:
        if c.process is None or c.process.poll() is not None:
            continue
        try:
            client = WireClient(HOST, c.port, timeout=5)
        except OSError:
            continue
        try:
            r = client.call(DESCRIBE_QUORUM, 1, {"topics": [{"topic_name": "__cluster_metadata",
                                                            "partitions": [{"partition_index": 0}]}]})  # fmt: skip
            p = r.topics[0].partitions[0]
            if r.error_code == 0 and p.error_code == 0 and p.leader_id >= 0:
                return int(p.leader_id)
        except OSError:
            pass
        finally:
            client.close()
    return -1


class QuorumCluster(Cluster):
    def create_topic(self, name: str, partitions: int, rf: int, configs: dict[str, str]) -> uuid.UUID:
        """On the active controller (KIP-919), wherever it is now: a controller that has just lost
        the leadership answers NOT_CONTROLLER, and the next one asked is the new leader."""

        def attempt() -> object:
            leader = quorum_leader(self.quorum)
            c = next((c for c in self.quorum.controllers if c.node_id == leader), None)
            if c is None:
                return None
            try:
                client = WireClient(HOST, c.port)
            except OSError:
                return None
            try:
                response = client.call(CREATE_TOPICS, 7, {
                    "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                                "assignments": [], "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                    "timeout_ms": 10000, "validate_only": False,
                })  # fmt: skip
            except OSError:
                return None
            finally:
                client.close()
            created = response.topics[0]
            return None if created.error_code == NOT_CONTROLLER else created

        created: Any = wait_until(attempt, f"topic {name} created on the active controller", timeout=60)
        assert created.error_code == 0, created
        return created.topic_id  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def cluster(
    kraft_quorum_3: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QuorumCluster]:
    c = QuorumCluster(kraft_quorum_3, tmp_path_factory.mktemp("quorum-faults"))
    with c.running(BROKER_IDS):
        yield c


def checkpointed_hw(broker: Broker, topic: str) -> int:
    """Partition 0's high watermark in the broker's replication-offset-checkpoint (-1: none)."""
    offsets = read_offsets(broker.data_dir / REPLICATION_OFFSET_CHECKPOINT) or {}
    return offsets.get((topic, 0), -1)


def _check(cluster: Cluster, topic: str, kind: str, producer: LedgerProducer, failovers: list[float],
           **report: str) -> None:  # fmt: skip
    seen = read_all(cluster, topic, set(producer.acked))
    lost, duplicates = fault_report(kind, ROUNDS, producer, seen, failovers, **report)
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
    assert duplicates == 0, f"{duplicates} records written twice"


def test_kill_the_active_controller(cluster: QuorumCluster) -> None:
    topic = "controller-kill"
    quorum = cluster.quorum
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    producer = LedgerProducer(cluster.bootstrap, topic)
    producer.start()
    failovers: list[float] = []
    try:
        for _ in range(ROUNDS):
            wait_until(lambda: len(producer.acked) > 20, "writes acknowledged", timeout=40)
            active = wait_until(lambda: quorum_leader(quorum) + 1, "a quorum leader", timeout=40) - 1  # type: ignore[operator]
            victim = next(c for c in quorum.controllers if c.node_id == active)
            quorum.kill(victim)
            killed_at = time.monotonic()
            # Writes need no controller while the ISR holds: acknowledged on, whatever the election takes.
            assert first_ack_after(producer, killed_at) < 5.0
            wait_until(
                lambda active=active: quorum_leader(quorum) not in (-1, active),
                "another quorum leader",
                timeout=60,
            )
            # The brokers follow the new active controller: a topic created there gets leaders on them.
            new_topic = f"after-{victim.node_id}-{int(killed_at)}"
            cluster.create_topic(new_topic, 1, 3, {})
            cluster.partitions(new_topic)
            quorum.launch(victim)
            wait_until(
                lambda victim=victim: answers_api_versions(HOST, victim.port),
                "the controller back",
                timeout=60,
            )
            failovers.append(longest_pause(producer, killed_at, time.monotonic()))  # the outage, if any
        wait_until(
            lambda: sorted(cluster.partitions(topic)[0][3]) == list(BROKER_IDS), "the ISR whole", timeout=60
        )
    finally:
        producer.stopping.set()
        producer.join(150)
    _check(
        cluster,
        topic,
        "kill -9 of the active controller",
        producer,
        failovers,
        measure="longest pause in acknowledged writes",
    )


def test_kill_every_broker_at_once(cluster: QuorumCluster) -> None:
    topic = "all-brokers-kill"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    producer = LedgerProducer(cluster.bootstrap, topic)
    producer.start()
    failovers: list[float] = []
    try:
        for _ in range(ROUNDS):
            wait_until(lambda: len(producer.acked) > 50, "writes acknowledged", timeout=40)
            # What the restarted replicas start their high watermarks from (written every 5 s).
            wait_until(
                lambda: all(checkpointed_hw(b, topic) > 0 for b in cluster.brokers.values()),
                "high watermarks checkpointed",
                timeout=30,
            )
            for b in cluster.brokers.values():
                b.kill()
            killed_at = time.monotonic()
            # Restarted together: each answers only once unfenced, after its old session ends. (A
            # broker that answered Metadata before, naming no live broker, made librdkafka forget
            # every broker: the idempotent producer then waited minutes with none.)
            for b in [cluster.start(node_id, wait=False) for node_id in BROKER_IDS]:
                b.wait_ready()
            failovers.append(first_ack_after(producer, killed_at, timeout=120))
            wait_until(
                lambda: sorted(cluster.partitions(topic)[0][3]) == list(BROKER_IDS),
                "the ISR whole again",
                timeout=90,
            )
    finally:
        producer.stopping.set()
        producer.join(150)
    _check(cluster, topic, "every broker killed at once", producer, failovers)
