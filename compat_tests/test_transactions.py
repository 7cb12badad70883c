"""Transactions with real clients against `kcompat serve`: the Java client 4.x (transactions v2,
proved by the epoch bumps) and 3.9 (v1): commit, abort, offsets, read_committed vs
read_uncommitted, fencing by a second instance, confluent-kafka and kafka-python
(consume-transform-produce with send_offsets_to_transaction, an aborted round re-done); bad input
in raw frames beside a real transaction; compaction of a topic with transactions (aborted data
and its marker go, read_committed sees the same); kill -9 in the middle of a transaction (aborted
by its timeout after the restart, never visible to read_committed) and between PrepareCommit and
its markers (completed after the restart), with a ledger of committed transactions across kill -9
rounds (slow layer)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support import ROOT, java_classpath, java_executable, kafka_tool

from compat_tests.crash.wire_client import WireClient
from compat_tests.groups_members import JVM, KAFKA_CLIENTS_39_JARS, KAFKA_JARS, compile_java
from kcompat.coordinator.transaction import TransactionCoordinator, TxnConfig
from kcompat.log import LogConfig, LogManager
from kcompat.testing import Broker, BrokerFactory
from kcompat.wire.control_batch import control_type_in_batch, end_txn_marker
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.record_batch import read_header, split_batches
from kcompat.wire.records import Record, build_batch, decode_batch

pytestmark = pytest.mark.timeout(240)

# Timeouts short enough for a test: an abandoned transaction is aborted within a few seconds.
FAST_ABORT = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


def create(bootstrap: str, *topics: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        f.result()


def read_values(
    bootstrap: str, topic: str, isolation: str, *, expect: int, timeout: float = 20.0, partition: int = 0
) -> list[bytes]:
    """Every value of a partition of `topic` a consumer with `isolation` sees, up to its end offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.auto.commit": False})  # fmt: skip
    try:
        tp = TopicPartition(topic, partition, 0)
        c.assign([tp])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append(m.value())
                continue
            if len(out) >= expect and m is None:
                break  # what was expected, and nothing more at once (more would fail the equality)
        return out
    finally:
        c.close()


# --- Java ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "jars",
    [
        pytest.param(KAFKA_JARS, id="4.x"),
        pytest.param(KAFKA_CLIENTS_39_JARS, id="3.9", marks=pytest.mark.slow),
    ],
)
def test_java_commit_abort_read_committed_and_fencing(
    kcompat_broker: Broker, tmp_path: Path, jars: Path
) -> None:
    create(kcompat_broker.bootstrap, "jtx")
    classes = compile_java(tmp_path / "classes", jars, ROOT / "compat_tests" / "java" / "Transactions.java")
    cp = f"{classes}:{java_classpath(jars)}"
    proc = subprocess.run([java_executable(), *JVM, "-cp", cp, "Transactions", kcompat_broker.bootstrap, "jtx"],
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = {k: v for line in lines for k, v in line.items()}
    committed = [f"c{i}" for i in range(5)] + [f"d{i}" for i in range(5)]
    assert got["committed"] == committed
    assert got["uncommitted"] == [f"{p}{i}" for p in "cad" for i in range(5)]
    # Transactions v2 (Java 4.x: transaction.version 2 is finalized): EndTxn v5 bumped the epoch at
    # each of the 4 ends (3 rounds + the offsets-only one, whose TxnOffsetCommit v5 added the group
    # implicitly); v1 (Java 3.9) keeps epoch 0.
    assert got["epoch"] == (4 if jars == KAFKA_JARS else 0)
    assert got["group_offset"] == 7
    assert got["fenced"] == "ProducerFencedException"
    assert got["after_fence"] == [*committed, "second"]  # the zombie's record was aborted


# --- confluent-kafka: consume-transform-produce -------------------------------------------------


def test_confluent_consume_transform_produce_exactly_once(kcompat_broker: Broker) -> None:
    bs = kcompat_broker.bootstrap
    create(bs, "ctp-in", "ctp-out")
    src = Producer({"bootstrap.servers": bs})
    for i in range(30):
        src.produce("ctp-in", value=b"%d" % i)
    src.flush(10)

    consumer = Consumer({"bootstrap.servers": bs, "group.id": "ctp", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe(["ctp-in"])
    producer = Producer(
        {"bootstrap.servers": bs, "transactional.id": "ctp-tx", "transaction.timeout.ms": 20000}
    )
    producer.init_transactions(20)
    rounds = 0
    done = 0
    deadline = time.monotonic() + 60
    while done < 30 and time.monotonic() < deadline:
        msgs = [m for m in consumer.consume(10, 1.0) if not m.error()]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce("ctp-out", value=b"x" + m.value())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 20)  # fmt: skip
        rounds += 1
        if rounds == 2:
            # Abort one round: its output must never be seen, its input must be processed again.
            # Flushed first: librdkafka's abort purges records still queued in the client, and the
            # aborted records must reach the log for the read_uncommitted check below.
            producer.flush(20)
            producer.abort_transaction(20)
            committed = consumer.committed(consumer.assignment(), 10)
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            continue
        producer.commit_transaction(20)
        done = int(msgs[-1].value()) + 1
    consumer.close()
    assert done == 30 and rounds >= 3
    out = read_values(bs, "ctp-out", "read_committed", expect=30)
    assert out == [b"x%d" % i for i in range(30)]  # each input exactly once, in order
    everything = read_values(bs, "ctp-out", "read_uncommitted", expect=31)
    assert len(everything) > 30  # the aborted round is in the log, only hidden
    check = Consumer({"bootstrap.servers": bs, "group.id": "ctp"})
    assert [tp.offset for tp in check.committed([TopicPartition("ctp-in", 0)], 10)] == [30]
    check.close()


# --- kafka-python -------------------------------------------------------------------------------


def test_kafka_python_commit_abort_and_send_offsets(kcompat_broker: Broker) -> None:
    kafka = pytest.importorskip("kafka")
    bs = kcompat_broker.bootstrap
    create(bs, "kp-in", "kp-out")
    src = Producer({"bootstrap.servers": bs})
    for i in range(6):
        src.produce("kp-in", value=b"%d" % i)
    src.flush(10)
    consumer = kafka.KafkaConsumer("kp-in", bootstrap_servers=bs, group_id="kp", auto_offset_reset="earliest",
                                   enable_auto_commit=False, isolation_level="read_committed")  # fmt: skip
    producer = kafka.KafkaProducer(bootstrap_servers=bs, transactional_id="kp-tx")
    producer.init_transactions()
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < 6 and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            got.extend(recs)
    assert [int(r.value) for r in got] == list(range(6))
    producer.begin_transaction()
    producer.send("kp-out", b"aborted")
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    for r in got:
        producer.send("kp-out", b"y" + r.value)
    tp = kafka.TopicPartition("kp-in", 0)
    producer.send_offsets_to_transaction({tp: kafka.OffsetAndMetadata(6, "", -1)}, consumer.group_metadata())
    producer.commit_transaction()
    producer.close()
    consumer.close()
    assert read_values(bs, "kp-out", "read_committed", expect=6) == [b"y%d" % i for i in range(6)]
    check = Consumer({"bootstrap.servers": bs, "group.id": "kp"})
    assert [t.offset for t in check.committed([TopicPartition("kp-in", 0)], 10)] == [6]
    check.close()


# --- bad input ---------------------------------------------------------------------------------


def test_bad_transactional_input_gets_kafkas_codes_and_a_real_producer_is_unaffected(
    kcompat_broker: Broker,
) -> None:
    """Raw frames a client library would never send, in the middle of a confluent-kafka transaction:
    each answered with Kafka's code, and the transaction commits exactly its own records."""
    bs = kcompat_broker.bootstrap
    create(bs, "bad-tx")
    p = Producer({"bootstrap.servers": bs, "transactional.id": "good-tx"})
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(3):
        p.produce("bad-tx", value=b"good-%d" % i, partition=0)
    p.flush(10)
    host, port = bs.rsplit(":", 1)
    c = WireClient(host, int(port))
    try:
        r = c.call(22, 4, {"transactional_id": "bad", "transaction_timeout_ms": 900_001})  # InitProducerId
        assert r.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT  # above transaction.max.timeout.ms
        stray = build_batch([Record(0, int(time.time() * 1000), None, b"stray")], producer_id=77_777,
                            producer_epoch=0, base_sequence=0, transactional=True)  # fmt: skip
        body = {"transactional_id": "bad", "acks": -1, "timeout_ms": 5000,
                "topic_data": [{"name": "bad-tx", "partition_data": [{"index": 0, "records": stray}]}]}  # fmt: skip
        # A producer the coordinator never registered: Kafka's coordinator answers the check
        # INVALID_PRODUCER_ID_MAPPING (verify-only before v12, the implicit add from v12) and the
        # leader passes it on (ReplicaManager translates only INVALID_TXN_STATE and the retriables).
        for version in (9, 12):
            got = c.call(0, version, body).responses[0].partition_responses[0].error_code  # Produce
            assert got == ErrorCode.INVALID_PRODUCER_ID_MAPPING, (version, got)
        r = c.call(
            26, 3, {"transactional_id": "bad", "producer_id": 77_777, "producer_epoch": 0, "committed": True}
        )  # EndTxn of a transaction that does not exist
        assert r.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        r = c.call(27, 1, {"markers": [{"producer_id": 66_666, "producer_epoch": 0, "transaction_result": True,
                   "coordinator_epoch": 0, "topics": [{"name": "bad-tx", "partition_indexes": [0]}]}]})  # fmt: skip
        assert r.markers[0].topics[0].partitions[0].error_code == 0  # a marker for nobody: harmless
    finally:
        c.close()
    p.commit_transaction(20)
    assert read_values(bs, "bad-tx", "read_committed", expect=3) == [b"good-%d" % i for i in range(3)]


# --- compaction ---------------------------------------------------------------------------------


def _control_batches(directory: Path) -> list[tuple[int, int]]:
    """(offset, control type: 0 ABORT, 1 COMMIT) of every marker in a partition's segment files."""
    out = []
    for f in sorted(directory.glob("*.log")):
        data = f.read_bytes()
        for pos, size in split_batches(data):
            h = read_header(data, pos)
            if h.is_control:
                out.append((h.base_offset, control_type_in_batch(memoryview(data)[pos : pos + size], h)))
    return out


def test_compaction_drops_aborted_data_and_its_marker_and_read_committed_sees_the_same(
    kcompat_broker_factory: BrokerFactory,
) -> None:
    """A compacted topic with committed and aborted transactions: the cleaner (backing off 200 ms, every
    segment sealed at once by segment.ms=1) drops the aborted records, then their ABORT marker
    (delete.retention.ms=0); a read_committed reader sees the same records before and after."""
    broker = kcompat_broker_factory({"log.cleaner.backoff.ms": "200"})
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    cfg = {"cleanup.policy": "compact", "segment.ms": "1", "delete.retention.ms": "0",
           "min.cleanable.dirty.ratio": "0.01"}  # fmt: skip
    admin.create_topics([NewTopic("ctx", 1, 1, config=cfg)])["ctx"].result(10)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "ctx-tx"})
    p.init_transactions(20)
    for prefix, commit in (("c", True), ("a", False), ("d", True)):
        p.begin_transaction()
        for i in range(3):
            p.produce(
                "ctx", key=b"%s%d" % (prefix.encode(), i), value=b"%s%d" % (prefix.encode(), i), partition=0
            )
        p.flush(10)
        if commit:
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    tail = Producer({"bootstrap.servers": bs})
    tail.produce("ctx", key=b"end", value=b"end", partition=0)  # seals the last marker's segment
    tail.flush(10)
    committed = [b"c0", b"c1", b"c2", b"d0", b"d1", b"d2", b"end"]
    assert read_values(bs, "ctx", "read_committed", expect=7) == committed
    directory = broker.data_dir / "ctx-0"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and [k for _, k in _control_batches(directory)] != [1, 1]:
        time.sleep(0.1)  # the cleaner's passes: on the broker's timer
    assert [k for _, k in _control_batches(directory)] == [1, 1]  # the ABORT marker is gone
    assert read_values(bs, "ctx", "read_uncommitted", expect=7) == committed  # so is the aborted data
    assert read_values(bs, "ctx", "read_committed", expect=7) == committed


# --- kill -9 ------------------------------------------------------------------------------------


def test_kill9_mid_transaction_is_aborted_at_timeout(kcompat_broker_factory: BrokerFactory) -> None:
    broker = kcompat_broker_factory(FAST_ABORT)
    bs = broker.bootstrap
    create(bs, "k9")
    open_txn = Producer(
        {"bootstrap.servers": bs, "transactional.id": "k9-open", "transaction.timeout.ms": 3000}
    )
    open_txn.init_transactions(20)
    open_txn.begin_transaction()
    for i in range(5):
        open_txn.produce("k9", value=b"never-%d" % i)
    open_txn.flush(10)
    broker.kill()
    broker.restart(clean=False)
    # A committed transaction after the open one: read_committed sees it only once the LSO moves,
    # i.e. once the coordinator (reloaded from __transaction_state) aborted the open one.
    committer = Producer({"bootstrap.servers": bs, "transactional.id": "k9-commit"})
    committer.init_transactions(20)
    committer.begin_transaction()
    committer.produce("k9", value=b"committed")
    committer.commit_transaction(20)
    assert read_values(bs, "k9", "read_committed", expect=1, timeout=30) == [b"committed"]
    assert b"never-0" in read_values(bs, "k9", "read_uncommitted", expect=6)
    with pytest.raises(KafkaException):
        open_txn.commit_transaction(10)  # fenced by the timeout's epoch bump


def _prepare_commit_offline(data_dir: Path, txn_id: str, marked: list[tuple[str, int]]) -> None:
    """On a killed broker's data dir, with kcompat's own log and coordinator code: store the
    transaction's PrepareCommit and write its COMMIT marker into `marked` only, the state a kill -9
    leaves between the coordinator's decision and its last marker."""
    props = dict(line.split("=", 1) for line in (data_dir / "meta.properties").read_text().splitlines()
                 if "=" in line and not line.startswith("#"))  # fmt: skip
    logs = LogManager([data_dir], LogConfig(), cluster_id=props["cluster.id"], node_id=int(props["node.id"]))
    try:
        state = logs.get("__transaction_state", 0)
        assert state is not None
        coordinator = TransactionCoordinator(TxnConfig(num_partitions=1))
        data = state.read(state.log_start_offset, 1 << 30).read_bytes()
        for pos, size in split_batches(data):
            if not read_header(data, pos).is_control:
                for r in decode_batch(data[pos : pos + size])[1]:
                    coordinator.replay(r.key, r.value)
        m = coordinator.txns[txn_id]
        now = int(time.time() * 1000)
        result = coordinator.end_txn(txn_id, m.producer_id, m.producer_epoch, True, now)
        assert result.error == ErrorCode.NONE and result.markers is not None
        ((_, key, value),) = result.records
        state.append(build_batch([Record(0, now, key, value)]), leader_epoch=0, now_ms=now)
        for topic, partition in marked:
            plog = logs.get(topic, partition)
            assert plog is not None
            marker = end_txn_marker(m.producer_id, m.producer_epoch, commit=True, coordinator_epoch=0,
                                    timestamp_ms=now)  # fmt: skip
            plog.append(marker, leader_epoch=0, now_ms=now)
    finally:
        logs.close()


def test_kill9_between_prepare_commit_and_its_markers_commits_after_restart(
    kcompat_broker_factory: BrokerFactory,
) -> None:
    """kill -9 with a transaction on two partitions open, then its PrepareCommit and the marker of
    one partition put on disk (as a kill between markers leaves them): the restarted broker writes
    the other marker, both partitions' LSOs move, and read_committed sees every record once."""
    broker = kcompat_broker_factory()
    bs = broker.bootstrap
    create(bs, "k9m", partitions=2)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "k9m-tx"})
    p.init_transactions(20)
    p.begin_transaction()
    for part in (0, 1):
        for i in range(3):
            p.produce("k9m", value=b"m%d-%d" % (part, i), partition=part)
    p.flush(10)
    broker.kill()
    _prepare_commit_offline(broker.data_dir, "k9m-tx", marked=[("k9m", 0)])
    broker.start()
    for part in (0, 1):
        got = read_values(bs, "k9m", "read_committed", expect=3, partition=part, timeout=30)
        assert got == [b"m%d-%d" % (part, i) for i in range(3)], part
    again = Producer({"bootstrap.servers": bs, "transactional.id": "k9m-tx"})
    again.init_transactions(20)  # the transaction is complete: a new instance starts at once
    again.begin_transaction()
    again.produce("k9m", value=b"after", partition=1)
    again.commit_transaction(20)
    assert read_values(bs, "k9m", "read_committed", expect=4, partition=1)[-1] == b"after"


@pytest.mark.slow
def test_kill9_ledger_of_committed_transactions(kcompat_broker_factory: BrokerFactory) -> None:
    """Rounds of transactions (some aborted, one left open at each kill -9), the broker killed and
    restarted between rounds: read_committed shows every committed record exactly once, in order,
    and no record of an aborted or abandoned transaction."""
    broker = kcompat_broker_factory(FAST_ABORT)
    bs = broker.bootstrap
    create(bs, "ledger")
    committed: list[bytes] = []
    seq = 0
    for rnd in range(5):
        p = Producer(
            {"bootstrap.servers": bs, "transactional.id": "ledger-tx", "transaction.timeout.ms": 3000}
        )
        p.init_transactions(30)  # after a kill: fences what the last round left open
        for t in range(4):
            p.begin_transaction()
            batch = [b"r%d-t%d-%d" % (rnd, t, i) for i in range(seq, seq + 10)]
            seq += 10
            for v in batch:
                p.produce("ledger", value=v)
            if t == 2:
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
                committed.extend(batch)
        p.begin_transaction()  # left open: the kill comes in its middle
        for i in range(5):
            p.produce("ledger", value=b"open-%d-%d" % (rnd, i))
        p.flush(10)
        broker.kill()
        broker.restart(clean=False)
    final = Producer({"bootstrap.servers": bs, "transactional.id": "ledger-tx"})
    final.init_transactions(30)  # aborts the last open transaction at once
    seen = read_values(bs, "ledger", "read_committed", expect=len(committed), timeout=60)
    assert seen == committed, f"{len(seen)} seen, {len(committed)} committed"


@pytest.mark.slow
def test_kafka_transactions_tool_lists_and_describes(kcompat_broker: Broker) -> None:
    bs = kcompat_broker.bootstrap
    create(bs, "tool")
    p = Producer({"bootstrap.servers": bs, "transactional.id": "tool-tx"})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce("tool", value=b"v")
    p.flush(10)
    listed = kafka_tool("kafka-transactions", "--bootstrap-server", bs, "list").stdout
    assert "tool-tx" in listed and "Ongoing" in listed, listed
    described = kafka_tool("kafka-transactions", "--bootstrap-server", bs, "describe", "--transactional-id",
                           "tool-tx").stdout  # fmt: skip
    assert "Ongoing" in described and "tool-0" in described, described
    p.commit_transaction(20)
    described = kafka_tool("kafka-transactions", "--bootstrap-server", bs, "describe", "--transactional-id",
                           "tool-tx").stdout  # fmt: skip
    assert "CompleteCommit" in described, described
    # A hanging transaction: describe-producers shows where it starts, abort writes its ABORT marker.
    hang = Producer(
        {"bootstrap.servers": bs, "transactional.id": "hang-tx", "transaction.timeout.ms": 600000}
    )
    hang.init_transactions(20)
    hang.begin_transaction()
    hang.produce("tool", value=b"hanging")
    hang.flush(10)
    producers = kafka_tool("kafka-transactions", "--bootstrap-server", bs, "describe-producers", "--topic", "tool",
                           "--partition", "0").stdout  # fmt: skip
    start = [line.split() for line in producers.splitlines() if line.split() and line.split()[-1] == "2"]
    assert start, producers  # the hanging transaction starts at offset 2 (after "v" and its marker)
    kafka_tool("kafka-transactions", "--bootstrap-server", bs, "abort", "--topic", "tool", "--partition", "0",
               "--start-offset", "2")  # fmt: skip
    assert read_values(bs, "tool", "read_committed", expect=1) == [b"v"]
    low_high = Consumer({"bootstrap.servers": bs, "group.id": "lso", "isolation.level": "read_committed"})
    _, lso = low_high.get_watermark_offsets(TopicPartition("tool", 0), timeout=10, cached=False)
    low_high.close()
    assert lso == 4  # "v", COMMIT, "hanging", ABORT: nothing open any more
    # Kafka's own DumpLogSegments reads our .txnindex (34-byte AbortedTxn entries) and our markers.
    part = kcompat_broker.data_dir / "tool-0"
    txnindex = kafka_tool("kafka-dump-log", "--files", str(part / "00000000000000000000.txnindex")).stdout
    assert "firstOffset: 2 lastOffset: 3 lastStableOffset: 4" in txnindex, txnindex
    log = kafka_tool(
        "kafka-dump-log", "--print-data-log", "--files", str(part / "00000000000000000000.log")
    ).stdout
    assert "endTxnMarker: COMMIT" in log and "endTxnMarker: ABORT" in log, log
