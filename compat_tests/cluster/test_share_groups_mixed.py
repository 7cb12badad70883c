"""Cluster mode, a mixed cluster serving one share group: two kcompat brokers and one Apache Kafka
4.3.1 broker under one Kafka 4.3.1 controller (formatted with share.version=1 and ELR on), a
3-partition topic led by all three. Partition leaders of both kinds keep their share-partitions'
state with the share coordinator of each state partition, whichever kind leads it
(Initialize/Read/WriteShareGroupState between brokers); two confluent-kafka ShareConsumers read
every record exactly once, with the group coordinated by a kcompat broker and by the Java one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from compat_tests.cluster.test_replication import JavaBroker
from compat_tests.cluster.test_share_groups_cluster import (
    LOCK_MS,
    PARTITIONS,
    WARM,
    Cluster,
    member,
    poll,
    produce,
    spread_topic,
    warm_up,
)
from kcompat.testing import wait_until
from kcompat.testing_cluster import ControllerQuorum

pytestmark = pytest.mark.timeout(300)

JAVA_ID = 3


class MixedCluster(Cluster):
    java: JavaBroker

    def live_ids(self) -> set[int]:
        running = self.java.process is not None and self.java.process.poll() is None
        return super().live_ids() | ({JAVA_ID} if running else set())


@pytest.fixture(scope="module")
def cluster(
    kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MixedCluster]:
    c = MixedCluster(kraft_quorum, tmp_path_factory.mktemp("share-mixed"))
    java = JavaBroker(kraft_quorum, c.root, JAVA_ID)
    java.extra = {  # the same internal topics as the kcompat brokers: one partition count for all
        k: v for k, v in Cluster.SETTINGS.items() if k.startswith(("offsets.topic.", "share.coordinator."))
    }
    c.java = java
    with c.running((1, 2)):
        java.start()
        try:
            wait_until(
                lambda: JAVA_ID in [b.node_id for b in c.metadata(c.brokers[1], "none").brokers],  # type: ignore[attr-defined]
                "the Java broker registered and unfenced",
                timeout=60,
            )
            yield c
        finally:
            java.stop()


def group_coordinated_by(cluster: MixedCluster, java: bool) -> str:
    """A group id whose coordinator (the leader of its __consumer_offsets partition) is the Java
    broker, or a kcompat one."""
    for i in range(40):
        group = f"sq-mixed-{i}"
        if (cluster.coordinator(group, cluster.brokers[1]) == JAVA_ID) == java:
            return group
    raise AssertionError("no such group id among 40")


@pytest.mark.parametrize("coordinator", ["kcompat", "java"])
def test_one_share_group_over_kcompat_and_java_leaders(cluster: MixedCluster, coordinator: str) -> None:
    topic = f"share-mixed-{coordinator}"
    spread_topic(cluster, topic)  # partition 2 led by the Java broker
    group = group_coordinated_by(cluster, coordinator == "java")
    a, b = member(cluster, group, topic, "implicit"), member(cluster, group, topic, "implicit")
    try:
        warm_up(cluster, topic, [a, b], explicit=False)
        values = [f"m{i}".encode() for i in range(300)]
        produce(cluster, topic, values)
        got: list[Any] = []
        deadline = time.time() + 90
        while len(got) < len(values) and time.time() < deadline:
            for c in (a, b):
                got += [m for m in poll(c) if m.value() != WARM]
        seen = [m.value() for m in got]
        assert sorted(seen) == sorted(values), (
            f"{len(seen)} of {len(values)}, {len(seen) - len(set(seen))} twice"
        )
        assert {m.partition() for m in got} == set(range(PARTITIONS))
        end = time.time() + LOCK_MS / 1000 + 2
        again = []
        while time.time() < end:
            again += [m.value() for c in (a, b) for m in poll(c) if m.value() != WARM]
        assert again == []
    finally:
        a.close()
        b.close()
