"""Cluster mode, step 2: partitions served and replicated. Three `kcompat serve` brokers under one
REAL Kafka 4.3 controller; topics are created on the controller (KIP-919, as --bootstrap-controller
does), so Kafka's controller chooses leaders and ISR and kcompat brokers lead and follow as told.

Proven here: Metadata and kafka-topics --describe show every broker, leader and ISR from the image;
Produce only on the leader (NOT_LEADER_OR_FOLLOWER with KIP-951 hints elsewhere); acks=all
producers (librdkafka and kafka-python) on an RF=3, min.insync.replicas=2 topic are read back whole
from the leader; every replica's segment is byte-identical to the leader's; and after kill -9 of the
leader Kafka's controller elects a follower that has every acknowledged record, and the old leader,
restarted, rejoins the ISR through the kcompat leader's AlterPartition.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import kafka_tool

from compat_tests.crash.wire_client import WireClient, produce_body
from kcompat.testing import Broker, free_port, wait_until
from kcompat.testing_cluster import CONTROLLER_JVM, HOST, KAFKA_JARS, ControllerQuorum, answers_api_versions

BROKER_IDS = (1, 2, 3)
CREATE_TOPICS, METADATA, PRODUCE = 19, 3, 0
DESCRIBE_TOPIC_PARTITIONS = 75
NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
LAG_MAX_MS = 4000


class Cluster:
    def __init__(self, quorum: ControllerQuorum, root: Path) -> None:
        self.quorum = quorum
        self.root = root
        self.brokers: dict[int, Broker] = {}

    def start(self, node_id: int, wait: bool = True) -> Broker:
        data = self.root / f"broker-{node_id}"
        if not (data / "meta.properties").exists():
            self.quorum.format_broker(data, node_id)
        b = self.brokers.get(node_id) or Broker(
            data,
            self.root / f"broker-{node_id}.log",
            overrides={
                "process.roles": "broker",
                "node.id": str(node_id),
                "cluster.id": self.quorum.cluster_id,
                "controller.quorum.bootstrap.servers": self.quorum.bootstrap_servers,
                "controller.listener.names": "CONTROLLER",
                "broker.heartbeat.interval.ms": "500",
                "replica.fetch.backoff.ms": "200",
                # Below the controller's broker.session.timeout.ms (9 s), so a stalled follower
                # leaves the ISR by the leader's AlterPartition before the controller fences it.
                "replica.lag.time.max.ms": str(LAG_MAX_MS),
            },
        )
        self.brokers[node_id] = b
        b.start(wait)
        return b

    @contextmanager
    def running(self, node_ids: Iterable[int]) -> Iterator[None]:
        """Start these brokers and wait until each is unfenced; stop every running one at the end."""
        try:
            for b in [self.start(node_id, wait=False) for node_id in node_ids]:
                b.wait_ready()  # a cluster-mode broker answers once unfenced
            yield
        finally:
            for b in self.brokers.values():
                if b.running:
                    b.stop()

    def live(self) -> list[Broker]:
        return [b for b in self.brokers.values() if b.running]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.live())

    def create_topic(
        self,
        name: str,
        partitions: int,
        rf: int,
        configs: dict[str, str],
        assignments: list[list[int]] | None = None,
    ) -> uuid.UUID:
        """Created on the controller; `assignments`: partition p's replicas, preferred leader first
        (partitions and rf are then -1, as Kafka's CreateTopics wants)."""
        placed = [{"partition_index": p, "broker_ids": ids} for p, ids in enumerate(assignments or [])]
        client = WireClient(HOST, self.quorum.controllers[0].port)
        try:
            response = client.call(CREATE_TOPICS, 7, {
                "topics": [{"name": name, "num_partitions": -1 if placed else partitions,
                            "replication_factor": -1 if placed else rf, "assignments": placed,
                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout_ms": 10000, "validate_only": False,
            })  # fmt: skip
        finally:
            client.close()
        created = response.topics[0]
        assert created.error_code == 0, created
        return created.topic_id  # type: ignore[no-any-return]

    def metadata(self, via: Broker, topic: str) -> object:
        client = WireClient(HOST, via.port)
        try:
            return client.call(METADATA, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                              "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": False})  # fmt: skip
        finally:
            client.close()

    def partitions(
        self, topic: str, via: int | None = None
    ) -> dict[int, tuple[int, int, list[int], list[int]]]:
        """partition -> (leader, leader epoch, replicas, isr) as a live broker's (or broker `via`'s)
        Metadata says, once all have a leader."""

        def got() -> dict[int, tuple[int, int, list[int], list[int]]] | None:
            for b in self.live() if via is None else [self.brokers[via]]:
                try:
                    r = self.metadata(b, topic)
                except OSError:
                    continue
                t = r.topics[0]  # type: ignore[attr-defined]
                if t.error_code == 0 and t.partitions and all(p.error_code == 0 for p in t.partitions):
                    return {p.partition_index: (p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes))
                            for p in t.partitions}  # fmt: skip
            return None

        return wait_until(got, f"leaders of {topic}", timeout=40)  # type: ignore[return-value]

    def segment(self, node_id: int, topic: str, partition: int) -> bytes:
        d = self.root / f"broker-{node_id}" / f"{topic}-{partition}"
        return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


class JavaBroker:
    """An Apache Kafka 4.3.1 broker (process.roles=broker) from .deps/kafka, under the same controller."""

    def __init__(self, quorum: ControllerQuorum, root: Path, node_id: int) -> None:
        self.quorum, self.node_id, self.port = quorum, node_id, free_port()
        self.workdir = root / f"java-broker-{node_id}"
        self.data = self.workdir / "data"
        self.process: subprocess.Popen[bytes] | None = None
        self.extra: dict[str, str] = {}  # more server.properties (Kafka's names)

    def start(self) -> None:
        self.quorum.format_broker(self.data, self.node_id)  # Kafka's own kafka-storage format
        props = {
            "process.roles": "broker", "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": self.quorum.bootstrap_servers,
            "controller.listener.names": "CONTROLLER", "listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data), "broker.heartbeat.interval.ms": "500",
            "offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0",
            **self.extra,
        }  # fmt: skip
        (self.workdir / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        java = shutil.which("java") or "java"
        with (self.workdir / "stdout.log").open("wb") as out:
            self.process = subprocess.Popen(
                [java, *CONTROLLER_JVM, "-cp", str(KAFKA_JARS / "*"), "kafka.Kafka", str(self.workdir / "server.properties")],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        wait_until(lambda: answers_api_versions(HOST, self.port), "the Java broker to listen", timeout=90)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def segment(self, topic: str, partition: int) -> bytes:
        return b"".join(p.read_bytes() for p in sorted((self.data / f"{topic}-{partition}").glob("*.log")))


@pytest.fixture(scope="module")
def cluster(kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(kraft_quorum, tmp_path_factory.mktemp("replication"))
    with c.running(BROKER_IDS):
        yield c


def replicas_identical(c: Cluster, topic: str, partition: int, replicas: list[int]) -> bool:
    segments = [c.segment(r, topic, partition) for r in replicas]
    return bool(segments[0]) and all(s == segments[0] for s in segments)


def test_metadata_and_describe_from_the_image(cluster: Cluster) -> None:
    cluster.create_topic("described", 3, 3, {"min.insync.replicas": "2"})
    parts = cluster.partitions("described")
    assert sorted(parts) == [0, 1, 2]
    for leader, _epoch, replicas, isr in parts.values():
        assert sorted(replicas) == list(BROKER_IDS) and sorted(isr) == list(BROKER_IDS)
        assert leader in BROKER_IDS
    assert len({p[0] for p in parts.values()}) == 3  # the controller spreads leadership over the three
    r = cluster.metadata(cluster.brokers[1], "described")
    assert sorted((b.node_id, b.port) for b in r.brokers) == sorted(
        (i, b.port) for i, b in cluster.brokers.items()
    )  # type: ignore[attr-defined]

    out = kafka_tool(
        "kafka-topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", "described"
    ).stdout
    for index, (leader, _epoch, replicas, isr) in parts.items():
        line = next(
            x for x in out.splitlines() if f"Partition: {index}\t" in x or f"Partition: {index} " in x
        )
        assert f"Leader: {leader}" in line, out
        assert "Replicas: " + ",".join(map(str, replicas)) in line, out
        assert "Isr: " + ",".join(map(str, isr)) in line, out


def test_produce_only_on_the_leader_with_hints(cluster: Cluster) -> None:
    cluster.create_topic("leader-only", 1, 3, {})
    leader = cluster.partitions("leader-only")[0][0]
    other_id = next(i for i in cluster.brokers if i != leader)
    # The broker asked must know the topic first: until its image has it, a Produce there is
    # LEADER_NOT_AVAILABLE (the topic is being created), not the hint this test is about.
    leader, epoch, _replicas, _isr = cluster.partitions("leader-only", via=other_id)[0]
    other = cluster.brokers[other_id]
    client = WireClient(HOST, other.port)
    try:
        r = client.call(PRODUCE, 11, produce_body("leader-only", b"v", acks=-1))
    finally:
        client.close()
    p = r.responses[0].partition_responses[0]
    assert p.error_code == NOT_LEADER_OR_FOLLOWER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, epoch)
    assert [(e.node_id, e.port) for e in r.node_endpoints] == [(leader, cluster.brokers[leader].port)]


def test_acks_all_producers_read_back_and_replicas_byte_identical(cluster: Cluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    kafka = pytest.importorskip("kafka")
    cluster.create_topic("replicated", 2, 3, {"min.insync.replicas": "2"})
    parts = cluster.partitions("replicated")

    acked: list[bytes] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "enable.idempotence": False, "linger.ms": 5})  # fmt: skip

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        acked.append(msg.value())  # type: ignore[attr-defined]

    for i in range(2000):
        producer.produce("replicated", f"librdkafka-{i}".encode(), partition=i % 2, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    kp = kafka.KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5, enable_idempotence=False
    )
    futures = [kp.send("replicated", f"kafka-python-{i}".encode(), partition=i % 2) for i in range(1000)]
    for i, f in enumerate(futures):
        f.get(timeout=60)  # raises unless acknowledged
        acked.append(f"kafka-python-{i}".encode())
    kp.close()
    java_lines = [f"java-{i}" for i in range(500)]
    kafka_tool("kafka-console-producer", "--bootstrap-server", cluster.bootstrap, "--topic", "replicated",
               "--command-property", "acks=all", "--command-property", "enable.idempotence=false",
               input="\n".join(java_lines) + "\n")  # fmt: skip
    acked += [line.encode() for line in java_lines]
    assert len(acked) == 3500

    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                                   auto_offset_reset="earliest", consumer_timeout_ms=10000)  # fmt: skip
    consumer.assign([kafka.TopicPartition("replicated", p) for p in parts])
    by_partition: dict[int, list[bytes]] = {0: [], 1: []}
    for message in consumer:
        by_partition[message.partition].append(message.value)
        if sum(map(len, by_partition.values())) == len(acked):
            break
    consumer.close()
    assert sorted(by_partition[0] + by_partition[1]) == sorted(acked)

    # Kafka's Java consumer reads partition 0 back from its leader too, in the same order.
    out = kafka_tool("kafka-console-consumer", "--bootstrap-server", cluster.bootstrap, "--topic", "replicated",
                     "--partition", "0", "--offset", "earliest", "--max-messages", str(len(by_partition[0])),
                     "--timeout-ms", "20000").stdout  # fmt: skip
    assert out.splitlines() == [v.decode() for v in by_partition[0]]

    for index, (_leader, _epoch, replicas, _isr) in parts.items():
        wait_until(
            lambda index=index, replicas=replicas: replicas_identical(cluster, "replicated", index, replicas),
            f"replicas of replicated-{index} byte-identical",
            timeout=40,
        )


def test_stalled_followers_leave_the_isr_and_rejoin(cluster: Cluster) -> None:
    """Both followers stopped: the leader shrinks the ISR to itself through AlterPartition after
    replica.lag.time.max.ms (before the controller would fence them), acks=all is then refused
    with NOT_ENOUGH_REPLICAS (min.insync.replicas=2), and both rejoin once they run again."""
    cluster.create_topic("stalled", 1, 3, {"min.insync.replicas": "2"})
    leader, _epoch, replicas, isr = cluster.partitions("stalled")[0]
    assert sorted(isr) == list(BROKER_IDS)
    stalled = [cluster.brokers[r] for r in replicas if r != leader]
    for b in stalled:
        assert b.process is not None
        b.process.send_signal(signal.SIGSTOP)
    try:
        took = time.monotonic()
        wait_until(
            lambda: cluster.partitions("stalled", leader)[0][3] == [leader],
            "the ISR shrunk to the leader",
            timeout=30,
        )
        shrunk_after = time.monotonic() - took
        client = WireClient(HOST, cluster.brokers[leader].port)
        try:
            r = client.call(PRODUCE, 9, produce_body("stalled", b"v", acks=-1))
        finally:
            client.close()
    finally:
        for b in stalled:
            b.process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    assert r.responses[0].partition_responses[0].error_code == NOT_ENOUGH_REPLICAS
    log = cluster.brokers[leader].log_path.read_text(errors="replace")
    assert "stalled-0: AlterPartition isr" in log and "out of sync" in log, (
        "the leader did not shrink the ISR"
    )
    assert shrunk_after >= LAG_MAX_MS / 1000 - 1
    wait_until(
        lambda: sorted(cluster.partitions("stalled")[0][3]) == list(BROKER_IDS),
        "the followers back in the ISR",
        timeout=30,
    )


def elr_of(cluster: Cluster, via: int, topic: str) -> tuple[list[int], list[int], list[int]]:
    """(ISR, ELR, last-known ELR) of partition 0 by DescribeTopicPartitions through broker `via`."""
    client = WireClient(HOST, cluster.brokers[via].port)
    try:
        r = client.call(DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": topic}],
                                                       "response_partition_limit": 100, "cursor": None})  # fmt: skip
    finally:
        client.close()
    if not r.topics or not r.topics[0].partitions:
        return [], [], []  # `via` has not applied the topic yet: a wait on the lists goes on
    p = r.topics[0].partitions[0]
    return sorted(p.isr_nodes), sorted(p.eligible_leader_replicas), sorted(p.last_known_elr)


def test_elr_is_reported_and_never_counted_as_isr(cluster: Cluster) -> None:
    """ELR on (KIP-966, the test controllers' format): followers stalled past the lag time leave
    the ISR below min.insync.replicas, so Kafka's controller keeps them as eligible leader
    replicas. The leader reports them (DescribeTopicPartitions, what kafka-topics --describe shows
    as Elr) and still refuses acks=all: an ELR member is not ISR. Back, they rejoin the ISR and the
    ELR empties."""
    cluster.create_topic("elr", 1, 3, {"min.insync.replicas": "2"})
    leader, _epoch, replicas, isr = cluster.partitions("elr")[0]
    assert sorted(isr) == list(BROKER_IDS)
    followers = sorted(r for r in replicas if r != leader)
    stalled = [cluster.brokers[r] for r in followers]
    for b in stalled:
        assert b.process is not None
        b.process.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: elr_of(cluster, leader, "elr")[:2] == ([leader], followers),
                   "the stalled followers in the ELR", timeout=30)  # fmt: skip
        client = WireClient(HOST, cluster.brokers[leader].port)
        try:
            r = client.call(PRODUCE, 9, produce_body("elr", b"v", acks=-1))
        finally:
            client.close()
    finally:
        for b in stalled:
            b.process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    assert r.responses[0].partition_responses[0].error_code == NOT_ENOUGH_REPLICAS
    wait_until(lambda: elr_of(cluster, leader, "elr")[:2] == (list(BROKER_IDS), []),
               "the followers back in the ISR, the ELR empty", timeout=40)  # fmt: skip


def test_kill_leader_loses_no_acknowledged_record(cluster: Cluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cluster.create_topic("failover", 1, 3, {"min.insync.replicas": "2"})
    leader, epoch, _replicas, _isr = cluster.partitions("failover")[0]
    acked: list[bytes] = []

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append(msg.value())  # type: ignore[attr-defined]

    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "enable.idempotence": False, "message.timeout.ms": 60000,
                                         "linger.ms": 5})  # fmt: skip
    for i in range(500):
        producer.produce("failover", f"before-{i}".encode(), on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(acked) == 500

    cluster.brokers[leader].kill()  # SIGKILL

    def new_leader() -> tuple[int, int] | None:
        got = cluster.partitions("failover")[0]
        return (got[0], got[1]) if got[0] != leader and got[1] > epoch else None

    took = time.monotonic()
    new, new_epoch = wait_until(new_leader, "a new leader elected by the controller", timeout=60)  # type: ignore[misc]
    assert new in BROKER_IDS and new != leader
    for i in range(500):
        producer.produce("failover", f"after-{i}".encode(), on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    print(f"failover: leader {leader} killed, broker {new} leads at epoch {new_epoch} after "
          f"{time.monotonic() - took:.1f} s")  # fmt: skip

    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition("failover", 0, 0)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < len(acked) and time.monotonic() < deadline:
        m = consumer.poll(1)
        if m is not None and m.error() is None:
            seen.append(m.value())
    consumer.close()
    lost = set(acked) - set(seen)
    assert not lost, f"{len(lost)} acknowledged records lost"
    assert len(seen) == len(set(seen))

    # The old leader comes back as a follower, catches up, and the kcompat leader takes it back
    # into the ISR through AlterPartition; its segment ends byte-identical to the others'.
    cluster.start(leader)
    wait_until(
        lambda: sorted(cluster.partitions("failover")[0][3]) == list(BROKER_IDS),
        f"broker {leader} back in the ISR",
        timeout=60,
    )
    wait_until(
        lambda: replicas_identical(cluster, "failover", 0, list(BROKER_IDS)),
        "replicas byte-identical",
        timeout=40,
    )


def test_mixed_cluster_replicates_both_ways_with_a_java_broker(cluster: Cluster) -> None:
    """A Java follower replicates a kcompat-led partition and a kcompat follower a Java-led one."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    java = JavaBroker(cluster.quorum, cluster.root, 4)
    java.start()
    try:
        kcompat = next(i for i, b in cluster.brokers.items() if b.running)
        wait_until(
            lambda: 4 in [b.node_id for b in cluster.metadata(cluster.brokers[kcompat], "none").brokers],
            "the Java broker registered and unfenced",
            timeout=60,
        )
        client = WireClient(HOST, cluster.quorum.controllers[0].port)
        try:
            r = client.call(CREATE_TOPICS, 7, {
                "topics": [{"name": "mixed", "num_partitions": -1, "replication_factor": -1, "configs": [],
                            "assignments": [{"partition_index": 0, "broker_ids": [kcompat, 4]},
                                            {"partition_index": 1, "broker_ids": [4, kcompat]}]}],
                "timeout_ms": 10000, "validate_only": False,
            })  # fmt: skip
        finally:
            client.close()
        assert r.topics[0].error_code == 0, r.topics[0]
        parts = cluster.partitions("mixed")
        assert (parts[0][0], parts[1][0]) == (kcompat, 4)  # the first replica leads
        producer = confluent_kafka.Producer({"bootstrap.servers": f"{HOST}:{java.port}", "acks": "all",
                                             "enable.idempotence": False, "linger.ms": 5})  # fmt: skip
        for i in range(1000):
            producer.produce("mixed", f"mixed-{i}".encode(), partition=i % 2)
            producer.poll(0)
        assert producer.flush(60) == 0
        for index in (0, 1):
            wait_until(lambda index=index: bool(java.segment("mixed", index))
                     and java.segment("mixed", index) == cluster.segment(kcompat, "mixed", index), f"mixed-{index} byte-identical on the Java and the kcompat replica", timeout=40)  # fmt: skip
        assert sorted(parts[0][3]) == sorted(parts[1][3]) == sorted([kcompat, 4])
        # The kcompat follower fetched mixed-1 from the Java leader in an incremental fetch session
        # (KIP-227): a non-zero session id, and the Java broker never refused a request of it.
        followed = cluster.brokers[kcompat].log_path.read_text(errors="replace")
        sessions = [int(m) for m in re.findall(r"fetch session (\d+) with broker 4 ", followed)]
        assert sessions and all(sessions), followed[-2000:]
        assert "replica fetch from broker 4 (session" not in followed
        out = kafka_tool(
            "kafka-topics", "--bootstrap-server", f"{HOST}:{java.port}", "--describe", "--topic", "mixed"
        ).stdout
        assert f"Leader: {kcompat}" in out and "Leader: 4" in out, out
    finally:
        java.stop()
