"""Cluster mode, share groups with real clients: three kcompat brokers under one Kafka 4.3.1
controller, a 3-partition topic whose leaders are on three different brokers.

The share group's coordinator is the leader of the group's `__consumer_offsets` partition
(FindCoordinator key type 0; NOT_COORDINATOR from the others); ShareFetch goes to each partition's
leader (NOT_LEADER_OR_FOLLOWER with the current leader from a non-leader). Two confluent-kafka
ShareConsumers read every record exactly once. The slow round kills -9 a partition leader while
the members read and acknowledge: its successor reads the share-partition's state back from the
share coordinator, so no acknowledged-and-answered record is delivered again and none is lost.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from share_support import (
    JavaShareMember,
    share_beside_java,
    share_group_state,
    share_members,
    wait_all_acknowledged,
    wait_for_members,
)

from compat_tests.cluster.test_share_coordinator import ShareCluster
from compat_tests.crash.wire_client import WireClient
from kcompat.coordinator.records import offsets_partition
from kcompat.testing import wait_until
from kcompat.testing_cluster import HOST, ControllerQuorum
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.elect_leaders import ELECT_LEADERS
from kcompat.wire.messages.share_fetch import SHARE_FETCH
from kcompat.wire.messages.share_group_heartbeat import SHARE_GROUP_HEARTBEAT

pytestmark = pytest.mark.timeout(300)

BROKER_IDS = (1, 2, 3)
PARTITIONS = 3
LOCK_MS = 4000
WARM = b"warm-up"


class Cluster(ShareCluster):
    SETTINGS: ClassVar[dict[str, str]] = {
        **ShareCluster.SETTINGS,
        "group.share.record.lock.duration.ms": str(LOCK_MS),
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.heartbeat.interval.ms": "500",
        "group.share.session.timeout.ms": "8000",
    }


@pytest.fixture(scope="module")
def cluster(kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(kraft_quorum, tmp_path_factory.mktemp("share-groups"))
    with c.running(BROKER_IDS):
        yield c


def spread_topic(cluster: Cluster, name: str) -> uuid.UUID:
    """RF=3 (min.insync.replicas=2), partition p led by broker p+1: three different leaders."""
    rotations = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    topic_id = cluster.create_topic(name, -1, -1, {"min.insync.replicas": "2"}, rotations)
    leaders = cluster.leaders(name, PARTITIONS)
    assert sorted(leaders.values()) == [1, 2, 3], leaders
    return topic_id


def member(cluster: Cluster, group: str, topic: str, mode: str) -> ShareConsumer:
    c = ShareConsumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "share.acknowledgement.mode": mode}
    )
    c.subscribe([topic])
    return c


def poll(c: ShareConsumer, timeout: float = 0.3) -> list[Any]:
    return [m for m in c.poll(timeout) if m.error() is None]


def warm_up(
    cluster: Cluster, topic: str, consumers: list[ShareConsumer], explicit: bool, each: bool = False
) -> None:
    """Share groups start at `latest`: until each partition's share-partition is initialized; with
    `each`, also until every consumer got a warm-up record (members created together join one after
    the other, and the first may take every warm-up while it still holds every partition)."""
    seen: set[int] = set()
    fed = [False] * len(consumers)
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    deadline = time.time() + 90
    while len(seen) < PARTITIONS or (each and not all(fed)):
        missing = set(range(PARTITIONS)) - seen
        assert time.time() < deadline, f"no member fetched from partitions {missing}; fed {fed}"
        for part in missing or range(PARTITIONS):
            p.produce(topic, value=WARM, partition=part)
        p.flush(10)
        for i, c in enumerate(consumers):
            for m in poll(c, 0.5):
                if explicit:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                assert m.value() == WARM, m.value()
                seen.add(m.partition())
                fed[i] = True
            if explicit:
                c.commit_sync(10)


def produce(cluster: Cluster, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % PARTITIONS)
    assert p.flush(60) == 0


def test_coordinator_and_share_fetch_go_to_the_right_brokers(cluster: Cluster) -> None:
    topic_id = spread_topic(cluster, "share-routing")
    group = "sq-routing"
    coordinator = cluster.coordinator(group, cluster.brokers[1])  # creates __consumer_offsets
    leaders = cluster.leaders("__consumer_offsets", 6)
    assert leaders[offsets_partition(group, 6)] == coordinator
    other = next(n for n in BROKER_IDS if n != coordinator)
    hb = {"group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0, "rack_id": None,
          "subscribed_topic_names": ["share-routing"]}  # fmt: skip
    refused: Any = cluster.call(cluster.brokers[other], SHARE_GROUP_HEARTBEAT.key, 1, hb)
    assert refused.error_code == E.NOT_COORDINATOR, refused
    accepted: Any = cluster.call(cluster.brokers[coordinator], SHARE_GROUP_HEARTBEAT.key, 1, hb)
    assert accepted.error_code == 0, accepted
    # ShareFetch of partition 0 (led by broker 1) to broker 2: the leader named, with its endpoint
    fetch = {"group_id": group, "member_id": hb["member_id"], "share_session_epoch": 0, "max_wait_ms": 0,
             "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
             "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0}]}]}  # fmt: skip
    answer: Any = cluster.call(cluster.brokers[2], SHARE_FETCH.key, 1, fetch)
    (part,) = answer.responses[0].partitions
    assert part.error_code == E.NOT_LEADER_OR_FOLLOWER, answer
    assert part.current_leader.leader_id == 1, answer
    assert [e.node_id for e in answer.node_endpoints] == [1], answer


def test_two_members_read_every_record_once(cluster: Cluster) -> None:
    topic = "share-spread"
    spread_topic(cluster, topic)
    a, b = member(cluster, "sq-two", topic, "implicit"), member(cluster, "sq-two", topic, "implicit")
    try:
        warm_up(cluster, topic, [a, b], explicit=False, each=True)  # each must get some of what follows
        values = [f"r{i}".encode() for i in range(300)]
        produce(cluster, topic, values)
        got: list[list[Any]] = [[], []]
        deadline = time.time() + 90
        while sum(map(len, got)) < len(values) and time.time() < deadline:
            for i, c in enumerate((a, b)):
                got[i] += [m for m in poll(c) if m.value() != WARM]
        seen = [m.value() for ms in got for m in ms]
        assert sorted(seen) == sorted(values), (
            f"{len(seen)} of {len(values)}, {len(seen) - len(set(seen))} twice"
        )
        assert all(got), [len(ms) for ms in got]
        assert {m.partition() for ms in got for m in ms} == set(range(PARTITIONS))
        end = time.time() + LOCK_MS / 1000 + 2
        again = []
        while time.time() < end:
            again += [m.value() for c in (a, b) for m in poll(c) if m.value() != WARM]
        assert again == []
    finally:
        a.close()
        b.close()


def test_java_share_consumer_beside_a_confluent_one(cluster: Cluster, tmp_path: Path) -> None:
    """Kafka's VerifiableShareConsumer 4.3.1 and a confluent member share the group; kafka-share-groups
    finds the coordinator through any broker and describes both members."""
    topic = "share-java"
    spread_topic(cluster, topic)
    c = member(cluster, "sq-java", topic, "implicit")
    warm_up(cluster, topic, [c], explicit=False)  # alone: every share-partition initialized first
    try:
        with JavaShareMember(cluster.bootstrap, topic, "sq-java", tmp_path) as java:
            share_beside_java(
                cluster.bootstrap,
                topic,
                "sq-java",
                c,
                java,
                lambda vs: produce(cluster, topic, vs),
                timeout=90,
            )
    finally:
        c.close()


def test_a_coordinator_failover_keeps_the_group_epoch(cluster: Cluster, tmp_path: Path) -> None:
    """The broker leading the group's __consumer_offsets partition killed -9: its successor loads the
    group from its ShareGroup* records, with its epoch; the members (Java and confluent) go on with
    theirs, and read every record produced after the failover exactly once."""
    topic, group = "share-failover", "sq-failover"
    spread_topic(cluster, topic)
    c = member(cluster, group, topic, "implicit")
    warm_up(cluster, topic, [c], explicit=False)
    try:
        with JavaShareMember(cluster.bootstrap, topic, group, tmp_path) as java:
            share_beside_java(
                cluster.bootstrap, topic, group, c, java, lambda vs: produce(cluster, topic, vs),
                prefix="before", timeout=90,
            )  # fmt: skip
            # a third member joins and leaves: an epoch the group has only from its own records
            extra = member(cluster, group, topic, "implicit")
            wait_for_members(cluster.bootstrap, group, topic, 3, lambda: (poll(c, 0.5), poll(extra, 0.5)), 90)
            extra.close()
            wait_all_acknowledged(cluster.bootstrap, group, PARTITIONS, lambda: poll(c, 0.5))
            before = share_group_state(cluster.bootstrap, group)
            assert int(before["GROUP-EPOCH"]) >= 4, before
            old = cluster.coordinator(group, cluster.brokers[1])
            cluster.brokers[old].kill()
            try:
                new = wait_until(
                    lambda: (n := cluster.coordinator(group, cluster.live()[0])) != old and n,
                    "a new group coordinator",
                    timeout=60,
                )
                assert new != old
                wait_for_members(cluster.bootstrap, group, topic, 2, lambda: poll(c, 1.0), timeout=90)
                after = share_group_state(cluster.bootstrap, group)
                assert after["GROUP-EPOCH"] == before["GROUP-EPOCH"], (before, after)
                epochs = {m["MEMBER-EPOCH"] for m in share_members(cluster.bootstrap, group)}
                assert epochs == {before["GROUP-EPOCH"]}, epochs
                share_beside_java(
                    cluster.bootstrap, topic, group, c, java, lambda vs: produce(cluster, topic, vs),
                    prefix="after", timeout=90,
                )  # fmt: skip
                # the members went on with their epochs: no rejoin bumped the group's
                assert share_group_state(cluster.bootstrap, group)["GROUP-EPOCH"] == before["GROUP-EPOCH"]
            finally:
                if not cluster.brokers[old].running:
                    cluster.brokers[old].start()
    finally:
        c.close()


@pytest.mark.slow
def test_kill_a_partition_leader_while_members_acknowledge(cluster: Cluster, report_figure: Any) -> None:
    """Explicit acknowledgement into a ledger; broker 1 (partition 0's leader) killed -9 halfway.
    Acknowledged-and-answered (commit_sync returned) records never come again; none is lost."""
    topic = "share-kill"
    spread_topic(cluster, topic)
    consumers = [member(cluster, "sq-kill", topic, "explicit") for _ in range(2)]
    victim = 1
    try:
        warm_up(cluster, topic, consumers, explicit=True)
        values = [f"k{i}".encode() for i in range(600)]
        produce(cluster, topic, values[:300])
        answered: set[bytes] = set()  # acknowledged and the acknowledgement answered
        delivered: list[bytes] = []
        again: list[bytes] = []
        killed = False
        deadline = time.time() + 150
        while len(answered) < len(values) and time.time() < deadline:
            for c in consumers:
                ms = [m for m in poll(c) if m.value() != WARM]
                for m in ms:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    if m.value() in answered:
                        again.append(m.value())
                    delivered.append(m.value())
                if not ms:
                    continue
                try:
                    c.commit_sync(10)
                except Exception:  # the leader died: not answered, may come again
                    continue
                answered.update(m.value() for m in ms)
            if not killed and len(answered) >= 150:
                cluster.brokers[victim].kill()
                killed = True
                threading.Thread(target=produce, args=(cluster, topic, values[300:]), daemon=True).start()
        assert killed
        redelivered = len(delivered) - len(set(delivered))
        report_figure(
            "share groups, cluster: kill -9 of a partition leader (broker 1)",
            f"{len(values)} records, {len(set(delivered))} delivered, {redelivered} redelivered "
            f"(not answered), {len(again)} answered delivered again, {len(set(values) - set(delivered))} lost",
        )
        assert again == [], f"{len(again)} acknowledged-and-answered records delivered again"
        lost = set(values) - set(delivered)
        assert not lost, f"{len(lost)} records never delivered"
        leaders = cluster.leaders(topic, PARTITIONS)
        assert victim not in leaders.values(), leaders
    finally:
        for c in consumers:
            c.close()
        if not cluster.brokers[victim].running:
            cluster.brokers[victim].start()


def elect_preferred(cluster: Cluster, topic: str, partition: int) -> None:
    client = WireClient(HOST, cluster.quorum.controllers[0].port)
    try:
        client.call(ELECT_LEADERS.key, 2, {"election_type": 0, "timeout_ms": 10000, "topic_partitions": [
            {"topic": topic, "partitions": [partition]}]})  # fmt: skip
    finally:
        client.close()


class Ledger:
    """Explicit acknowledgement: every record ACCEPTed and commit_sync'ed after each poll."""

    def __init__(self, consumers: list[ShareConsumer]) -> None:
        self.consumers = consumers
        self.answered: set[bytes] = set()
        self.again: list[bytes] = []

    def read(self, want: set[bytes], timeout: float = 60) -> None:
        """Until every record of `want` was acknowledged and answered."""
        deadline = time.time() + timeout
        while not want <= self.answered:
            assert time.time() < deadline, f"{len(want - self.answered)} of {len(want)} never answered"
            for c in self.consumers:
                ms = [m for m in poll(c) if m.value() != WARM]
                for m in ms:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    if m.value() in self.answered:
                        self.again.append(m.value())
                if ms:
                    with contextlib.suppress(Exception):  # a leader died: not answered, may come again
                        c.commit_sync(10)
                        self.answered.update(m.value() for m in ms)


@pytest.mark.slow
def test_leadership_away_and_back_reads_the_state_again(cluster: Cluster) -> None:
    """Partition 0 led by 1, then 2 (1 killed), then 1 again (preferred election), then 2 again
    (1 killed): broker 2 must not serve the share-partition it held the first time, which knows
    nothing of what was acknowledged on broker 1 since, but read it again from the share coordinator."""
    topic = "share-back"
    spread_topic(cluster, topic)
    consumers = [member(cluster, "sq-back", topic, "explicit") for _ in range(2)]
    ledger = Ledger(consumers)
    try:
        warm_up(cluster, topic, consumers, explicit=True)
        for stage in range(4):
            if stage == 1 or stage == 3:
                cluster.brokers[1].kill()
                wait_until(lambda: cluster.partitions(topic)[0][0] == 2, "broker 2 leads partition 0")
            if stage == 2:
                cluster.brokers[1].start()
                wait_until(
                    lambda: 1 in cluster.partitions(topic)[0][3], "broker 1 back in the ISR", timeout=60
                )
                elect_preferred(cluster, topic, 0)
                wait_until(lambda: cluster.partitions(topic)[0][0] == 1, "broker 1 leads partition 0 again")
            batch = [f"s{stage}-{i}".encode() for i in range(60)]
            produce(cluster, topic, batch)
            ledger.read(set(batch))
        end = time.time() + LOCK_MS / 1000 + 2  # anything acquired and not answered comes back by then
        while time.time() < end:
            ledger.read(set(), timeout=5)
            for c in consumers:
                ledger.again += [m.value() for m in poll(c) if m.value() in ledger.answered]
        assert ledger.again == [], f"{len(ledger.again)} acknowledged-and-answered records delivered again"
    finally:
        for c in consumers:
            c.close()
        if not cluster.brokers[1].running:
            cluster.brokers[1].start()
