"""The transaction coordinator: Kafka's state table, its decisions and errors, and `__transaction_state`
records (checked against bytes laid out by hand from TransactionLogKey/Value v0)."""

from __future__ import annotations

import itertools
import struct

import pytest

from kcompat.coordinator.transaction import TransactionCoordinator, TxnConfig
from kcompat.coordinator.transaction.log_records import decode, encode_key, encode_value
from kcompat.coordinator.transaction.state import (
    VALID_PREVIOUS,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
)
from kcompat.wire.error_codes import ErrorCode as E

S = TransactionState


def test_state_ids_are_kafkas():
    assert [(s.kafka_name, int(s)) for s in S] == [
        ("Empty", 0), ("Ongoing", 1), ("PrepareCommit", 2), ("PrepareAbort", 3),
        ("CompleteCommit", 4), ("CompleteAbort", 5), ("Dead", 6), ("PrepareEpochFence", 7),
    ]  # fmt: skip


@pytest.mark.parametrize(("frm", "to"), list(itertools.product(S, S)))
def test_transition_table(frm, to):
    m = TransactionMetadata("t", 1, 0, 1000, state=frm)
    allowed = {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }[to]
    assert VALID_PREVIOUS[to] == allowed
    if frm in allowed:
        m.transition(to, 5)
        assert m.state is to and m.txn_last_update_ms == 5
    else:
        with pytest.raises(IllegalTransition):
            m.transition(to, 5)


def test_log_record_bytes_are_kafkas_v0_layout():
    m = TransactionMetadata(
        "tx", 5, 1, 60000, S.ONGOING, {("a", 3), ("a", 0)}, txn_start_ms=10, txn_last_update_ms=20
    )
    assert encode_key("tx") == struct.pack(">hh", 0, 2) + b"tx"
    expected = (
        struct.pack(">hqhib", 0, 5, 1, 60000, 1)  # version, producerId, epoch, timeout, status
        + struct.pack(">i", 1) + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 3)  # [{a,[0,3]}]
        + struct.pack(">qq", 20, 10)  # last update, start
    )  # fmt: skip
    assert encode_value(m, 0) == expected
    assert decode(encode_key("tx"), expected) == ("tx", m)
    empty = TransactionMetadata("tx", 5, 1, 60000)
    assert encode_value(empty, 0)[17:21] == struct.pack(">i", -1)  # Empty: TransactionPartitions is null
    assert decode(encode_key("tx"), None) == ("tx", None)


def test_log_record_v1_layout_carries_the_tv2_tagged_fields():
    """v1 (flexible): compact strings/arrays (+1 lengths), then the tagged fields in tag order:
    PreviousProducerId (0), NextProducerId (1), ClientTransactionVersion (2); defaults left out."""
    m = TransactionMetadata("tx", 5, 1, 60000, S.ONGOING, {("a", 3)}, txn_start_ms=10, txn_last_update_ms=20,
                            client_transaction_version=2, previous_producer_id=4)  # fmt: skip
    expected = (
        struct.pack(">hqhib", 1, 5, 1, 60000, 1)
        + bytes([2, 2]) + b"a" + bytes([2]) + struct.pack(">i", 3) + bytes([0])  # [{a,[3]}], no tags
        + struct.pack(">qq", 20, 10)
        + bytes([2, 0, 8]) + struct.pack(">q", 4) + bytes([2, 2]) + struct.pack(">h", 2)
    )  # fmt: skip
    assert encode_value(m) == expected
    assert decode(encode_key("tx"), expected) == ("tx", m)


def make(max_timeout=900_000, expiration=10_000):
    ids = itertools.count(1000)
    return TransactionCoordinator(
        TxnConfig(max_timeout_ms=max_timeout, id_expiration_ms=expiration)
    ), lambda: next(ids)


def test_commit_round_and_retries():
    c, ids = make()
    r = c.init_producer_id("t", 60000, 0, ids)
    assert (r.error, r.producer_id, r.producer_epoch, len(r.records)) == (E.NONE, 1000, 0, 1)
    assert c.end_txn("t", 1000, 0, True, 1).error == E.INVALID_TXN_STATE  # no transaction
    r = c.add_partitions("t", 1000, 0, [("a", 0), ("a", 1)], 2)
    assert r.error == E.NONE and c.txns["t"].state is S.ONGOING and c.txns["t"].txn_start_ms == 2
    assert c.add_partitions("t", 1000, 0, [("a", 0)], 3).records == []  # already in: nothing to write
    assert c.in_transaction(1000, 0, ("a", 1)) == E.NONE
    assert c.in_transaction(1000, 0, ("b", 0)) == E.INVALID_TXN_STATE
    r = c.end_txn("t", 1000, 0, True, 4)
    assert r.error == E.NONE and r.markers is not None and r.markers.commit
    assert r.markers.partitions == (("a", 0), ("a", 1))
    assert c.add_partitions("t", 1000, 0, [("a", 2)], 5).error == E.CONCURRENT_TRANSACTIONS
    assert c.init_producer_id("t", 60000, 5, ids).error == E.CONCURRENT_TRANSACTIONS
    assert c.end_txn("t", 1000, 0, True, 5).error == E.CONCURRENT_TRANSACTIONS
    assert c.end_txn("t", 1000, 0, False, 5).error == E.INVALID_TXN_STATE
    done = c.complete(r.markers, 6)
    assert c.txns["t"].state is S.COMPLETE_COMMIT and c.txns["t"].partitions == set() and done.records
    assert c.end_txn("t", 1000, 0, True, 7).error == E.NONE  # a retry of a completed commit
    assert c.end_txn("t", 1000, 0, False, 7).error == E.INVALID_TXN_STATE


def test_errors_for_wrong_producer_epoch_and_timeout():
    c, ids = make(max_timeout=1000)
    assert c.init_producer_id("t", 1001, 0, ids).error == E.INVALID_TRANSACTION_TIMEOUT
    assert c.init_producer_id("t", 0, 0, ids).error == E.INVALID_TRANSACTION_TIMEOUT
    c.init_producer_id("t", 1000, 0, ids)
    assert c.add_partitions("nope", 1000, 0, [("a", 0)], 1).error == E.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("t", 999, 0, [("a", 0)], 1).error == E.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("t", 1000, 1, [("a", 0)], 1).error == E.PRODUCER_FENCED


def test_new_instance_fences_and_aborts_the_open_transaction():
    c, ids = make()
    c.init_producer_id("t", 60000, 0, ids)
    c.add_partitions("t", 1000, 0, [("a", 0)], 1)
    r = c.init_producer_id("t", 60000, 2, ids)  # a second instance
    assert r.error == E.CONCURRENT_TRANSACTIONS
    assert r.markers is not None and not r.markers.commit and r.markers.producer_epoch == 1
    assert c.txns["t"].state is S.PREPARE_ABORT
    assert c.add_partitions("t", 1000, 0, [("a", 1)], 3).error == E.PRODUCER_FENCED  # the old instance
    assert c.in_transaction(1000, 0, ("a", 0)) == E.INVALID_PRODUCER_EPOCH
    c.complete(r.markers, 4)
    r2 = c.init_producer_id("t", 60000, 5, ids)  # the retry
    assert (r2.error, r2.producer_id, r2.producer_epoch) == (E.NONE, 1000, 2)
    assert c.init_producer_id("t", 60000, 6, ids, 1000, 0).error == E.PRODUCER_FENCED  # KIP-360, stale


def test_timeout_aborts_and_fences_then_ids_expire():
    c, ids = make(expiration=10_000)
    c.init_producer_id("t", 1000, 0, ids)
    c.add_partitions("t", 1000, 0, [("a", 0)], 100)
    assert c.abort_timed_out(1100, ids) == []
    (r,) = c.abort_timed_out(1101, ids)
    assert r.markers is not None and not r.markers.commit and r.producer_epoch == 1
    assert c.end_txn("t", 1000, 0, True, 1102).error == E.PRODUCER_FENCED
    c.complete(r.markers, 1103)
    assert c.expire(1103 + 10_000) == []
    (tomb,) = c.expire(1104 + 10_000)
    assert tomb[1:] == (encode_key("t"), None) and "t" not in c.txns


def test_replay_restores_state_and_pending_markers():
    c, ids = make()
    records = []
    records += c.init_producer_id("t", 60000, 0, ids).records
    records += c.add_partitions("t", 1000, 0, [("a", 0)], 1).records
    r = c.end_txn("t", 1000, 0, False, 2)
    records += r.records
    c2, _ = make()
    for _, k, v in records:
        c2.replay(k, v)
    assert c2.txns["t"].state is S.PREPARE_ABORT
    assert c2.pending_markers() == [r.markers]
    assert c2.transactional_id_of(1000) == "t"


# --- transactions v2 (KIP-890 part 2) ----------------------------------------------------------


def tv2_round(c, ids, epoch, pid=1000, commit=True, now=10):
    assert c.add_partitions("t", pid, epoch, [("a", 0)], now, client_transaction_version=2).error == E.NONE
    r = c.end_txn("t", pid, epoch, commit, now + 1, client_transaction_version=2, new_producer_id=ids)
    assert r.error == E.NONE and r.markers is not None
    c.complete(r.markers, now + 2)
    return r


def test_tv2_end_txn_bumps_the_epoch_and_the_markers_carry_it():
    c, ids = make()
    c.init_producer_id("t", 60000, 0, ids)
    r = tv2_round(c, ids, 0)
    assert (r.producer_id, r.producer_epoch, r.markers.producer_epoch) == (1000, 1, 1)
    m = c.txns["t"]
    assert (m.state, m.producer_epoch, m.client_transaction_version) == (S.COMPLETE_COMMIT, 1, 2)
    assert decode(*r.records[0][1:])[1].client_transaction_version == 2  # stored in the record
    # a retry of that EndTxn (the epoch before the bump) gets the current pair; the new epoch goes on
    assert (c.end_txn("t", 1000, 0, True, 20, 2, ids).error, c.txns["t"].producer_epoch) == (E.NONE, 1)
    assert c.end_txn("t", 1000, 0, False, 20, 2, ids).error == E.INVALID_TXN_STATE
    assert c.add_partitions("t", 1000, 0, [("a", 0)], 21, 2).error == E.PRODUCER_FENCED  # the old epoch
    r = tv2_round(c, ids, 1, commit=False, now=30)
    assert (r.producer_epoch, r.markers.commit, c.txns["t"].state) == (2, False, S.COMPLETE_ABORT)
    assert c.end_txn("t", 1000, 0, True, 40, 2, ids).error == E.PRODUCER_FENCED  # two bumps ago


def test_tv2_abort_with_nothing_added_bumps_and_marks_nothing():
    c, ids = make()
    c.init_producer_id("t", 60000, 0, ids)
    r = c.end_txn("t", 1000, 0, False, 5, 2, ids)
    assert (r.error, r.producer_epoch, r.markers.partitions) == (E.NONE, 1, ())
    c.complete(r.markers, 6)
    assert c.end_txn("t", 1000, 1, True, 7, 2, ids).error == E.INVALID_TXN_STATE  # commit of nothing


def test_tv2_epoch_exhausted_takes_a_new_producer_id_after_the_markers():
    c, ids = make()
    c.init_producer_id("t", 60000, 0, ids)
    c.txns["t"].producer_epoch = 32766  # Short.MaxValue - 1
    c.add_partitions("t", 1000, 32766, [("a", 0)], 1, 2)
    r = c.end_txn("t", 1000, 32766, True, 2, 2, ids)
    assert (r.producer_id, r.producer_epoch) == (1001, 0)  # what EndTxn v5 answers
    assert (r.markers.producer_id, r.markers.producer_epoch) == (1000, 32767)  # what the markers carry
    assert c.transactional_id_of(1000) == "t" and c.in_transaction(1000, 32766, ("a", 0)) != E.NONE
    c.complete(r.markers, 3)
    m = c.txns["t"]
    assert (m.producer_id, m.producer_epoch, m.previous_producer_id) == (1001, 0, 1000)
    assert c.transactional_id_of(1001) == "t" and c.transactional_id_of(1000) is None
    assert c.end_txn("t", 1000, 32766, True, 4, 2, ids).producer_id == 1001  # the retry names the old id
    tv2_round(c, ids, 0, pid=1001, now=5)
    c2, _ = make()  # the new id survives a replay
    for rec in c.txns.values():
        c2.replay(*c._record(rec)[1:])
    assert c2.txns["t"].producer_id == 1001 and c2.txns["t"].previous_producer_id == 1000


def test_completion_is_completes_record_with_the_state_left_pending():
    """Cluster mode writes the Complete* record from `completion` and moves the state with
    `complete` once it is replicated: meanwhile the id answers CONCURRENT_TRANSACTIONS."""
    c, ids = make()
    c.init_producer_id("t", 60000, 0, ids)
    c.txns["t"].producer_epoch = 32766  # the commit's bump takes a new producer id too
    c.add_partitions("t", 1000, 32766, [("a", 0)], 1, 2)
    r = c.end_txn("t", 1000, 32766, True, 2, 2, ids)
    pending = c.completion(r.markers, 3)
    m = c.txns["t"]
    assert (m.state, m.producer_id, m.partitions) == (S.PREPARE_COMMIT, 1000, {("a", 0)})
    assert c.transactional_id_of(1000) == "t" and c.transactional_id_of(1001) is None
    assert c.add_partitions("t", 1001, 0, [("a", 0)], 3, 2).error == E.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("t", 1000, 32767, [("a", 0)], 3, 2).error == E.CONCURRENT_TRANSACTIONS
    done = c.complete(r.markers, 3)
    assert pending.records == done.records and (pending.producer_id, pending.producer_epoch) == (1001, 0)
    assert c.txns["t"].state is S.COMPLETE_COMMIT and c.transactional_id_of(1001) == "t"
    assert c.completion(r.markers, 4).records == []  # completed: nothing more to write
