"""Failover rounds (slow layer): kill -9 of the partition leader, chased round after round, while an
acks=all producer writes continuously and a ledger records every acknowledged record. Three kcompat
brokers under one Kafka 4.3.1 controller; RF=3, min.insync.replicas=2. Each round (seeded pauses)
kills the current leader, waits for the controller to elect another, restarts the killed broker
and waits for it to rejoin the ISR. At the end every acknowledged record must be readable from the
leader: lost = 0. The producer is idempotent (its producer id from an AllocateProducerIds block of
the controller), so a batch retried after a failover is answered, not written twice: duplicates = 0.

KCOMPAT_FAILOVER_ROUNDS sets the number of rounds (20 by default); KCOMPAT_FAILOVER_SEED the seed.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import statistics
import threading
import time
from collections.abc import Iterator

import pytest

from compat_tests.cluster.test_replication import BROKER_IDS, Cluster
from compat_tests.crash.wire_client import WireClient, produce_body, read_frame
from kcompat.testing import wait_until
from kcompat.testing_cluster import HOST, ControllerQuorum
from kcompat.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("KCOMPAT_FAILOVER_ROUNDS", "20"))
SEED = int(os.environ.get("KCOMPAT_FAILOVER_SEED", "14"))
TOPIC = "ledger"


@pytest.fixture(scope="module")
def cluster(kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(kraft_quorum, tmp_path_factory.mktemp("failover"))
    with c.running(BROKER_IDS):
        yield c


class LedgerProducer(threading.Thread):
    """Produces "seq-N" continuously (acks=all); `acked` maps each acknowledged value to its time."""

    def __init__(self, bootstrap: str, topic: str = TOPIC) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        confluent_kafka = pytest.importorskip("confluent_kafka")
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "message.timeout.ms": 120000, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 0,
        })  # fmt: skip
        self.acked: dict[bytes, float] = {}
        self.failed = 0
        self.stopping = threading.Event()

    def _delivered(self, err: object, msg: object) -> None:
        if err is None:
            self.acked[msg.value()] = time.monotonic()  # type: ignore[attr-defined]
        else:
            self.failed += 1

    def run(self) -> None:
        seq = 0
        while not self.stopping.is_set():
            try:
                self.producer.produce(self.topic, f"seq-{seq}".encode(), on_delivery=self._delivered)
                seq += 1
            except BufferError:
                pass
            self.producer.poll(0.005)
        self.producer.flush(120)


def read_all(cluster: Cluster, topic: str, wanted: set[bytes]) -> list[bytes]:
    """Every record of partition 0 from its leader, until `wanted` is all there (or 60 s)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False, "log_level": 0})  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while not wanted.issubset(seen) and time.monotonic() < deadline:
        seen.extend(m.value() for m in consumer.consume(1000, 1) if m.error() is None)
    consumer.close()
    return seen


def fault_report(
    kind: str,
    rounds: int,
    producer: LedgerProducer,
    seen: list[bytes],
    failovers: list[float],
    measure: str = "fault to next acknowledged write",
) -> tuple[set[bytes], int]:
    """One row of the fault table (printed); the acknowledged records lost, and the duplicates.
    `failovers`: per round, the time `measure` names."""
    wanted = set(producer.acked)
    lost = wanted - set(seen)
    duplicates = len(seen) - len(set(seen))
    times = f"median {statistics.median(failovers):.1f} s, max {max(failovers):.1f} s" if failovers else "-"
    print(f"fault table | {kind} | rounds {rounds} | acknowledged {len(wanted)} | lost {len(lost)} | "
          f"duplicates {duplicates} | failed sends {producer.failed} | {measure}: {times}")  # fmt: skip
    return lost, duplicates


def first_ack_after(producer: LedgerProducer, t: float, timeout: float = 60) -> float:
    """Seconds from `t` to the first write acknowledged after it (waits for one)."""
    wait_until(
        lambda: any(a > t for a in list(producer.acked.values())), "an acknowledged write", timeout=timeout
    )
    return min(a for a in list(producer.acked.values()) if a > t) - t


def longest_pause(producer: LedgerProducer, start: float, end: float) -> float:
    """The longest time without an acknowledged write between `start` and `end` (the outage a
    fault caused, where writes went on for a while after it, as when only the controller is cut)."""
    times = sorted([start, *(a for a in list(producer.acked.values()) if start < a < end), end])
    return max(b - a for a, b in itertools.pairwise(times))


def test_a_zombie_leader_acknowledges_nothing_that_vanishes(cluster: Cluster) -> None:
    """SIGSTOP of the leader past the session timeout: the controller elects another; after
    SIGCONT the old leader, still believing it leads until its image catches up, must not
    acknowledge an acks=all write (no follower fetches from it), and rejoins as a follower."""
    cluster.create_topic("zombie", 1, 3, {"min.insync.replicas": "2"})
    leader, epoch, _replicas, _isr = cluster.partitions("zombie")[0]
    other = next(i for i in BROKER_IDS if i != leader)
    producer = LedgerProducer(cluster.bootstrap, "zombie")
    producer.start()
    zombie = cluster.brokers[leader]
    assert zombie.process is not None
    try:
        time.sleep(1.0)
        zombie.process.send_signal(signal.SIGSTOP)
        try:
            wait_until(
                lambda: (p := cluster.partitions("zombie", other)[0])[0] != leader and p[1] > epoch,
                "a new leader while the old one is stopped",
                timeout=60,
            )
            time.sleep(1.0)
            # Queued while stopped: answered once it runs again, before or after its image catches up.
            client = WireClient(HOST, zombie.port, timeout=30)
            body = produce_body("zombie", b"to-the-zombie", acks=-1)
            body["timeout_ms"] = 3000
            client.sock.sendall(encode_request(0, 9, 1, body, "zombie-test"))
        finally:
            zombie.process.send_signal(signal.SIGCONT)
        _, answer = decode_response(0, 9, read_frame(client.sock))
        client.close()
        p = answer.responses[0].partition_responses[0]
        assert p.error_code != 0, "the zombie acknowledged an acks=all write"
        wait_until(
            lambda: sorted(cluster.partitions("zombie", other)[0][3]) == list(BROKER_IDS),
            "the old leader back in the ISR",
            timeout=90,
        )
    finally:
        producer.stopping.set()
        producer.join(150)
    seen = read_all(cluster, "zombie", set(producer.acked))
    lost = set(producer.acked) - set(seen)
    print(
        f"zombie: acknowledged {len(producer.acked)}, lost {len(lost)}, the zombie answered error {p.error_code}"
    )
    assert not lost, f"{len(lost)} acknowledged records lost"
    assert b"to-the-zombie" not in seen


def test_kill_the_leader_round_after_round(cluster: Cluster) -> None:
    pytest.importorskip("confluent_kafka")
    rng = random.Random(SEED)
    cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    cluster.partitions(TOPIC)
    producer = LedgerProducer(cluster.bootstrap)
    producer.start()
    failovers: list[float] = []
    try:
        for _ in range(ROUNDS):
            time.sleep(rng.uniform(0.5, 3.0))
            leader, epoch, _replicas, _isr = cluster.partitions(TOPIC)[0]
            cluster.brokers[leader].kill()
            killed_at = time.monotonic()
            wait_until(
                lambda leader=leader, epoch=epoch: (
                    (p := cluster.partitions(TOPIC)[0])[0] != leader and p[1] > epoch
                ),
                "a new leader",
                timeout=60,
            )
            failovers.append(first_ack_after(producer, killed_at))
            cluster.start(leader)
            wait_until(
                lambda: sorted(cluster.partitions(TOPIC)[0][3]) == list(BROKER_IDS),
                "the ISR whole again",
                timeout=90,
            )
    finally:
        producer.stopping.set()
        producer.join(150)

    seen = read_all(cluster, TOPIC, set(producer.acked))
    lost, duplicates = fault_report(f"kill -9 of the leader (seed {SEED})", ROUNDS, producer, seen, failovers)
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
    assert duplicates == 0, f"{duplicates} records written twice"
