"""Transactions through real request frames on an in-process Broker: InitProducerId with a transactional
id, AddPartitionsToTxn (v3 and the v4 VerifyOnly form), transactional Produce, EndTxn, read_committed
Fetch and ListOffsets (LSO, aborted transactions), TxnOffsetCommit with OffsetFetch require_stable,
fencing, timeouts, and a restart in the middle of a transaction."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.add_offsets_to_txn import ADD_OFFSETS_TO_TXN
from kcompat.wire.messages.add_partitions_to_txn import ADD_PARTITIONS_TO_TXN
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.describe_transactions import DESCRIBE_TRANSACTIONS
from kcompat.wire.messages.end_txn import END_TXN
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.init_producer_id import INIT_PRODUCER_ID
from kcompat.wire.messages.list_offsets import LIST_OFFSETS
from kcompat.wire.messages.list_transactions import LIST_TRANSACTIONS
from kcompat.wire.messages.offset_fetch import OFFSET_FETCH
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.messages.txn_offset_commit import TXN_OFFSET_COMMIT
from kcompat.wire.messages.write_txn_markers import WRITE_TXN_MARKERS
from kcompat.wire.record_batch import read_header, split_batches
from kcompat.wire.records import decode_batch
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch


class Clock:
    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def h(broker_harness: HarnessFactory, clock: Clock) -> BrokerHarness:
    props = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "3",
             "transaction.max.timeout.ms": "60000"}  # fmt: skip
    harness = broker_harness(props, clock=clock)
    resp = harness.call(CREATE_TOPICS, 7, {"topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1,
                                                       "configs": []}], "timeout_ms": 1000})  # fmt: skip
    assert resp.topics[0].error_code == 0
    return harness


def init(h: BrokerHarness, txn_id: str = "tx", timeout: int = 10_000, version: int = 4, **kw: Any) -> Any:
    return h.call(
        INIT_PRODUCER_ID, version, {"transactional_id": txn_id, "transaction_timeout_ms": timeout, **kw}
    )


def add(
    h: BrokerHarness, pid: int, epoch: int, parts: list[int], txn_id: str = "tx", version: int = 3
) -> list[int]:
    r = h.call(ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": "t", "partitions": parts}]})  # fmt: skip
    return [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]


def produce(h: BrokerHarness, pid: int, epoch: int, seq: int, *values: bytes, partition: int = 0,
            txn_id: str | None = "tx") -> Any:  # fmt: skip
    records = batch(*values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    body = {"transactional_id": txn_id, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": partition, "records": records}]}]}  # fmt: skip
    return h.call(PRODUCE, 9, body).responses[0].partition_responses[0]


def end(h: BrokerHarness, pid: int, epoch: int, commit: bool, txn_id: str = "tx", version: int = 3) -> int:
    r = h.call(END_TXN, version, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                  "committed": commit})  # fmt: skip
    return int(r.error_code)


def fetch(
    h: BrokerHarness, isolation: int, offset: int = 0, partition: int = 0
) -> tuple[Any, list[tuple[int, bytes]]]:
    resp = h.call(FETCH, 12, {"max_wait_ms": 0, "min_bytes": 1, "isolation_level": isolation, "topics": [
        {"topic": "t", "partitions": [{"partition": partition, "fetch_offset": offset,
                                       "partition_max_bytes": 1 << 20}]}]})  # fmt: skip
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0
    data = bytes(p.records)
    # As a client does: a producer's batches are dropped from the first offset of its aborted
    # transaction up to its next control batch (the ABORT marker).
    pending = sorted((a.first_offset, a.producer_id) for a in p.aborted_transactions or [])
    aborting: set[int] = set()
    seen = []
    for pos, n in split_batches(data):
        hd = read_header(data, pos)
        while pending and pending[0][0] <= hd.last_offset:
            aborting.add(pending.pop(0)[1])
        if hd.is_control:
            aborting.discard(hd.producer_id)
            continue
        if isolation == 1 and hd.producer_id in aborting:
            continue
        _, recs = decode_batch(data[pos : pos + n])
        seen += [(r.offset, r.value) for r in recs]
    return p, seen


def latest(h: BrokerHarness, isolation: int) -> int:
    r = h.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})  # fmt: skip
    return int(r.topics[0].partitions[0].offset)


def test_commit_and_abort_as_read_committed_and_read_uncommitted_see_them(h: BrokerHarness) -> None:
    r = init(h)
    assert r.error_code == 0 and r.producer_epoch == 0
    pid = r.producer_id
    assert produce(h, pid, 0, 0, b"early").error_code == E.INVALID_TXN_STATE  # partition not added yet
    assert add(h, pid, 0, [0]) == [0]
    assert produce(h, pid, 0, 0, b"c1", b"c2").error_code == 0
    p, seen = fetch(h, 1)
    assert (p.high_watermark, p.last_stable_offset, seen) == (2, 0, [])
    assert latest(h, 1) == 0 and latest(h, 0) == 2
    assert [v for _, v in fetch(h, 0)[1]] == [b"c1", b"c2"]
    assert end(h, pid, 0, True) == 0
    p, seen = fetch(h, 1)
    assert (p.last_stable_offset, seen) == (3, [(0, b"c1"), (1, b"c2")])  # the marker took offset 2
    assert end(h, pid, 0, True) == 0  # a retried commit
    assert add(h, pid, 0, [0]) == [0]
    assert produce(h, pid, 0, 2, b"a1").error_code == 0
    assert end(h, pid, 0, False) == 0
    assert add(h, pid, 0, [0]) == [0]
    assert produce(h, pid, 0, 3, b"c3").error_code == 0
    assert end(h, pid, 0, True) == 0
    p, seen = fetch(h, 1)
    assert [v for _, v in seen] == [b"c1", b"c2", b"c3"]
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 3)]
    assert [v for _, v in fetch(h, 0)[1]] == [b"c1", b"c2", b"a1", b"c3"]
    assert end(h, pid, 0, True) == 0 and end(h, pid, 0, False) == E.INVALID_TXN_STATE


def test_errors_of_the_coordinator(h: BrokerHarness) -> None:
    assert init(h, timeout=60_001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert init(h, txn_id="").error_code == E.INVALID_REQUEST
    pid = init(h).producer_id
    assert end(h, pid, 0, True) == E.INVALID_TXN_STATE  # no transaction
    assert end(h, pid + 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert add(h, pid, 1, [0]) == [E.PRODUCER_FENCED]
    assert add(h, pid, 1, [0], version=1) == [E.INVALID_PRODUCER_EPOCH]  # no PRODUCER_FENCED before v2
    assert add(h, pid, 0, [7]) == [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert add(h, pid, 0, [0, 7]) == [E.OPERATION_NOT_ATTEMPTED, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert produce(h, pid, 0, 0, b"x", txn_id=None).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_new_instance_fences_the_old_and_aborts_its_transaction(h: BrokerHarness) -> None:
    pid = init(h).producer_id
    assert add(h, pid, 0, [0, 1]) == [0, 0]
    assert produce(h, pid, 0, 0, b"zombie").error_code == 0
    again = init(h)
    assert again.error_code == E.CONCURRENT_TRANSACTIONS  # the abort is under way; the client retries
    again = init(h)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, 2)
    assert produce(h, pid, 0, 1, b"late").error_code == E.INVALID_PRODUCER_EPOCH
    assert end(h, pid, 0, True) == E.PRODUCER_FENCED
    p, seen = fetch(h, 1)
    assert seen == [] and p.last_stable_offset == p.high_watermark == 2

    # VerifyOnly (AddPartitionsToTxn v4, KIP-890), Kafka's coordinator's answers: nothing is open
    # for the new epoch; the old epoch is fenced.
    def verify(epoch: int) -> int:
        r = h.call(ADD_PARTITIONS_TO_TXN, 4, {"transactions": [{"transactional_id": "tx", "producer_id": pid,
                   "producer_epoch": epoch, "verify_only": True, "topics": [{"name": "t", "partitions": [0]}]}]})  # fmt: skip
        return int(r.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code)

    assert verify(2) == E.TRANSACTION_ABORTABLE
    assert verify(0) == E.PRODUCER_FENCED


def test_timeout_aborts_the_open_transaction(h: BrokerHarness, clock: Clock) -> None:
    pid = init(h, timeout=5_000).producer_id
    assert add(h, pid, 0, [0]) == [0]
    assert produce(h, pid, 0, 0, b"slow").error_code == 0
    clock.t += 6
    h.broker.txn_service.abort_timed_out()  # what the timer does every 10 s
    p, seen = fetch(h, 1)
    assert (
        seen == [] and p.last_stable_offset == 2 and [a.first_offset for a in p.aborted_transactions] == [0]
    )
    assert end(h, pid, 0, True) == E.PRODUCER_FENCED


def offsets(h: BrokerHarness, stable: bool) -> Any:
    r = h.call(OFFSET_FETCH, 7, {"group_id": "g", "require_stable": stable,
                                 "topics": [{"name": "t", "partition_indexes": [0]}]})  # fmt: skip
    p = r.topics[0].partitions[0]
    return p.error_code, p.committed_offset


def test_txn_offset_commit_pends_until_the_commit_and_survives_a_restart(h: BrokerHarness) -> None:
    pid = init(h).producer_id
    body = {"transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": 0,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                    "committed_metadata": ""}]}]}  # fmt: skip
    r = h.call(TXN_OFFSET_COMMIT, 3, body)
    assert r.topics[0].partitions[0].error_code == E.INVALID_TXN_STATE  # AddOffsetsToTxn first
    add_offsets = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": 0, "group_id": "g"}
    assert h.call(ADD_OFFSETS_TO_TXN, 3, add_offsets).error_code == 0
    assert (
        h.call(TXN_OFFSET_COMMIT, 3, {**body, "generation_id": 3, "member_id": "m"})
        .topics[0]
        .partitions[0]
        .error_code
        == E.ILLEGAL_GENERATION
    )  # KIP-447: a member of a group that does not exist
    assert h.call(TXN_OFFSET_COMMIT, 3, body).topics[0].partitions[0].error_code == 0
    assert offsets(h, stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert offsets(h, stable=False) == (0, -1)  # pending offsets are invisible
    h.restart()  # the transaction is still open: its offsets come back pending
    assert offsets(h, stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert end(h, pid, 0, True) == 0
    assert offsets(h, stable=True) == (0, 42)
    h.restart()
    assert offsets(h, stable=True) == (0, 42)


def test_restart_completes_a_prepared_commit(h: BrokerHarness) -> None:
    pid = init(h).producer_id
    assert add(h, pid, 0, [0]) == [0]
    assert produce(h, pid, 0, 0, b"v").error_code == 0
    svc = h.broker.txn_service
    # A crash after PrepareCommit was stored, before any marker: store the decision only.
    result = svc.coordinator.end_txn("tx", pid, 0, True, svc.now_ms())
    svc.writes.store(result.records)
    h.restart()
    p, seen = fetch(h, 1)
    assert seen == [(0, b"v")] and p.last_stable_offset == p.high_watermark == 2
    assert init(h).producer_epoch == 1


def test_write_txn_markers_aborts_a_hanging_transaction(h: BrokerHarness) -> None:
    pid = init(h).producer_id
    assert add(h, pid, 0, [0]) == [0]
    assert produce(h, pid, 0, 0, b"hanging").error_code == 0

    def markers(epoch: int, partitions: list[int]) -> list[int]:
        r = h.call(WRITE_TXN_MARKERS, 1, {"markers": [{"producer_id": pid, "producer_epoch": epoch,
                   "transaction_result": False, "coordinator_epoch": 0,
                   "topics": [{"name": "t", "partition_indexes": partitions}]}]})  # fmt: skip
        return [p.error_code for p in r.markers[0].topics[0].partitions]

    assert markers(0, [0, 9]) == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
    p, seen = fetch(h, 1)
    assert seen == [] and p.last_stable_offset == p.high_watermark == 2
    assert [a.first_offset for a in p.aborted_transactions] == [0]


def test_describe_and_list_transactions(h: BrokerHarness, clock: Clock) -> None:
    pid = init(h).producer_id
    init(h, txn_id="other")
    assert add(h, pid, 0, [1, 0]) == [0, 0]
    d = h.call(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx", "nope"]}).transaction_states
    assert (d[0].transaction_state, d[0].producer_id, d[0].transaction_timeout_ms) == ("Ongoing", pid, 10_000)
    assert [(t.topic, t.partitions) for t in d[0].topics] == [("t", [0, 1])]
    assert d[1].error_code == E.TRANSACTIONAL_ID_NOT_FOUND

    def listed(version: int = 2, **body: Any) -> list[tuple[str, str]]:
        r = h.call(LIST_TRANSACTIONS, version, {"state_filters": [], "producer_id_filters": [], **body})
        return sorted((t.transactional_id, t.transaction_state) for t in r.transaction_states)

    assert listed() == [("other", "Empty"), ("tx", "Ongoing")]
    assert listed(state_filters=["Ongoing"]) == [("tx", "Ongoing")]
    assert listed(transactional_id_pattern="o.*") == [("other", "Empty")]
    clock.t += 2
    assert listed(state_filters=["Ongoing"], duration_filter=5_000) == []
    assert listed(state_filters=["Ongoing"], duration_filter=1_000) == [("tx", "Ongoing")]
    r = h.call(LIST_TRANSACTIONS, 2, {"state_filters": ["Bogus"], "producer_id_filters": [],
                                      "transactional_id_pattern": "("})  # fmt: skip
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION and list(r.unknown_state_filters) == ["Bogus"]


def test_read_committed_long_poll_waits_for_committed_bytes_and_wakes_on_the_marker(h: BrokerHarness) -> None:
    pid = init(h).producer_id
    assert add(h, pid, 0, [0]) == [0]

    async def scenario() -> Any:
        body = {
            "max_wait_ms": 4000,
            "min_bytes": 1,
            "isolation_level": 1,
            "topics": [
                {
                    "topic": "t",
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
        }
        parked = asyncio.ensure_future(h.call_async(FETCH, 12, body))
        records = batch(b"v", producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
        await h.call_async(
            PRODUCE,
            9,
            {
                "transactional_id": "tx",
                "acks": -1,
                "timeout_ms": 1000,
                "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
            },
        )
        await asyncio.sleep(0.2)
        assert not parked.done()  # uncommitted bytes do not count for min_bytes
        started = time.monotonic()
        await h.call_async(
            END_TXN, 3, {"transactional_id": "tx", "producer_id": pid, "producer_epoch": 0, "committed": True}
        )
        resp = await asyncio.wait_for(parked, 5)
        return resp, time.monotonic() - started

    resp, waited = h.run(scenario())
    p = resp.responses[0].partitions[0]
    assert p.last_stable_offset == 2 and len(bytes(p.records)) > 0
    assert waited < 2  # woken by the marker's append, not by the 4 s max wait


def test_recompression_keeps_a_batch_in_its_transaction(h: BrokerHarness) -> None:
    h.call(CREATE_TOPICS, 7, {"topics": [{"name": "z", "num_partitions": 1, "replication_factor": 1,
                                          "configs": [{"name": "compression.type", "value": "gzip"}]}],
                              "timeout_ms": 1000})  # fmt: skip
    pid = init(h).producer_id
    r = h.call(ADD_PARTITIONS_TO_TXN, 3, {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid,
               "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": "z", "partitions": [0]}]})  # fmt: skip
    assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    records = batch(b"v", producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
    body = {"transactional_id": "tx", "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "z", "partition_data": [{"index": 0, "records": records}]}]}  # fmt: skip
    assert h.call(PRODUCE, 9, body).responses[0].partition_responses[0].error_code == 0
    plog = h.broker.replicas.partition_log("z", 0)
    stored = read_header(plog.read(0, 1 << 20).read_bytes())
    assert stored.compression == 1 and stored.is_transactional  # recompressed to gzip, still transactional
    assert plog.last_stable_offset == 0
