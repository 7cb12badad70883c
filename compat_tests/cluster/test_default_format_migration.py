"""A kcompat broker joins a Kafka 4.3.1 cluster formatted with Kafka's defaults, and takes it over.

Three Apache Kafka 4.3.1 controllers formatted by `kafka-storage format` with NO --feature flag
(so every feature a default 4.3 cluster finalizes: group, transaction v2, share, ELR, streams), two
Java brokers serving everything: an idempotent acks=all producer (a ledger of acknowledged
records) on an RF=2 topic, a committing consumer group, a share group and a Kafka Streams app on
the streams protocol (exactly_once_v2), all started against the Java brokers only, so that every
internal topic (__consumer_offsets, __share_group_state, __transaction_state, the Streams
repartition and changelog topics) is made on them. Then two kcompat brokers register,
`kafka-reassign-partitions` moves every replica of every topic onto them (`--verify` done) and the
Java brokers stop, while the clients keep working.

Proven: nothing acknowledged lost and nothing twice, in order; the group's committed offset kept;
the share group's acknowledged records never delivered again; the Streams output exactly each
word's running counts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient
from support import ROOT, ReportFigure, cluster_broker, kafka_tool

from compat_tests.cluster.test_group_coordinator import Cluster as GroupCluster
from compat_tests.cluster.test_replication import JavaBroker
from compat_tests.crash.wire_client import WireClient
from compat_tests.groups_members import compile_java
from compat_tests.test_streams_groups import (
    PARTITIONS,
    STREAMS_JARS,
    App,
    Output,
    expected_output,
    labels,
    produce_lines,
)
from kcompat.testing import wait_until
from kcompat.testing_cluster import HOST, ControllerQuorum
from kcompat.wire.messages.create_topics import CREATE_TOPICS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

JAVA, KCOMPAT = (4, 5), (1, 2)
LEDGER, SHARED, APP = "ledger", "shared", "migrating"
WARM = b"warm-up"

SETTINGS = {  # the same on every broker, Java and kcompat: small, RF 2 internal topics
    "offsets.topic.replication.factor": "2",
    "offsets.topic.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "2",
    "share.coordinator.state.topic.num.partitions": "2",
    "share.coordinator.state.topic.min.isr": "1",
    "transaction.state.log.replication.factor": "2",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "2",
    "group.initial.rebalance.delay.ms": "0",
}


class Cluster(GroupCluster):
    SETTINGS: ClassVar[dict[str, str]] = {**GroupCluster.SETTINGS, **SETTINGS}
    java: dict[int, JavaBroker]

    def place(self, name: str, configs: dict[str, str], assignments: list[list[int]]) -> None:
        """CreateTopics through a Java broker, which forwards it to the active controller (of three,
        it moves), replicas as given."""
        placed = [{"partition_index": p, "broker_ids": ids} for p, ids in enumerate(assignments)]
        client = WireClient(HOST, self.java[JAVA[0]].port)
        try:
            response = client.call(CREATE_TOPICS.key, 7, {
                "topics": [{"name": name, "num_partitions": -1, "replication_factor": -1, "assignments": placed,
                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout_ms": 10000, "validate_only": False,
            })  # fmt: skip
        finally:
            client.close()
        assert response.topics[0].error_code == 0, response.topics[0]

    @property
    def everyone(self) -> str:
        live = [f"{HOST}:{j.port}" for j in self.java.values() if j.process and j.process.poll() is None]
        return ",".join([*live, *(b.bootstrap for b in self.live())])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    why_not = ControllerQuorum.available()
    if why_not is not None:
        pytest.fail(why_not, pytrace=False)
    root = tmp_path_factory.mktemp("default-format")
    with ControllerQuorum(root / "quorum", voters=3, features={}) as quorum:  # no --feature at all
        c = Cluster(quorum, root)
        c.java = {}
        try:
            for node_id in JAVA:
                c.java[node_id] = JavaBroker(quorum, root, node_id)
                c.java[node_id].extra = dict(SETTINGS)
                c.java[node_id].start()
            yield c
        finally:
            for j in c.java.values():
                j.stop()
            for b in c.brokers.values():
                if b.running:
                    b.stop()


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_java(
        tmp_path_factory.mktemp("streams-classes"),
        STREAMS_JARS,
        ROOT / "compat_tests" / "java" / "StreamsGroupApp.java",
    )


def registered(bootstrap: str) -> set[int]:
    return {
        b.id for b in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers.values()
    }


def partitions(bootstrap: str) -> dict[tuple[str, int], tuple[int, list[int]]]:
    """(topic, partition) -> (leader, replicas) of every topic, internal ones too."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {
        (t, p.id): (p.leader, list(p.replicas)) for t, tm in md.topics.items() for p in tm.partitions.values()
    }


class Ledger:
    """An idempotent acks=all producer writing `seq-N` without pause; `acked`: what it was told."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 2, "message.timeout.ms": 120000})  # fmt: skip
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, err: Any, msg: Any) -> None:
        (self.acked.append(msg.value()) if err is None else self.failed.append(str(err)))

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            self.producer.produce(LEDGER, f"seq-{n}".encode(), on_delivery=self._delivered)
            n += 1
            self.producer.poll(0.004)
        self.producer.flush(120)

    def more(self, n: int) -> None:
        target = len(self.acked) + n
        wait_until(lambda: len(self.acked) >= target, f"{n} more records acknowledged", timeout=90)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(150)


class GroupMember:
    """A confluent consumer of the ledger topic in group `mig-group`, committing every 50 records
    (synchronously); `committed`: the last offset a commit was acknowledged for."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mig-group", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 30000})  # fmt: skip
        self.consumer.subscribe([LEDGER])
        self.committed = -1
        self.commits = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        last = -1
        while not self.stop.is_set():
            m = self.consumer.poll(0.2)
            if m is not None and m.error() is None:
                last = m.offset()
            if last + 1 - max(self.committed, 0) >= 50:
                try:
                    self.consumer.commit(offsets=[TopicPartition(LEDGER, 0, last + 1)], asynchronous=False)
                except KafkaException:
                    continue  # the coordinator moving: the next one is tried again
                self.committed, self.commits = last + 1, self.commits + 1

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


def share_values(c: ShareConsumer, want: set[bytes], got: list[bytes], timeout: float) -> None:
    """Poll until every value of `want` is in `got` (warm-ups left out); then acknowledge them."""
    deadline = time.monotonic() + timeout
    while not want <= set(got):
        assert time.monotonic() < deadline, f"{len(want - set(got))} of {len(want)} never delivered"
        got += [m.value() for m in c.poll(0.5) if m.error() is None and m.value() != WARM]
    c.commit_sync(10)


def test_kcompat_brokers_take_over_a_default_formatted_kafka_cluster(
    cluster: Cluster, classes: Path, tmp_path: Path, report_figure: ReportFigure
) -> None:
    java_bs = cluster.everyone
    wait_until(lambda: registered(java_bs) == set(JAVA), "both Java brokers unfenced", timeout=90)
    # The kcompat brokers' addresses now (they start later) for the Streams app's bootstrap list, as
    # an operator adding brokers would list them: under exactly_once_v2 Streams makes a new producer
    # after an error, and one bootstrapping from the stopped Java brokers alone finds nobody.
    for node_id in KCOMPAT:
        cluster.brokers[node_id] = cluster_broker(cluster.quorum, cluster.root, node_id, **cluster.SETTINGS)
    app_bs = ",".join([java_bs, *(cluster.brokers[n].bootstrap for n in KCOMPAT)])
    cluster.place(LEDGER, {"min.insync.replicas": "2"}, [[4, 5]])
    cluster.place(SHARED, {}, [[4, 5], [5, 4]])
    streams_topics = (f"{APP}-lines", f"{APP}-labels", f"{APP}-out")
    for name in streams_topics:
        cluster.place(name, {}, [[4, 5], [5, 4]] * (PARTITIONS // 2))
    started = time.monotonic()

    # Everything running against the Java brokers alone: every internal topic made on them.
    ledger = Ledger(java_bs)
    member = GroupMember(java_bs)
    share = ShareConsumer(
        {"bootstrap.servers": java_bs, "group.id": "mig-share", "share.acknowledgement.mode": "implicit"}
    )
    share.subscribe([SHARED])
    labels(java_bs, streams_topics[1])
    counts = produce_lines(java_bs, streams_topics[0], 200, seed=11)
    output = Output(java_bs, streams_topics[2])
    app = App(classes, [app_bs, APP, *streams_topics, str(tmp_path / "state"), "0", "2"])
    producer = Producer({"bootstrap.servers": java_bs, "acks": "all"})
    try:
        # Share groups start at `latest`: until each share-partition is initialized.
        seen: set[int] = set()
        deadline = time.monotonic() + 90
        while seen != {0, 1}:
            assert time.monotonic() < deadline, "the share group never fetched"
            for p in {0, 1} - seen:
                producer.produce(SHARED, WARM, partition=p)
            producer.flush(10)
            seen |= {m.partition() for m in share.poll(0.5) if m.error() is None}
        first = {f"s{i}".encode() for i in range(100)}
        for v in sorted(first):
            producer.produce(SHARED, v)
        assert producer.flush(30) == 0
        before_move: list[bytes] = []
        share_values(share, first, before_move, 60)

        app.wait_running(120)
        output.wait("the output on the Java brokers", expected_output(counts), 120)
        # Streams purges what it consumed of its repartition topic (DeleteRecords, every 30 s);
        # done here at once, so the kcompat followers always start below the Java leaders' log
        # start (a Kafka leader's OFFSET_OUT_OF_RANGE does not say where that is).
        repartition = f"{APP}-words-repartition"
        purger = AdminClient({"bootstrap.servers": java_bs})  # kept: its futures need it alive
        purge = purger.delete_records([TopicPartition(repartition, p, OFFSET_END) for p in range(PARTITIONS)])
        assert all(f.result(30).low_watermark > 0 for f in purge.values())
        ledger.more(200)
        wait_until(lambda: member.commits >= 2, "the group committing", timeout=60)
        placed = partitions(java_bs)
        internal = {t for t, _p in placed if t.startswith(("__", f"{APP}-"))} - set(streams_topics)
        assert {"__consumer_offsets", "__share_group_state", "__transaction_state",
                f"{APP}-words-repartition", f"{APP}-counts-changelog"} <= internal, sorted(internal)  # fmt: skip
        assert all(set(r) <= set(JAVA) for _l, r in placed.values()), placed

        # kcompat joins the default-formatted cluster and takes every replica over.
        for node_id in KCOMPAT:
            cluster.start(node_id, wait=False)
        for node_id in KCOMPAT:
            cluster.brokers[node_id].wait_ready()
        wait_until(
            lambda: registered(java_bs) == {*JAVA, *KCOMPAT}, "the kcompat brokers unfenced", timeout=90
        )
        moving = time.monotonic()
        plan = tmp_path / "move.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": list(KCOMPAT) if p % 2 == 0 else list(reversed(KCOMPAT))}
            for t, p in sorted(placed)]}))  # fmt: skip
        out = kafka_tool("kafka-reassign-partitions", "--bootstrap-server", java_bs,
                         "--reassignment-json-file", str(plan), "--execute").stdout  # fmt: skip
        assert "Successfully started partition reassignment" in out, out
        counts += produce_lines(java_bs, streams_topics[0], 200, seed=12)
        wait_until(
            lambda: all(set(r) <= set(KCOMPAT) for _l, r in partitions(java_bs).values()),
            "every replica on the kcompat brokers",
            timeout=120,
        )
        verify = kafka_tool("kafka-reassign-partitions", "--bootstrap-server", java_bs,
                            "--reassignment-json-file", str(plan), "--verify").stdout  # fmt: skip
        assert verify.count("is completed") == len(placed) and "in progress" not in verify, verify
        moved = time.monotonic() - moving
        ledger.more(200)

        for j in cluster.java.values():
            j.stop()
        kcompat_bs = cluster.bootstrap
        wait_until(
            lambda: all(leader in KCOMPAT for leader, _r in partitions(kcompat_bs).values()),
            "every leader a kcompat broker",
            timeout=60,
        )
        ledger.more(200)
        commits = member.commits
        wait_until(lambda: member.commits >= commits + 2, "the group committing on kcompat", timeout=90)

        second = {f"t{i}".encode() for i in range(100)}
        after = Producer({"bootstrap.servers": kcompat_bs, "acks": "all"})
        for v in sorted(second):
            after.produce(SHARED, v)
        assert after.flush(30) == 0
        after_move: list[bytes] = []
        share_values(share, second, after_move, 90)
        end = time.monotonic() + 3  # past any redelivery
        while time.monotonic() < end:
            after_move += [m.value() for m in share.poll(0.5) if m.error() is None and m.value() != WARM]
        assert not set(after_move) & first, "acknowledged share records delivered again"
        assert sorted(after_move) == sorted(second), "share records lost or delivered twice"
        assert sorted(before_move) == sorted(first), "share records delivered twice before the move"

        counts += produce_lines(kcompat_bs, streams_topics[0], 200, seed=13)
        output.wait("the output on the kcompat brokers", expected_output(counts), 120)
        assert all(e.get("error") is None for e in app.events()), app.out[-30:]
    finally:
        print("the Streams app's last lines:", *app.out[-40:], sep="\n")
        ledger.close()
        member.close()
        share.close()
        output.close()
        app.stop()
    assert not ledger.failed, ledger.failed[:3]

    # The group's committed offset kept across the move, as the member was last told.
    check = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "mig-group", "enable.auto.commit": False}
    )
    (tp,) = check.committed([TopicPartition(LEDGER, 0)], timeout=20)
    assert tp.offset == member.committed, (tp.offset, member.committed)
    check.close()

    reader = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "mig-check", "enable.auto.commit": False}
    )
    reader.assign([TopicPartition(LEDGER, 0, 0)])
    seen_values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen_values) < len(ledger.acked) and time.monotonic() < deadline:
        m = reader.poll(1)
        if m is not None and m.error() is None:
            seen_values.append(m.value())
    reader.close()
    assert set(ledger.acked) - set(seen_values) == set(), "acknowledged records lost"
    assert len(seen_values) == len(set(seen_values)), "duplicates"
    assert seen_values == sorted(seen_values, key=lambda v: int(v.split(b"-")[1])), "out of order"
    report_figure(
        "default-format migration",
        f"{len(placed)} partitions moved Java -> kcompat in {moved:.1f}s under load; "
        f"{len(ledger.acked)} records acknowledged, all read back once; whole round "
        f"{time.monotonic() - started:.0f}s",
    )
