"""Mixed cluster, moves: Kafka's own `kafka-reassign-partitions` moves a partition from an Apache
Kafka 4.3.1 broker onto kcompat brokers and back, while an idempotent acks=all producer writes
without pause, and `kafka-leader-election --election-type preferred` hands leadership back after
the move. Under one REAL Kafka controller: kcompat brokers 1 and 2, Java broker 4.

    [4, 1]  (Java leads, kcompat follows)
      --reassign--> [1, 2]  (adding 2, removing 4: the Java replica is stopped and deleted)
      --reassign--> [4, 1]  (adding 4 back: the Java broker follows the kcompat leader)
      --preferred election--> leader 4

Proven: every acknowledged record (a ledger of what the producer was told) is read back exactly
once and in order; the replica left on each broker is byte-identical to the leader's; the removed
replica's directory is deleted; the tool's own --verify reports each move done.

Stray logs: a replica moved away while its kcompat broker was down is moved aside as
`<topic>-<p>.<uuid>-stray` when that broker restarts (Kafka 4.x), and one still assigned is kept.

A group coordinated by the Java broker (it leads the group's `__consumer_offsets` partition) whose
members know only the kcompat brokers: FindCoordinator through kcompat names the Java broker,
commits are exact, a second member's join splits the partitions and it starts from the commit.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import kafka
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support import kafka_tool

from compat_tests.cluster.test_replication import Cluster, JavaBroker, replicas_identical
from compat_tests.crash.wire_client import WireClient
from kcompat.coordinator.records import offsets_partition
from kcompat.testing import wait_until
from kcompat.testing_cluster import HOST, ControllerQuorum
from kcompat.wire.messages.find_coordinator import FIND_COORDINATOR

pytestmark = pytest.mark.timeout(240)

TOPIC = "moving"
JAVA = 4


@pytest.fixture(scope="module")
def mixed(
    kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, JavaBroker]]:
    c = Cluster(kraft_quorum, tmp_path_factory.mktemp("reassign"))
    java = JavaBroker(kraft_quorum, c.root, JAVA)
    try:
        for node_id in (1, 2):
            c.start(node_id)
        java.start()
        wait_until(
            lambda: sorted(b.node_id for b in c.metadata(c.brokers[1], "none").brokers) == [1, 2, JAVA],
            "both kcompat brokers and the Java broker unfenced",
            timeout=90,
        )
        yield c, java
    finally:
        java.stop()
        for b in c.brokers.values():
            if b.running:
                b.stop()


class Ledger:
    """An idempotent acks=all producer writing `seq-N` values without pause; `acked` in order."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 2, "message.timeout.ms": 120000})  # fmt: skip
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ledger", daemon=True)

    def _delivered(self, err: object, msg: object) -> None:
        if err is None:
            self.acked.append(msg.value())  # type: ignore[attr-defined]
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            self.producer.produce(TOPIC, f"seq-{n}".encode(), partition=0, on_delivery=self._delivered)
            n += 1
            self.producer.poll(0.004)
        self.producer.flush(120)

    def wait_acked(self, more: int, timeout: float = 60.0) -> None:
        target = len(self.acked) + more
        wait_until(
            lambda: len(self.acked) >= target,
            f"{more} more records acknowledged",
            timeout=timeout,
        )


def reassign(c: Cluster, bootstrap: str, replicas: list[int], topic: str = TOPIC) -> None:
    plan = c.root / f"move-{topic}-{'-'.join(map(str, replicas))}.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]})
    )
    out = kafka_tool("kafka-reassign-partitions", "--bootstrap-server", bootstrap,
                     "--reassignment-json-file", str(plan), "--execute").stdout  # fmt: skip
    assert "Successfully started partition reassignment" in out, out

    # The move is done when the image's replicas are the target (adding and removing ones gone);
    # then the tool's own --verify must say so too.
    wait_until(lambda: c.partitions(topic)[0][2] == replicas, f"the move to {replicas}", timeout=90)
    verify = kafka_tool("kafka-reassign-partitions", "--bootstrap-server", bootstrap,
                        "--reassignment-json-file", str(plan), "--verify").stdout  # fmt: skip
    assert f"Reassignment of partition {topic}-0 is completed" in verify, verify


def test_reassign_java_to_kcompat_and_back_then_preferred_election(mixed: tuple[Cluster, JavaBroker]) -> None:
    c, java = mixed
    c.create_topic(TOPIC, 1, 2, {}, assignments=[[JAVA, 1]])
    wait_until(
        lambda: c.partitions(TOPIC)[0][0] == JAVA and sorted(c.partitions(TOPIC)[0][3]) == [1, JAVA],
        "the Java broker leading with kcompat in the ISR",
        timeout=60,
    )

    bootstrap = f"{c.bootstrap},{HOST}:{java.port}"
    ledger = Ledger(bootstrap)
    ledger.thread.start()
    try:
        ledger.wait_acked(150)
        # Off the Java broker: kcompat 2 is added (fetches from the Java leader), the Java replica removed.
        reassign(c, bootstrap, [1, 2])
        leader, _epoch, replicas, isr = c.partitions(TOPIC)[0]
        assert (leader, replicas, sorted(isr)) == (1, [1, 2], [1, 2])
        wait_until(
            lambda: not (java.data / f"{TOPIC}-0").exists(),
            "the removed Java replica deleted",
            timeout=60,
        )
        ledger.wait_acked(150)
        # And back: the Java broker follows the kcompat leader, then leads again as preferred replica.
        reassign(c, bootstrap, [JAVA, 1])
        leader, _epoch, replicas, isr = c.partitions(TOPIC)[0]
        assert (leader, replicas, sorted(isr)) == (1, [JAVA, 1], [1, JAVA])
        wait_until(
            lambda: not any((c.root / "broker-2" / f"{TOPIC}-0").glob("*.log")),
            "the removed kcompat replica deleted",
            timeout=60,
        )
        ledger.wait_acked(150)
        out = kafka_tool("kafka-leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred",
                         "--topic", TOPIC, "--partition", "0").stdout  # fmt: skip
        assert f"Successfully completed leader election (PREFERRED) for partitions {TOPIC}-0" in out, out
        wait_until(
            lambda: c.partitions(TOPIC)[0][0] == JAVA,
            "the preferred Java replica leading",
            timeout=60,
        )
        ledger.wait_acked(150)
    finally:
        ledger.stop.set()
        ledger.thread.join(150)
    assert not ledger.failed, ledger.failed[:3]

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ledger-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < len(ledger.acked) and time.monotonic() < deadline:
        m = consumer.poll(1)
        if m is not None and m.error() is None:
            seen.append(m.value())
    consumer.close()
    assert set(ledger.acked) - set(seen) == set(), "acknowledged records lost"
    assert len(seen) == len(set(seen)), "duplicates"
    assert seen == sorted(seen, key=lambda v: int(v.split(b"-")[1])), "out of order"
    print(f"moves: {len(ledger.acked)} records acknowledged, all read back once and in order")

    described = kafka_tool(
        "kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic", TOPIC
    ).stdout
    assert f"Leader: {JAVA}" in described and f"Replicas: {JAVA},1" in described, described
    wait_until(
        lambda: bool(java.segment(TOPIC, 0)) and java.segment(TOPIC, 0) == c.segment(1, TOPIC, 0),
        "the Java and the kcompat replica byte-identical",
        timeout=60,
    )


def test_replica_moved_away_while_down_is_a_stray_at_restart(mixed: tuple[Cluster, JavaBroker]) -> None:
    c, java = mixed
    topic = "strays"
    c.create_topic(topic, 2, 2, {}, assignments=[[2, 1], [1, 2]])
    wait_until(
        lambda: all(sorted(p[3]) == [1, 2] for p in c.partitions(topic).values()),
        "both replicas in sync",
        timeout=60,
    )
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(topic, f"r-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    for p in (0, 1):
        wait_until(
            lambda p=p: replicas_identical(c, topic, p, [1, 2]),
            f"{topic}-{p} replicated to broker 2",
            timeout=60,
        )

    c.brokers[2].stop()
    bootstrap = f"{c.bootstrap},{HOST}:{java.port}"
    reassign(c, bootstrap, [1, JAVA], topic)  # broker 2's replica of partition 0 removed while it is down
    data = c.root / "broker-2"
    assert (data / f"{topic}-0").is_dir()  # nobody told the stopped broker

    c.start(2)
    wait_until(
        lambda: not (data / f"{topic}-0").exists(),
        "the moved-away replica gone from its place",
        timeout=60,
    )
    strays = list(data.glob(f"{topic}-0.*-stray"))
    assert len(strays) == 1 and any(strays[0].glob("*.log")), strays  # moved aside, not deleted (Kafka 4.x)
    # The replica still assigned is kept: it rejoins the ISR, byte-identical to the leader's.
    wait_until(
        lambda: sorted(c.partitions(topic)[1][3]) == [1, 2],
        f"{topic}-1 back in sync on broker 2",
        timeout=60,
    )
    wait_until(
        lambda: replicas_identical(c, topic, 1, [1, 2]),
        f"{topic}-1 identical on both brokers",
        timeout=60,
    )
    log_text = c.brokers[2].log_path.read_text(errors="replace")
    assert f"{topic}-0: not a replica here in the metadata: stray log moved aside" in log_text
    assert f"{topic}-1: not a replica" not in log_text


def find_coordinator(port: int, group: str) -> int | None:
    client = WireClient(HOST, port)
    try:
        r = client.call(FIND_COORDINATOR.key, 4, {"key_type": 0, "coordinator_keys": [group]})
    finally:
        client.close()
    return int(r.coordinators[0].node_id) if r.coordinators[0].error_code == 0 else None


def test_group_coordinated_by_the_java_broker_with_members_on_kcompat(
    mixed: tuple[Cluster, JavaBroker],
) -> None:
    c, _java = mixed
    topic, committed = "java-coordinated", {0: 7, 1: 11}
    c.create_topic(topic, 2, 2, {}, assignments=[[1, 2], [2, 1]])
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(40):
        producer.produce(topic, f"g-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    kcompat = c.brokers[1]
    wait_until(
        lambda: find_coordinator(kcompat.port, "probe") is not None,
        "__consumer_offsets created",
        timeout=60,
    )
    offsets = c.partitions("__consumer_offsets")
    group = next((g for g in (f"java-led-{i}" for i in range(1000))
                  if offsets[offsets_partition(g, len(offsets))][0] == JAVA), None)  # fmt: skip
    assert group is not None, f"no __consumer_offsets partition led by the Java broker: {offsets}"
    assert find_coordinator(kcompat.port, group) == JAVA

    # The members know only the kcompat brokers (data leaders 1 and 2); the coordinator is broker 4.
    a = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 10000})  # fmt: skip
    assigned: list[set[int]] = [set()]

    def on_assign(_c: object, partitions: list[TopicPartition]) -> None:
        assigned[0] = {p.partition for p in partitions}

    a.subscribe([topic], on_assign=on_assign)
    wait_until(
        lambda: a.poll(0.2) is not None and assigned[0] == {0, 1},
        "member A assigned both partitions",
        timeout=60,
    )
    a.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)
    got = a.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    assert {tp.partition: tp.offset for tp in got} == committed

    stop = threading.Event()

    def keep_polling() -> None:  # A must poll to take part in the rebalance
        while not stop.is_set():
            a.poll(0.2)

    poller = threading.Thread(target=keep_polling, daemon=True)
    poller.start()
    b = kafka.KafkaConsumer(topic, bootstrap_servers=c.bootstrap, group_id=group, enable_auto_commit=False,
                            auto_offset_reset="earliest", session_timeout_ms=10000)  # fmt: skip
    try:
        wait_until(
            lambda: b.poll(timeout_ms=200) is not None and len(b.assignment()) == 1,
            "member B assigned one partition",
            timeout=60,
        )
        (b_tp,) = b.assignment()
        wait_until(
            lambda: assigned[0] == {1 - b_tp.partition},
            "member A down to the other partition",
            timeout=60,
        )
        assert b.committed(b_tp) == committed[b_tp.partition]
    finally:
        b.close(autocommit=False)
        stop.set()
        poller.join(10)
        a.close()

    out = kafka_tool("kafka-consumer-groups", "--bootstrap-server", kcompat.bootstrap,
                     "--describe", "--group", group).stdout  # fmt: skip
    rows = {int(cols[2]): int(cols[3]) for line in out.splitlines()
            if (cols := line.split()) and cols[0] == group and cols[1] == topic}  # fmt: skip
    assert rows == committed, out
