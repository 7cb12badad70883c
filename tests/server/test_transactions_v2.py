"""Transactions v2 (KIP-890 part 2) and the coordinator's bad input, through real request frames on
an in-process Broker: Produce v12's implicit add, EndTxn v5's epoch bump (the markers carry it),
TxnOffsetCommit v5's implicit group add; a batch from a producer the coordinator never registered,
a fenced epoch, markers for an unknown producer: Kafka's codes, and other producers unaffected."""

from __future__ import annotations

from typing import Any

from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.end_txn import END_TXN
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.messages.txn_offset_commit import TXN_OFFSET_COMMIT
from kcompat.wire.messages.write_txn_markers import WRITE_TXN_MARKERS
from kcompat.wire.record_batch import read_header, split_batches
from tests.server.broker_harness import BrokerHarness, batch
from tests.server.test_transactions import add, clock, fetch, h, init, offsets, produce

__all__ = ["clock", "h"]  # the fixtures, shared with test_transactions


def produce12(h: BrokerHarness, pid: int, epoch: int, seq: int, value: bytes, partition: int = 0,
              txn_id: str | None = "tx") -> int:  # fmt: skip
    records = batch(value, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    body = {"transactional_id": txn_id, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": partition, "records": records}]}]}  # fmt: skip
    return int(h.call(PRODUCE, 12, body).responses[0].partition_responses[0].error_code)


def end5(h: BrokerHarness, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    r = h.call(END_TXN, 5, {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
                            "committed": commit})  # fmt: skip
    return int(r.error_code), r.producer_id, r.producer_epoch


def last_batch(h: BrokerHarness, partition: int) -> Any:
    resp = h.call(FETCH, 12, {"max_wait_ms": 0, "min_bytes": 1, "isolation_level": 0, "topics": [
        {"topic": "t", "partitions": [{"partition": partition, "fetch_offset": 0,
                                       "partition_max_bytes": 1 << 20}]}]})  # fmt: skip
    data = bytes(resp.responses[0].partitions[0].records)
    pos, _ = split_batches(data)[-1]
    return read_header(data, pos)


def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(h: BrokerHarness) -> None:
    pid = init(h, version=5).producer_id
    assert produce12(h, pid, 0, 0, b"c0") == 0  # no AddPartitionsToTxn: the Produce adds it
    assert produce12(h, pid, 0, 1, b"c1") == 0
    assert end5(h, pid, 0, True) == (0, pid, 1)
    marker = last_batch(h, 0)
    assert marker.is_control and (marker.producer_id, marker.producer_epoch) == (pid, 1)
    assert fetch(h, 1)[1] == [(0, b"c0"), (1, b"c1")]
    # the next transaction goes on with the new epoch (sequence 0 again) and is aborted
    assert produce12(h, pid, 0, 2, b"stale") == E.INVALID_PRODUCER_EPOCH
    assert produce12(h, pid, 1, 0, b"a0", partition=1) == 0
    assert end5(h, pid, 1, False) == (0, pid, 2)
    assert fetch(h, 1, partition=1)[1] == []
    assert end5(h, pid, 1, False) == (0, pid, 2)  # a retry of that EndTxn: the current pair
    assert end5(h, pid, 1, True) == (E.INVALID_TXN_STATE, -1, -1)
    assert end5(h, pid, 0, True) == (E.PRODUCER_FENCED, -1, -1)
    assert produce12(h, pid, 2, 0, b"c2") == 0
    assert end5(h, pid, 2, True) == (0, pid, 3)
    p, seen = fetch(h, 1)
    assert [v for _, v in seen] == [b"c0", b"c1", b"c2"] and p.last_stable_offset == p.high_watermark
    h.restart()  # the bumped epoch and the client's transaction version survive
    m = h.broker.txn_service.coordinator.txns["tx"]
    assert (m.producer_epoch, m.client_transaction_version) == (3, 2)


def test_txn_offset_commit_v5_adds_the_group_implicitly(h: BrokerHarness) -> None:
    pid = init(h, version=5).producer_id
    body = {"transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": 0,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]}  # fmt: skip

    def commit(version: int, **kw: Any) -> int:
        return int(h.call(TXN_OFFSET_COMMIT, version, {**body, **kw}).topics[0].partitions[0].error_code)

    assert commit(4) == E.INVALID_TXN_STATE  # v1 clients still need AddOffsetsToTxn first
    assert commit(5, generation_id=3, member_id="m") == E.ILLEGAL_GENERATION  # KIP-447: refused
    assert offsets(h, stable=True) == (0, -1)  # ... and nothing pending
    assert commit(5, producer_epoch=1) == E.PRODUCER_FENCED
    assert commit(5) == 0
    assert offsets(h, stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert end5(h, pid, 0, True) == (0, pid, 1)
    assert offsets(h, stable=True) == (0, 42)


def test_bad_transactional_batches_get_kafkas_codes_and_leave_others_alone(h: BrokerHarness) -> None:
    pid = init(h).producer_id  # a v1 producer with an open transaction on t-0
    assert add(h, pid, 0, [0]) == [0]
    assert produce(h, pid, 0, 0, b"open").error_code == 0
    # a producer the coordinator never registered: v1 (verification) and v2 (implicit add), the
    # coordinator's answer as Kafka's leader passes it on (the same as from a remote coordinator)
    assert produce(h, 99_999, 0, 0, b"x").error_code == E.INVALID_PRODUCER_ID_MAPPING
    assert produce12(h, 99_999, 0, 0, b"x") == E.INVALID_PRODUCER_ID_MAPPING
    assert produce12(h, 99_999, 0, 0, b"x", txn_id="nope") == E.INVALID_PRODUCER_ID_MAPPING
    assert produce12(h, pid, 0, 0, b"x", txn_id=None) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # v1: a partition never added; a fenced epoch
    assert produce(h, pid, 0, 0, b"x", partition=1).error_code == E.INVALID_TXN_STATE
    assert produce(h, pid, 1, 0, b"x").error_code == E.INVALID_PRODUCER_EPOCH
    # markers for a producer no partition knows: written (Kafka's answer), nothing else moves
    r = h.call(WRITE_TXN_MARKERS, 2, {"markers": [{"producer_id": 88_888, "producer_epoch": 0,
               "transaction_result": False, "coordinator_epoch": 0, "transaction_version": 2,
               "topics": [{"name": "t", "partition_indexes": [0]}]}]})  # fmt: skip
    assert r.markers[0].topics[0].partitions[0].error_code == 0
    p, seen = fetch(h, 1)
    assert seen == [] and p.last_stable_offset == 0 and list(p.aborted_transactions or []) == []
    # the open transaction is untouched: it commits and its record (only) is seen
    assert produce(h, pid, 0, 1, b"open2").error_code == 0
    assert end5(h, pid, 0, True)[0] == 0
    p, seen = fetch(h, 1)
    assert [v for _, v in seen] == [b"open", b"open2"] and p.last_stable_offset == p.high_watermark


# --- crash points: after the Prepare* record, and between markers ---------------------------------


def crash_between_markers(h: BrokerHarness, commit: bool, marked: int, tv: int) -> int:
    """A transaction on t-0, t-1 and the group's offsets partition, ended; the broker "dies" after
    storing Prepare* and writing `marked` of its markers (the state a kill -9 leaves), restarts."""
    from kcompat.wire.control_batch import end_txn_marker

    r = init(h, version=5)
    pid, epoch = r.producer_id, r.producer_epoch
    svc = h.broker.txn_service
    assert add(h, pid, epoch, [0, 1]) == [0, 0]
    assert produce(h, pid, epoch, 0, b"p0").error_code == 0
    assert produce(h, pid, epoch, 0, b"p1", partition=1).error_code == 0
    body = {"transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                    "committed_metadata": ""}]}]}  # fmt: skip
    assert h.call(TXN_OFFSET_COMMIT, 5, body).topics[0].partitions[0].error_code == 0
    result = svc.coordinator.end_txn("tx", pid, epoch, commit, svc.now_ms(), tv, svc.new_producer_id)
    svc.writes.store(result.records)  # Prepare* is stored ...
    assert result.markers is not None and len(result.markers.partitions) == 3
    for topic, partition in result.markers.partitions[:marked]:  # ... and only some markers written
        marker = end_txn_marker(pid, result.markers.producer_epoch, commit=commit, coordinator_epoch=0,
                                timestamp_ms=svc.now_ms())  # fmt: skip
        svc.append(topic, partition, bytearray(marker), leader_epoch=0, now_ms=svc.now_ms())
    h.restart()
    return pid


def test_restart_between_markers_completes_the_commit(h: BrokerHarness) -> None:
    for marked in (1, 2):
        pid = crash_between_markers(h, True, marked, tv=2)
        m = h.broker.txn_service.coordinator.txns["tx"]
        assert m.state.kafka_name == "CompleteCommit" and m.producer_id == pid
        for partition, value in ((0, b"p0"), (1, b"p1")):
            p, seen = fetch(h, 1, partition=partition)
            assert [v for _, v in seen][-1:] == [value] and p.last_stable_offset == p.high_watermark
        assert offsets(h, stable=True) == (0, 42)
        assert end5(h, pid, m.producer_epoch, False)[0] == 0  # the producer goes on (an empty abort)
        h.restart()


def test_restart_after_prepare_abort_or_between_its_markers_aborts(h: BrokerHarness) -> None:
    for marked in (0, 1):
        crash_between_markers(h, False, marked, tv=0)
        assert h.broker.txn_service.coordinator.txns["tx"].state.kafka_name == "CompleteAbort"
        for partition in (0, 1):
            p, seen = fetch(h, 1, partition=partition)
            assert seen == [] and p.last_stable_offset == p.high_watermark  # the LSO moved past it
        assert offsets(h, stable=True) == (0, -1)
        assert init(h, version=5).error_code == 0  # the next instance starts cleanly
