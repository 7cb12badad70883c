"""Several log dirs in cluster mode, under a real Kafka 4.3.1 controller: kcompat broker 1 with two
log dirs registers both (BrokerRegistration.LogDirs), tells the controller which dir holds each of
its replicas (AssignReplicasToDirs: Kafka's controller leaves them UNASSIGNED on a broker with
several dirs), and when one dir fails (removed under the running broker) reports it in its
heartbeats (OfflineLogDirs): the controller moves leadership of the partitions in that dir to
broker 2, the partition in the other dir stays led by broker 1, and every record an idempotent
acks=all producer was told is written is read back."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.crash.ledger import read_topic
from compat_tests.jbod_wire import placement
from kcompat.testing import Broker, wait_until
from kcompat.testing_cluster import ControllerQuorum

pytestmark = pytest.mark.timeout(240)
TOPIC = "jbod"


def broker(quorum: ControllerQuorum, root: Path, node_id: int, dirs: list[Path], **more: str) -> Broker:
    quorum.format_broker(dirs[0], node_id)
    return Broker(
        dirs[0],
        root / f"broker-{node_id}.log",
        overrides={
            "process.roles": "broker",
            "node.id": str(node_id),
            "cluster.id": quorum.cluster_id,
            "controller.quorum.bootstrap.servers": quorum.bootstrap_servers,
            "controller.listener.names": "CONTROLLER",
            "broker.heartbeat.interval.ms": "500",
            "replica.fetch.backoff.ms": "200",
            "log.dirs": ",".join(str(d) for d in dirs),
            **more,
        },
    )


@pytest.fixture(scope="module")
def cluster(
    kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Broker, Broker, list[Path]]]:
    root = tmp_path_factory.mktemp("jbod-cluster")
    dirs = [root / "b1-a", root / "b1-b"]
    # log.roll.ms=1: each append makes a segment file, so a removed dir fails the next one.
    b1 = broker(kraft_quorum, root, 1, dirs, **{"log.roll.ms": "1"})
    b2 = broker(kraft_quorum, root, 2, [root / "b2"])
    try:
        for b in (b1, b2):
            b.start(wait=False)
        for b in (b1, b2):
            b.wait_ready()
        yield b1, b2, dirs
    finally:
        for b in (b1, b2):
            if b.running:
                b.stop()


def leaders(bootstrap: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    return {p.id: p.leader for p in md.topics[TOPIC].partitions.values()}


def test_a_failed_dir_moves_its_leaderships_to_another_broker(
    cluster: tuple[Broker, Broker, list[Path]],
) -> None:
    b1, b2, dirs = cluster
    bootstrap = f"{b1.bootstrap},{b2.bootstrap}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, replica_assignment=[[1, 2], [1, 2]])])[TOPIC].result(30)
    wait_until(lambda: leaders(bootstrap) == {0: 1, 1: 1}, "broker 1 leads both partitions", timeout=30)
    where = placement(b1.bootstrap, TOPIC)
    assert {where[(0, False)], where[(1, False)]} == {str(d) for d in dirs}  # one partition per dir
    wait_until(
        lambda: "AssignReplicasToDirs: 2 replica(s) placed" in b1.log_path.read_text(),
        "broker 1 told the controller where its replicas are",
        timeout=30,
    )
    acked: dict[int, list[bytes]] = {0: [], 1: []}
    failed: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked[msg.partition()].append(msg.value())  # type: ignore[attr-defined]

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 60000,
        }
    )
    seq = 0

    def produce(n: int) -> None:
        nonlocal seq
        for _ in range(n):
            for p in (0, 1):
                producer.produce(TOPIC, b"%d-%08d" % (p, seq), partition=p, on_delivery=delivered)
            seq += 1
            producer.poll(0.002)
        assert producer.flush(60) == 0

    produce(50)
    failing = next(p for p in (0, 1) if where[(p, False)] == str(dirs[0]))
    shutil.rmtree(dirs[0])  # the disk pulled out from under broker 1
    deadline = time.monotonic() + 60
    while leaders(bootstrap)[failing] != 2:  # the next appends fail there; the heartbeat says so
        assert time.monotonic() < deadline, f"leaders stayed {leaders(bootstrap)}"
        produce(5)
    assert leaders(bootstrap)[1 - failing] == 1  # the other dir's partition: still broker 1's
    produce(50)
    assert failed == []
    stored = read_topic(b2.bootstrap, TOPIC, 2)
    for p in (0, 1):
        values = [s.value for s in stored[p]]
        assert len(values) == len(set(values)), f"partition {p}: a record twice"
        assert set(acked[p]) <= set(values), (
            f"partition {p}: {len(set(acked[p]) - set(values))} acknowledged lost"
        )
    assert b1.running and "Traceback" not in b1.log_path.read_text()
