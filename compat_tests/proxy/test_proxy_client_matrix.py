"""The client matrix through `kcompat proxy` in front of three kcompat brokers under a Kafka 4.3.1
controller (one cluster and one proxy, with its /faults API, for the module): kcat (-L, produce,
a consumer group), aiokafka and the Java client 3.9 (acks=all produce, a consumer group), and a
Kafka Streams 4.3.1 exactly_once_v2 word count with faults injected on EndTxn, AddPartitionsToTxn
and Produce through the proxy's /faults API: its output holds every running count exactly once.
Every answer the proxy sent is decoded and none names an upstream address.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from support import kafka_tool

from compat_tests.client_data import unique
from compat_tests.cluster.test_cluster_clients import (
    ENDS,
    EXPECTED,
    PARTITIONS,
    PER_PARTITION,
    aiokafka_round,
    by_partition,
    committed_offsets,
    create_topic,
    values,
)
from compat_tests.cluster.test_group_coordinator import Cluster
from compat_tests.groups_members import KAFKA_CLIENTS_39_JARS, Group, compile_java, java_member
from compat_tests.proxy.checks import assert_no_upstream_address
from compat_tests.proxy.harness import HOST, ProxyThread
from compat_tests.test_clients_java import QUIET, SOURCE, JavaClient
from compat_tests.test_streams_eos import Updates, WordCountApp, input_lines
from kcompat.fault_client import Faults
from kcompat.testing import wait_until
from kcompat.testing_cluster import ControllerQuorum

pytestmark = pytest.mark.timeout(240)

BROKER_IDS = (1, 2, 3)


@pytest.fixture(scope="module")
def cluster(kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(kraft_quorum, tmp_path_factory.mktemp("proxy-matrix-upstream"))
    with c.running(BROKER_IDS):
        yield c


@pytest.fixture(scope="module")
def proxy(cluster: Cluster) -> Iterator[ProxyThread]:
    with ProxyThread(cluster.bootstrap, **{"proxy.admin.listener": f"{HOST}:0"}) as p:
        yield p


@pytest.fixture
def faults(proxy: ProxyThread) -> Iterator[Faults]:
    assert proxy.admin_url is not None
    f = Faults(proxy.admin_url)
    yield f
    f.clear()


def no_leak(cluster: Cluster, proxy: ProxyThread) -> None:
    assert_no_upstream_address(proxy, {b.port for b in cluster.brokers.values()})


# --- kcat (librdkafka 2.0.2) --------------------------------------------------------------------


@pytest.mark.skipif(
    shutil.which("kcat") is None, reason="kcat is not installed: run tools/setup-test-deps.sh"
)
def test_kcat_lists_produces_and_consumes_in_a_group(cluster: Cluster, proxy: ProxyThread) -> None:
    topic = create_topic(cluster, "pm-kcat")
    listed = subprocess.run(["kcat", "-b", proxy.bootstrap, "-L", "-J", "-t", topic],
                            capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    meta = json.loads(listed.stdout)
    assert sorted((b["id"], b["name"]) for b in meta["brokers"]) == [
        (n, f"{HOST}:{proxy.node_port(n)}") for n in BROKER_IDS
    ]
    (t,) = meta["topics"]
    assert sorted(p["leader"] for p in t["partitions"]) == list(BROKER_IDS)
    for p in range(PARTITIONS):
        subprocess.run(["kcat", "-b", proxy.bootstrap, "-P", "-t", topic, "-p", str(p), "-X", "acks=all"],
                       input="".join(v + "\n" for v in values(p)), text=True, check=True, timeout=30,
                       capture_output=True)  # fmt: skip
    group = unique("pm-kcat-group")
    done = subprocess.run(["kcat", "-b", proxy.bootstrap, "-G", group, "-J", "-e", "-X", "auto.offset.reset=earliest",
                           topic], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert by_partition([(m["partition"], m["offset"], m["payload"]) for m in got]) == EXPECTED
    assert committed_offsets(cluster, group, topic) == ENDS
    no_leak(cluster, proxy)


# --- aiokafka ---------------------------------------------------------------------------------


def test_aiokafka_produces_and_consumes_in_a_group(cluster: Cluster, proxy: ProxyThread) -> None:
    topic = create_topic(cluster, "pm-aiokafka")
    group = unique("pm-aiokafka-group")

    read, committed = asyncio.run(asyncio.wait_for(aiokafka_round(proxy.bootstrap, topic, group), 90))
    assert by_partition(read) == EXPECTED
    assert committed == ENDS
    assert committed_offsets(cluster, group, topic) == ENDS
    no_leak(cluster, proxy)


# --- the Java client 3.9 ------------------------------------------------------------------------


def test_java_39_produces_and_consumes_in_a_group(
    cluster: Cluster, proxy: ProxyThread, tmp_path_factory: pytest.TempPathFactory
) -> None:
    topic = create_topic(cluster, "pm-java39")
    group = unique("pm-java39-group")
    base = tmp_path_factory.mktemp("pm-java39")
    jars = KAFKA_CLIENTS_39_JARS
    producer = JavaClient(
        compile_java(base / "scenarios", jars, SOURCE), jars, base / "producer.log", QUIET["3.9"]
    )
    try:
        for p in range(PARTITIONS):
            out = producer.call("produce", bootstrap=proxy.bootstrap, topic=topic, partition=p,
                                records=[{"key": None, "value": v.encode().hex()} for v in values(p)],
                                config={"acks": "all"})  # fmt: skip
            assert [(r["partition"], r["offset"]) for r in out["results"]] == [
                (p, i) for i in range(PER_PARTITION)
            ], out
    finally:
        producer.close()
    start = java_member(compile_java(base / "consumer", jars), jars, proxy.bootstrap, topic, group, {})
    members = Group(start, PARTITIONS)
    try:
        member = members.add()
        members.wait_consumed({v for vs in EXPECTED.values() for v in vs})
        member.leave()
    finally:
        members.stop()
    assert by_partition([(r["p"], r["o"], r["v"]) for r in member.records()]) == EXPECTED
    assert committed_offsets(cluster, group, topic) == ENDS
    no_leak(cluster, proxy)


# --- Kafka Streams exactly_once_v2 with faults --------------------------------------------------


def finalized_transaction_version(bootstrap: str) -> str:
    rows = [
        line.split()
        for line in kafka_tool(
            "kafka-features", "--bootstrap-server", bootstrap, "describe"
        ).stdout.splitlines()
    ]
    return next(r[7] for r in rows if len(r) > 7 and r[0] == "Feature:" and r[1] == "transaction.version")


@contextmanager
def transaction_version(cluster: Cluster, proxy: ProxyThread, level: str) -> Iterator[None]:
    """transaction.version finalized at `level` on the controller, as the brokers (through the
    proxy) report it; the cluster's own level again afterwards."""
    before = finalized_transaction_version(proxy.bootstrap)
    controller = f"{HOST}:{cluster.quorum.controllers[0].port}"

    def finalize(to: str) -> None:
        now = finalized_transaction_version(proxy.bootstrap)
        if now == to:
            return
        verb = "downgrade" if int(to) < int(now) else "upgrade"
        kafka_tool(
            "kafka-features",
            "--bootstrap-controller",
            controller,
            verb,
            "--feature",
            f"transaction.version={to}",
        )
        wait_until(
            lambda: finalized_transaction_version(proxy.bootstrap) == to,
            f"transaction.version={to}",
            timeout=60,
        )

    finalize(level)
    try:
        yield
    finally:
        finalize(before)


# With transaction.version=2 (KIP-890) a 4.x producer adds partitions to its transaction
# implicitly, so no AddPartitionsToTxn goes through the proxy; at 1 it sends one per new partition.
@pytest.mark.parametrize("tv", ["2", "1"])
def test_streams_exactly_once_v2_through_injected_faults(
    cluster: Cluster, proxy: ProxyThread, faults: Faults, tmp_path: Path, tv: str
) -> None:
    """Retriable errors and a dropped connection on the transaction path, answered by the proxy:
    Streams retries or aborts and re-processes, and read_committed sees each count once."""
    with transaction_version(cluster, proxy, tv):
        streams_word_count_with_faults(cluster, proxy, faults, tmp_path, tv)


def streams_word_count_with_faults(
    cluster: Cluster, proxy: ProxyThread, faults: Faults, tmp_path: Path, tv: str
) -> None:
    source, sink, app_id = unique("pm-lines"), unique("pm-counts"), unique("pm-wc")
    for topic in (source, sink):
        cluster.create_topic(topic, 2, 3, {"min.insync.replicas": "2"})
    lines = input_lines()
    expected = Counter(w for line in lines for w in line.split())
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 5, "acks": "all"})
    for i, line in enumerate(lines):
        producer.produce(source, key=b"%d" % i, value=line.encode())
    assert producer.flush(30) == 0
    rules = {
        "end_txn_error": faults.add(
            "error", api="EndTxn", error="CONCURRENT_TRANSACTIONS", trigger={"times": 2}
        ),
        "end_txn_drop": faults.add("drop", api="EndTxn", trigger={"nth": 4}),
        "add_partitions": faults.add(
            "error", api="AddPartitionsToTxn", error="CONCURRENT_TRANSACTIONS", trigger={"times": 2}
        ),
        # No topic matcher: Produce v13 names topics by id. Only the app produces from here on.
        "produce": faults.add("error", api="Produce", error="NOT_LEADER_OR_FOLLOWER", trigger={"times": 3}),
    }
    app = WordCountApp(tmp_path, [proxy.bootstrap, app_id, source, sink, str(tmp_path / "state"), "2"])
    updates = Updates(proxy.bootstrap, sink, 2)
    try:
        updates.wait(
            "the final counts",
            lambda: all(updates.by_word.get(w, [0])[-1] >= n for w, n in expected.items()),
            150,
        )
        check = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": app_id})
        try:  # Streams committed the end of its input: no update can come after this one
            parts = [ConfluentPartition(source, p) for p in (0, 1)]
            ends = [check.get_watermark_offsets(tp, 10)[1] for tp in parts]
            deadline = time.monotonic() + 30
            while [t.offset for t in check.committed(parts, 10)] != ends:
                assert time.monotonic() < deadline, "Streams never committed the end of its input"
                time.sleep(0.1)
        finally:
            check.close()
        time.sleep(1.0)  # a late duplicate would arrive now
    finally:
        updates.close()
        app.stop()
    for word, n in expected.items():
        assert updates.by_word[word] == list(range(1, n + 1)), (
            word,
            updates.by_word[word][:50],
            app.out[-20:],
        )
    assert set(updates.by_word) == set(expected)
    fired = {name: faults.fired(rule) for name, rule in rules.items()}
    assert fired["end_txn_error"] == 2 and fired["end_txn_drop"] == 1 and fired["produce"] == 3, fired
    assert fired["add_partitions"] == (2 if tv == "1" else 0), fired
    no_leak(cluster, proxy)
