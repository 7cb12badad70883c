"""Cluster mode, transactions end to end: three kcompat brokers under one Kafka 4.3.1 controller
(transaction.version=2 finalized, as in every cluster test), RF=3 topics with
min.insync.replicas=2. The transaction coordinator (the leader of the id's `__transaction_state`
partition, found with FindCoordinator key type 1) is on a different broker than the partitions the
producer writes to, so its COMMIT/ABORT markers travel as WriteTxnMarkers to the partitions'
leaders, and each leader checks a transactional batch at the coordinator's broker
(AddPartitionsToTxn v5: VerifyOnly for transactions v1, an add for v2). Offsets sent to the
transaction go to a group whose coordinator is again another broker; its pending offsets become
visible only with the COMMIT marker on `__consumer_offsets`.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support import ROOT, java_classpath, java_executable

from compat_tests.client_data import unique
from compat_tests.cluster.test_group_coordinator import Cluster
from compat_tests.crash.wire_client import WireClient
from compat_tests.groups_members import JVM, KAFKA_JARS, compile_java
from compat_tests.test_streams_eos import MILLIS_PER_WORD, Updates, WordCountApp, input_lines
from kcompat.testing import wait_until
from kcompat.testing_cluster import HOST, ControllerQuorum
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.add_partitions_to_txn import ADD_PARTITIONS_TO_TXN
from kcompat.wire.messages.api_versions import API_VERSIONS
from kcompat.wire.messages.elect_leaders import ELECT_LEADERS
from kcompat.wire.messages.end_txn import END_TXN
from kcompat.wire.messages.find_coordinator import FIND_COORDINATOR
from kcompat.wire.messages.init_producer_id import INIT_PRODUCER_ID
from kcompat.wire.messages.list_offsets import LIST_OFFSETS
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.records import Record, build_batch

pytestmark = pytest.mark.timeout(180)

BROKER_IDS = (1, 2, 3)
STATE_PARTITIONS = 3  # __transaction_state and __consumer_offsets: one partition led by each broker
PER_ROUND = 4


class TxnCluster(Cluster):
    SETTINGS: ClassVar[dict[str, str]] = {
        **Cluster.SETTINGS,
        "offsets.topic.num.partitions": str(STATE_PARTITIONS),
        "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        # What a killed broker left open is aborted promptly once its successor loads it.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    }

    def find(self, key_type: int, keys: list[str]) -> dict[str, int]:
        """FindCoordinator v4 through each live broker in turn: key -> node, once all are known."""

        def got() -> dict[str, int] | None:
            for b in self.live():
                r = self.call(b, FIND_COORDINATOR.key, 4, {"key_type": key_type, "coordinator_keys": keys})
                cs = r.coordinators  # type: ignore[attr-defined]
                if all(c.error_code == 0 and c.node_id in self.live_ids() for c in cs):
                    return {c.key: int(c.node_id) for c in cs}
            return None

        return wait_until(got, f"coordinators of {keys}", timeout=40)  # type: ignore[return-value]

    def key_on(self, key_type: int, prefix: str, node: int) -> str:
        """A fresh key (transactional id or group) whose coordinator is broker `node`. A broker
        restarted by an earlier test leads no coordinator partition until a preferred election
        (Kafka's controller runs one only every leader.imbalance.check.interval.seconds): run one."""
        keys = [f"{prefix}-{i}" for i in range(12)]

        def on() -> str | None:
            return next((k for k, n in self.find(key_type, keys).items() if n == node), None)

        if (key := on()) is not None:
            return key
        topic = "__consumer_offsets" if key_type == 0 else "__transaction_state"
        client = WireClient(HOST, self.quorum.controllers[0].port)
        try:
            client.call(ELECT_LEADERS.key, 2, {"election_type": 0, "timeout_ms": 10000, "topic_partitions": [
                {"topic": topic, "partitions": list(range(STATE_PARTITIONS))}]})  # fmt: skip
        finally:
            client.close()
        return wait_until(on, f"one of {keys} coordinated by broker {node}", timeout=40)  # type: ignore[return-value]

    def topic_led_by(self, prefix: str, leaders: list[int]) -> str:
        """RF=3, min.insync.replicas=2, partition p led by leaders[p] (preferred replica first)."""
        topic = unique(prefix)
        placed = [[lead, *(i for i in BROKER_IDS if i != lead)] for lead in leaders]
        self.create_topic(topic, len(leaders), 3, {"min.insync.replicas": "2"}, assignments=placed)
        assert self.leaders(topic, len(leaders)) == dict(enumerate(leaders))
        return topic


@pytest.fixture(scope="module")
def cluster(kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TxnCluster]:
    c = TxnCluster(kraft_quorum, tmp_path_factory.mktemp("txn"))
    with c.running(BROKER_IDS):
        yield c


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, expect: int
) -> dict[int, list[bytes]]:
    """Every value of each partition visible under `isolation`, read until `expect` values arrived
    and the consumer sits at each partition's end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False,
                  "isolation.level": isolation})  # fmt: skip
    tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
    c.assign(tps)
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}

    def caught_up() -> bool:
        for m in c.consume(100, 0.5):
            assert not m.error(), m.error()
            out[m.partition()].append(m.value())
        return sum(map(len, out.values())) >= expect

    try:
        wait_until(caught_up, f"{expect} {isolation} values of {topic}", timeout=40)
        for m in c.consume(100, 1.0):  # anything past what was expected shows here
            out[m.partition()].append(m.value())
    finally:
        c.close()
    return out


def test_transaction_version_comes_from_the_image(cluster: TxnCluster) -> None:
    for b in cluster.live():
        r = cluster.call(
            b, API_VERSIONS.key, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        finalized = {f.name: f.max_version_level for f in r.finalized_features}  # type: ignore[attr-defined]
        assert finalized.get("transaction.version") == 2, finalized


def test_confluent_commit_abort_and_offsets_across_brokers(cluster: TxnCluster) -> None:
    coordinator = 1
    txn_id = cluster.key_on(1, unique("ctx"), coordinator)
    topic = cluster.topic_led_by("ctx", leaders=[2, 3])  # neither partition led by the coordinator
    group = cluster.key_on(0, unique("ctx-group"), 3)  # the group's coordinator: another broker again
    assert cluster.find(1, [txn_id]) == {txn_id: coordinator}
    bs = cluster.bootstrap

    producer = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "transaction.timeout.ms": 30000,
                         "acks": "all"})  # fmt: skip
    producer.init_transactions(30)
    expected: dict[int, list[bytes]] = {0: [], 1: []}
    everything = 0
    for kind in ("c", "a", "d", "o"):
        producer.begin_transaction()
        for p in (0, 1):
            for i in range(PER_ROUND):
                producer.produce(topic, value=b"%s%d-%d" % (kind.encode(), p, i), partition=p)
        everything += 2 * PER_ROUND
        if kind == "o":  # offsets to a group coordinated elsewhere, in the same transaction
            meta = Consumer({"bootstrap.servers": bs, "group.id": group})
            producer.send_offsets_to_transaction([TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 5)],
                                                 meta.consumer_group_metadata(), 30)  # fmt: skip
            meta.close()
        if kind == "a":
            producer.flush(30)  # the aborted records reach the logs (librdkafka purges queued ones)
            producer.abort_transaction(30)
            continue
        producer.commit_transaction(30)
        for p in (0, 1):
            expected[p] += [b"%s%d-%d" % (kind.encode(), p, i) for i in range(PER_ROUND)]
    producer.flush(10)

    committed = read_all(bs, topic, 2, "read_committed", sum(map(len, expected.values())))
    assert committed == expected  # exactly the committed records, in order, nothing aborted
    uncommitted = read_all(bs, topic, 2, "read_uncommitted", everything)
    assert sum(map(len, uncommitted.values())) == everything  # the aborted round is there, only hidden
    assert cluster.committed(3, group, topic, 2) == {0: 3, 1: 5}


def test_kafka_python_commit_abort_and_offsets_across_brokers(cluster: TxnCluster) -> None:
    kafka = pytest.importorskip("kafka")
    txn_id = cluster.key_on(1, unique("kp"), 2)
    topic = cluster.topic_led_by("kp", leaders=[3, 1])  # the coordinator leads neither
    group = cluster.key_on(0, unique("kp-group"), 1)
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id=txn_id, acks="all")
    producer.init_transactions()
    producer.begin_transaction()
    for p in (0, 1):
        producer.send(topic, b"aborted%d" % p, partition=p)
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    for p in (0, 1):
        producer.send(topic, b"kept%d" % p, partition=p)
    offsets = {kafka.TopicPartition(topic, 1): kafka.OffsetAndMetadata(9, "", -1)}
    producer.send_offsets_to_transaction(offsets, group)  # a bare group id: no member, no generation
    producer.commit_transaction()
    producer.close()
    assert read_all(cluster.bootstrap, topic, 2, "read_committed", 2) == {0: [b"kept0"], 1: [b"kept1"]}
    assert cluster.committed(1, group, topic, 2)[1] == 9


def test_java_43_transactions_v2(cluster: TxnCluster, tmp_path: Path) -> None:
    # Transactions.java uses the ids "java-txn" and "java-fence" and writes partition 0: led here by
    # a broker that coordinates neither.
    coordinators = cluster.find(1, ["java-txn", "java-fence"])
    leader = min(BROKER_IDS, key=lambda i: (i == coordinators["java-txn"], i in coordinators.values()))
    assert leader != coordinators["java-txn"]
    topic = cluster.topic_led_by("jtx", leaders=[leader])
    classes = compile_java(
        tmp_path / "classes", KAFKA_JARS, ROOT / "compat_tests" / "java" / "Transactions.java"
    )
    cp = f"{classes}:{java_classpath(KAFKA_JARS)}"
    proc = subprocess.run([java_executable(), *JVM, "-cp", cp, "Transactions", cluster.bootstrap, topic],
                          capture_output=True, text=True, timeout=150)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = {
        k: v for line in proc.stdout.splitlines() if line.startswith("{") for k, v in json.loads(line).items()
    }
    committed = [f"c{i}" for i in range(5)] + [f"d{i}" for i in range(5)]
    assert got["committed"] == committed
    assert got["uncommitted"] == [f"{p}{i}" for p in "cad" for i in range(5)]
    assert got["epoch"] == 4  # transactions v2: EndTxn v5 bumped the epoch at each of the 4 ends
    assert got["group_offset"] == 7
    assert got["fenced"] == "ProducerFencedException"
    assert got["after_fence"] == [*committed, "second"]


def test_a_leader_verifies_at_the_remote_coordinator_with_kafkas_codes(cluster: TxnCluster) -> None:
    """Raw Produce of transactional batches to a leader whose transaction coordinator is another
    broker: refused with the codes Kafka's leader gives (by Produce version) until the partition is
    in the transaction, nothing appended; then accepted."""
    txn_id = cluster.key_on(1, unique("verify"), 1)
    topic = cluster.topic_led_by("verify", leaders=[2])
    coordinator, leader = cluster.brokers[1], cluster.brokers[2]

    def init() -> Any:
        r = cluster.call(coordinator, INIT_PRODUCER_ID.key, 4, {"transactional_id": txn_id, "transaction_timeout_ms": 30000,
                                                                "producer_id": -1, "producer_epoch": -1})  # fmt: skip
        return r if r.error_code == 0 else None  # type: ignore[attr-defined]

    r = wait_until(init, "InitProducerId at the coordinator", timeout=40)
    pid, epoch = r.producer_id, r.producer_epoch  # type: ignore[attr-defined]

    def produce(version: int, producer_id: int = pid) -> int:
        records = build_batch([Record(0, 1_700_000_000_000, None, b"v")], producer_id=producer_id,
                              producer_epoch=epoch, base_sequence=0, transactional=True)  # fmt: skip
        r = cluster.call(leader, PRODUCE.key, version, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 10000,
                         "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})  # fmt: skip
        return int(r.responses[0].partition_responses[0].error_code)  # type: ignore[attr-defined]

    assert produce(10) == E.INVALID_TXN_STATE  # not in the transaction: what pre-KIP-890 clients know
    assert produce(11) == E.TRANSACTION_ABORTABLE  # v11+ clients know the abortable error
    assert produce(10, producer_id=pid + 1000) == E.INVALID_PRODUCER_ID_MAPPING
    ends = cluster.call(leader, LIST_OFFSETS.key, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})  # fmt: skip
    assert ends.topics[0].partitions[0].offset == 0  # type: ignore[attr-defined]  # nothing appended
    add = cluster.call(coordinator, ADD_PARTITIONS_TO_TXN.key, 3, {"v3_and_below_transactional_id": txn_id,
                       "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
                       "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})  # fmt: skip
    assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0  # type: ignore[attr-defined]
    assert produce(10) == E.NONE
    end = cluster.call(coordinator, END_TXN.key, 3, {"transactional_id": txn_id, "producer_id": pid,
                                                     "producer_epoch": epoch, "committed": False})  # fmt: skip
    assert end.error_code == 0  # type: ignore[attr-defined]


def consume_transform_produce(cluster: TxnCluster, txns: int, per_txn: int = 2) -> None:
    """A transactional consume-transform-produce loop as applications write it (librdkafka,
    read_committed input, offsets sent to the transaction, the next transaction begun and produced
    at once after each commit), with the transaction coordinator, the group coordinator and the
    partition leaders on different brokers: every commit's markers are WriteTxnMarkers to other
    brokers while the next transaction's first batch is verified at the coordinator's broker.
    The output holds each input record exactly once, in order; the group's offsets are at the end."""
    txn_id = cluster.key_on(1, unique("ctp"), 1)
    source = cluster.topic_led_by("ctp-in", leaders=[2])
    sink = cluster.topic_led_by("ctp-out", leaders=[3])
    group = cluster.key_on(0, unique("ctp-group"), 2)
    bs = cluster.bootstrap
    n = txns * per_txn
    feed = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5})
    for i in range(n):
        feed.produce(source, value=b"%d" % i, partition=0)
    assert feed.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})  # fmt: skip
    producer = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "transaction.timeout.ms": 30000,
                         "acks": "all", "linger.ms": 0})  # fmt: skip
    consumer.subscribe([source])
    producer.init_transactions(30)
    done = commits = 0
    try:
        while done < n:
            batch = [m for m in consumer.consume(per_txn, 5.0) if not m.error()]
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                producer.produce(sink, value=b"out-" + m.value(), partition=0)
            last = batch[-1].offset()
            producer.send_offsets_to_transaction([TopicPartition(source, 0, last + 1)],
                                                 consumer.consumer_group_metadata(), 30)  # fmt: skip
            producer.commit_transaction(30)  # a KafkaException (fatal INVALID_TXN_STATE) fails the test
            done += len(batch)
            commits += 1
    finally:
        consumer.close()
    assert commits >= txns // 2, commits
    got = read_all(bs, sink, 1, "read_committed", n)
    assert got == {0: [b"out-%d" % i for i in range(n)]}
    wait_until(
        lambda: cluster.committed(2, group, source, 1) == {0: n}, "the group's offsets at the end", timeout=20
    )


def test_consume_transform_produce_across_brokers(cluster: TxnCluster) -> None:
    consume_transform_produce(cluster, 150)


@pytest.mark.slow  # ~45 s with the JVM on a shared 2-core machine
def test_java_43_consume_transform_produce_across_brokers(cluster: TxnCluster, tmp_path: Path) -> None:
    """TxnLoop.java: the same loop with the Java 4.3.1 client, transactions v2 (an epoch bump at
    every commit, each partition added by its leader at the coordinator's broker while the last
    commit's markers may still be on their way); output partitions led by each broker, the
    coordinator's included."""
    txn_id = cluster.key_on(1, unique("jctp"), 1)
    source = cluster.topic_led_by("jctp-in", leaders=[2])
    sink = cluster.topic_led_by("jctp-out", leaders=[3, 1, 2])
    group = cluster.key_on(0, unique("jctp-group"), 3)
    n = 600
    feed = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        feed.produce(source, value=b"%d" % i, partition=0)
    assert feed.flush(30) == 0
    classes = compile_java(tmp_path / "classes", KAFKA_JARS, ROOT / "compat_tests" / "java" / "TxnLoop.java")
    cp = f"{classes}:{java_classpath(KAFKA_JARS)}"
    proc = subprocess.run([java_executable(), *JVM, "-cp", cp, "TxnLoop", cluster.bootstrap, source, sink, group,
                           txn_id, str(n), "3"], capture_output=True, text=True, timeout=170)  # fmt: skip
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines and "error" not in lines[-1], (
        proc.stdout[-3000:] + proc.stderr[-3000:]
    )
    assert lines[-1]["records"] == n and lines[-1]["commits"] >= n // 3, lines[-1]
    got = read_all(cluster.bootstrap, sink, 3, "read_committed", n)
    assert got == {p: [b"out-%d" % i for i in range(p, n, 3)] for p in range(3)}


@pytest.mark.slow
def test_consume_transform_produce_across_brokers_long(cluster: TxnCluster) -> None:
    consume_transform_produce(cluster, 500)


@pytest.mark.slow
def test_streams_exactly_once_v2_survives_kill9_of_a_broker(cluster: TxnCluster, tmp_path: Path) -> None:
    """test_streams_eos.py's word count (Kafka Streams 4.3.1, exactly_once_v2) on the 3-broker
    cluster, all topics RF=3: the Streams group's coordinator broker is killed (kill -9) and
    restarted mid-stream; the read_committed output holds every word's running counts exactly once."""
    lines_topic = cluster.topic_led_by("lines", leaders=[2, 3])
    counts_topic = cluster.topic_led_by("counts", leaders=[3, 1])
    app_id = unique("wc-eos")
    bs = cluster.bootstrap
    lines = input_lines()
    expected = Counter(w for line in lines for w in line.split())
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 5, "acks": "all"})
    for i, line in enumerate(lines):
        producer.produce(lines_topic, key=b"%d" % i, value=line.encode())
    assert producer.flush(30) == 0
    victim = cluster.find(0, [app_id])[app_id]

    state = str(tmp_path / "streams-state")
    app = WordCountApp(tmp_path, [bs, app_id, lines_topic, counts_topic, state, str(MILLIS_PER_WORD), "3"])
    updates = Updates(bs, counts_topic, 2)
    total = sum(expected.values())
    try:
        updates.wait("a quarter of the output", lambda: updates.total >= total // 4, 90)
        with updates.lock:
            at_kill = updates.total
        cluster.brokers[victim].restart(clean=False)
        updates.wait("the final counts",
                     lambda: all(updates.by_word.get(w, [0])[-1] >= n for w, n in expected.items()), 120)  # fmt: skip
    finally:
        updates.close()
        app.stop()
    assert at_kill < total * 0.9, f"the kill came as Streams was finishing ({at_kill} of {total})"
    for word, n in expected.items():
        assert updates.by_word[word] == list(range(1, n + 1)), (
            word,
            updates.by_word[word][:50],
            app.out[-20:],
        )
    assert set(updates.by_word) == set(expected)


@pytest.mark.slow
def test_markers_reach_the_next_leader_after_kill9_of_a_partition_leader(cluster: TxnCluster) -> None:
    """The leader of one of the transaction's partitions is killed before the commit. The commit's
    PrepareCommit is replicated once the controller fences that broker (its __transaction_state
    replica leaves the ISR), and the markers go to the leader the image names then; the next
    transaction waits until they are all written. (The retry of a refused marker itself is pinned
    in tests/server/test_txn_channels.py.)"""
    txn_id = cluster.key_on(1, unique("mk"), 1)
    topic = cluster.topic_led_by("mk", leaders=[2, 3])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 60000, "acks": "all"})  # fmt: skip
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in (0, 1):
        producer.produce(topic, value=b"first%d" % p, partition=p)
    assert producer.flush(30) == 0  # acks=all: on the followers too
    victim = cluster.brokers[3]
    victim.kill()
    try:
        producer.commit_transaction(60)
        producer.begin_transaction()  # CONCURRENT_TRANSACTIONS until the markers are all written
        for p in (0, 1):
            producer.produce(topic, value=b"second%d" % p, partition=p)
        producer.commit_transaction(90)
        got = read_all(",".join(b.bootstrap for b in cluster.live()), topic, 2, "read_committed", 4)
        assert got == {p: [b"first%d" % p, b"second%d" % p] for p in (0, 1)}
    finally:
        runs = victim.logs().count("RECOVERY -> RUNNING")
        victim.start()
        wait_until(
            lambda: victim.logs().count("RECOVERY -> RUNNING") > runs,
            "the restarted broker unfenced",
            timeout=40,
        )


@pytest.mark.slow
def test_a_broker_back_from_kill9_acts_only_once_registered(cluster: TxnCluster) -> None:
    """A broker killed -9 and started at once is refused registration (DUPLICATE_BROKER_REGISTRATION)
    until the controller expires its previous session and moves its leaderships away. Meanwhile the
    image it reads still names it leader: it must not act on that (lead partitions, load
    coordinators that complete transactions from a tail no other replica has, as one did in the
    Streams kill -9 test, committing output whose offsets commit stayed in its own log), only
    once this incarnation's registration is in the image, as Kafka's broker waits for its
    initial catch-up."""
    victim = cluster.brokers[2]
    cluster.topic_led_by("limbo", leaders=[2])  # so the stale image names it leader of something
    seen = len(victim.logs())
    runs = victim.logs().count("RECOVERY -> RUNNING")
    victim.restart(clean=False)
    wait_until(lambda: victim.logs().count("RECOVERY -> RUNNING") > runs, "the restarted broker unfenced",
               timeout=60)  # fmt: skip
    text = victim.logs()[seen:]
    refused, registered = text.find("registration refused"), text.find("registered with broker epoch")
    assert 0 <= refused < registered, text[-3000:]  # the premise: the old session outlived the kill
    acted = [m.start() for m in re.finditer(r": leader at epoch|coordinator for \S+ loaded", text)]
    early = [text[i : i + 120] for i in acted if i < registered]
    assert not early, early


@pytest.mark.slow  # ~14 s on a shared 2-core machine: past the default layer's budget
def test_kill9_of_the_coordinator_mid_transaction(cluster: TxnCluster) -> None:
    """Last in the module: it kills a broker of the shared cluster. The open transaction's
    coordinator dies after its records reached the partitions' leaders; the next leader of the
    id's __transaction_state partition loads it Ongoing, and a new producer with the same id
    aborts it (InitProducerId) and commits its own: nothing committed lost, nothing aborted seen."""
    coordinator = 1
    txn_id = cluster.key_on(1, unique("kill"), coordinator)
    topic = cluster.topic_led_by("kill", leaders=[2, 3])
    bs = cluster.bootstrap
    first = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "transaction.timeout.ms": 60000})
    first.init_transactions(30)
    first.begin_transaction()
    for p in (0, 1):
        first.produce(topic, value=b"kept%d" % p, partition=p)
    first.commit_transaction(30)
    first.begin_transaction()
    for p in (0, 1):
        first.produce(topic, value=b"open%d" % p, partition=p)
    first.flush(30)  # in the logs, its transaction open at the coordinator

    cluster.brokers[coordinator].kill()
    successor = cluster.find(1, [txn_id])[txn_id]
    assert successor != coordinator
    second = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                       "transaction.timeout.ms": 60000})  # fmt: skip
    second.init_transactions(60)  # the new coordinator aborts the open transaction first
    second.begin_transaction()
    for p in (0, 1):
        second.produce(topic, value=b"after%d" % p, partition=p)
    second.commit_transaction(60)
    got = read_all(cluster.bootstrap, topic, 2, "read_committed", 4)
    assert got == {p: [b"kept%d" % p, b"after%d" % p] for p in (0, 1)}
    everything = read_all(cluster.bootstrap, topic, 2, "read_uncommitted", 6)
    assert everything == {p: [b"kept%d" % p, b"open%d" % p, b"after%d" % p] for p in (0, 1)}
