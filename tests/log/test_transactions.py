"""Transactions in the log: markers, the LSO, `.txnindex` (Kafka's 34-byte AbortedTxn), read_committed
reads, and the index through roll, restart, lost index files, truncation, retention and compaction."""

from __future__ import annotations

import os
import struct

from kcompat.log import LogCleaner, LogConfig, LogManager
from kcompat.log.txn_index import AbortedTxn, decode_entries
from kcompat.wire.control_batch import end_txn_marker
from kcompat.wire.record_batch import read_header, split_batches
from kcompat.wire.records import decode_batch
from tests.log.batches import batch

TXN = 0x10
CONTROL = 0x20
CFG = LogConfig(segment_bytes=1500, index_interval_bytes=200)


def open_manager(d, cfg=CFG):
    return LogManager([d], cfg, cluster_id="c", node_id=0, clock=lambda: 0)


def marker(pid, epoch, *, commit, coordinator_epoch=0):
    """A control batch built by hand from the spec (key: version, type; value: version, coordinator epoch)."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return batch([(key, value)], producer_id=pid, producer_epoch=epoch, attributes=TXN | CONTROL)


def txn_batch(pid, seq, n=2, epoch=0, keys=None):
    recs = [
        (k, b"p%d-%d" % (pid, seq + i))
        for i, k in enumerate(keys or [b"k%d-%d" % (pid, seq + i) for i in range(n)])
    ]
    return batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, attributes=TXN)


def txn_files(plog):
    return sorted(n for n in os.listdir(plog.directory) if n.endswith(".txnindex"))


def visible(plog, start=0, *, committed):
    """(offset, value) a client sees: below the LSO and without aborted batches under read_committed."""
    s = plog.read(start, 1 << 30, max_offset=plog.last_stable_offset if committed else None)
    data = s.read_bytes()
    aborted = plog.aborted_transactions(start, plog.last_stable_offset) if committed else []
    out = []
    for pos, n in split_batches(data):
        h = read_header(data, pos)
        if h.is_control:
            continue
        if committed and any(
            t.producer_id == h.producer_id and t.first_offset <= h.base_offset < t.last_offset
            for t in aborted
        ):
            continue
        _, recs = decode_batch(data[pos : pos + n], verify_crc=True)
        out += [(r.offset, r.value) for r in recs]
    return out


def test_marker_builder_matches_the_spec_layout():
    built = end_txn_marker(7, 3, commit=True, coordinator_epoch=5, timestamp_ms=1_000)
    expected = batch(
        [(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5))],
        producer_id=7,
        producer_epoch=3,
        attributes=0x30,
    )
    assert built == expected


def test_aborted_txn_entry_is_kafkas_34_byte_layout():
    t = AbortedTxn(producer_id=0x0102030405060708, first_offset=10, last_offset=20, last_stable_offset=21)
    raw = t.encode()
    assert len(raw) == 34
    # version int16, producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64
    assert raw == bytes.fromhex(f"0000 0102030405060708 {10:016x} {20:016x} {21:016x}")
    assert decode_entries(raw + raw[:10]) == [t]  # a torn tail entry is ignored


def test_lso_stops_at_the_open_transaction_and_abort_writes_the_index(tmp_path):
    plog = open_manager(tmp_path).get_or_create("t", 0)
    plog.append(batch(1), leader_epoch=0, now_ms=0)  # offset 0, plain
    plog.append(txn_batch(5, 0), leader_epoch=0, now_ms=0)  # 1-2, producer 5 (will abort)
    plog.append(txn_batch(6, 0), leader_epoch=0, now_ms=0)  # 3-4, producer 6 (will commit)
    assert plog.last_stable_offset == 1
    assert visible(plog, committed=True) == [(0, b"v" * 10)]
    assert len(visible(plog, committed=False)) == 5
    info = plog.append(marker(5, 0, commit=False), leader_epoch=0, now_ms=0)  # 5
    assert info.base_offset == 5
    assert plog.last_stable_offset == 3  # producer 6 is still open
    assert txn_files(plog) == ["00000000000000000000.txnindex"]
    data = (plog.directory / txn_files(plog)[0]).read_bytes()
    assert decode_entries(data) == [AbortedTxn(5, 1, 5, 3)]
    plog.append(marker(6, 0, commit=True), leader_epoch=0, now_ms=0)  # 6
    assert plog.last_stable_offset == plog.log_end_offset == 7
    assert visible(plog, committed=True) == [(0, b"v" * 10), (3, b"p6-0"), (4, b"p6-1")]
    assert plog.aborted_transactions(0, 7) == [AbortedTxn(5, 1, 5, 3)]
    assert plog.aborted_transactions(6, 7) == []  # the abort ended before the fetch offset


def test_read_committed_cap_is_exact_at_the_open_transaction(tmp_path):
    plog = open_manager(tmp_path).get_or_create("t", 0)
    for _ in range(30):  # several segments of plain data
        plog.append(batch(3), leader_epoch=0, now_ms=0)
    first_txn = plog.log_end_offset
    plog.append(txn_batch(9, 0), leader_epoch=0, now_ms=0)
    for _ in range(5):
        plog.append(batch(3), leader_epoch=0, now_ms=0)
    assert len(plog.segments) > 2
    assert plog.last_stable_offset == first_txn
    seen = visible(plog, committed=True)
    assert seen[-1][0] == first_txn - 1 and len(seen) == first_txn
    assert plog.read(first_txn, 1 << 20, max_offset=first_txn).pieces == ()
    plog.append(marker(9, 0, commit=True), leader_epoch=0, now_ms=0)
    assert len(visible(plog, committed=True)) == first_txn + 2 + 15


def _aborting_history(plog, rounds=8):
    """Each round: producer 100+r aborts a transaction; producer 200 commits; plain data between."""
    aborted_offsets, committed = set(), set()
    for r in range(rounds):
        pid = 100 + r
        a = plog.append(txn_batch(pid, 0, n=3), leader_epoch=0, now_ms=0)
        aborted_offsets.update(range(a.base_offset, a.last_offset + 1))
        c = plog.append(txn_batch(200, 3 * r, n=3), leader_epoch=0, now_ms=0)
        committed.update(range(c.base_offset, c.last_offset + 1))
        plog.append(marker(pid, 0, commit=False), leader_epoch=0, now_ms=0)
        plog.append(marker(200, 0, commit=True), leader_epoch=0, now_ms=0)
        p = plog.append(batch(2), leader_epoch=0, now_ms=0)
        committed.update(range(p.base_offset, p.last_offset + 1))
    return aborted_offsets, committed


def _entries(plog):
    return [t for s in plog.segments for t in s.txn_index.entries]


def test_index_survives_roll_restart_and_rebuilds_when_lost(tmp_path):
    m = open_manager(tmp_path)
    plog = m.get_or_create("t", 0)
    aborted, committed = _aborting_history(plog)
    assert not aborted & committed
    assert len(plog.segments) > 2 and len(txn_files(plog)) > 1  # entries live in several segments
    entries = _entries(plog)
    assert len(entries) == 8
    assert {o for o, _ in visible(plog, committed=True)} == committed
    m.close()
    plog2 = open_manager(tmp_path).get_or_create("t", 0)
    assert _entries(plog2) == entries
    # A crash that lost the tail's index files (never flushed): the replay from the last producer
    # snapshot rebuilds the entries of the segments after it.
    for name in txn_files(plog2)[-1:]:
        os.unlink(plog2.directory / name)
    for name in os.listdir(plog2.directory):
        if name.endswith(".snapshot"):
            os.unlink(plog2.directory / name)  # no snapshot: replay from the start
    plog3 = open_manager(tmp_path).get_or_create("t", 0)
    assert _entries(plog3) == entries
    assert {o for o, _ in visible(plog3, committed=True)} == committed


def test_truncation_drops_entries_of_cut_markers(tmp_path):
    plog = open_manager(tmp_path).get_or_create("t", 0)
    _aborting_history(plog, rounds=3)
    last = _entries(plog)[-1]
    plog.truncate_to(last.last_offset)
    assert [t.last_offset for t in _entries(plog)] == [t.last_offset for t in _entries(plog)[:2]]
    assert len(_entries(plog)) == 2
    assert plog.last_stable_offset == last.first_offset  # that transaction is open again


def test_compaction_drops_aborted_records_and_keeps_markers_and_index(tmp_path):
    cfg = LogConfig(
        segment_bytes=1500,
        index_interval_bytes=200,
        cleanup_policy=("compact",),
        min_cleanable_dirty_ratio=0.0,
    )
    plog = open_manager(tmp_path, cfg).get_or_create("t", 0)
    # The aborted write of key "k" is newer than its committed one: it must not supersede it.
    plog.append(txn_batch(1, 0, keys=[b"k"]), leader_epoch=0, now_ms=0)
    plog.append(marker(1, 0, commit=True), leader_epoch=0, now_ms=0)
    plog.append(txn_batch(2, 0, keys=[b"k"]), leader_epoch=0, now_ms=0)
    plog.append(marker(2, 0, commit=False), leader_epoch=0, now_ms=0)
    for _ in range(30):
        plog.append(batch(3), leader_epoch=0, now_ms=0)
    before_entries = _entries(plog)
    stats = LogCleaner().clean(plog, now_ms=0)
    assert stats.segments_cleaned > 0
    assert (0, b"p1-0") in visible(plog, committed=True)
    assert not any(v == b"p2-0" for _, v in visible(plog, committed=False))  # aborted data is gone
    assert _entries(plog) == before_entries
    data = plog.read(0, 1 << 30).read_bytes()
    controls = [read_header(data, p) for p, _ in split_batches(data) if read_header(data, p).is_control]
    assert [h.base_offset for h in controls] == [1, 3]


def test_compaction_removes_markers_of_emptied_transactions_after_delete_retention(tmp_path):
    """Kafka's LogCleaner: a marker whose transaction has no batch left gets a delete horizon in one
    pass and goes (with its `.txnindex` entry) in a pass after it; markers of transactions with
    batches stay. read_committed sees the same latest records after every pass, and after a restart that
    rebuilds producer state from the log alone (no snapshot) no transaction is left open."""
    cfg = LogConfig(segment_bytes=1500, index_interval_bytes=200, cleanup_policy=("compact",),
                    min_cleanable_dirty_ratio=0.0, delete_retention_ms=1000)  # fmt: skip
    m = open_manager(tmp_path, cfg)
    plog = m.get_or_create("t", 0)
    history = [
        txn_batch(1, 0, keys=[b"a"]), marker(1, 0, commit=True),  # 0, 1: "a" is overwritten at 8
        txn_batch(2, 0, keys=[b"k"]), marker(2, 0, commit=False),  # 2, 3: aborted
        txn_batch(1, 1, keys=[b"b"]), marker(1, 0, commit=True),  # 4, 5
        txn_batch(2, 1, keys=[b"c"]), marker(2, 0, commit=True),  # 6, 7
        batch([(b"a", b"new")]),  # 8
    ]  # fmt: skip
    for b in history:
        plog.append(b, leader_epoch=0, now_ms=0)
    for i in range(30):
        plog.append(batch([(b"f%d" % i, b"x" * 40)]), leader_epoch=0, now_ms=0)
    before = visible(plog, committed=True)
    assert [v for o, v in before if o < 9] == [b"p1-0", b"p1-1", b"p2-1", b"new"]
    expected = [r for r in before if r[0] != 0]  # compaction drops only the overwritten "a"

    def controls() -> list[tuple[int, bool]]:
        data = plog.read(0, 1 << 30).read_bytes()
        hs = [read_header(data, p) for p, _ in split_batches(data)]
        return [(h.base_offset, bool(h.attributes & 0x40)) for h in hs if h.is_control]  # 0x40: horizon

    cleaner = LogCleaner()
    # the overwritten and the aborted batches go; their (now empty) transactions' markers get a horizon
    cleaner.clean(plog, now_ms=10)
    assert visible(plog, committed=True) == expected
    assert controls() == [(1, True), (3, True), (5, False), (7, False)]
    assert [(t.producer_id, t.last_offset) for t in _entries(plog)] == [(2, 3)]
    assert plog.tombstone_horizon_ms == 1010 and not cleaner.needs_cleaning(plog, now_ms=1009)
    cleaner.clean(plog, now_ms=1009)  # before the horizon: nothing moves
    assert controls() == [(1, True), (3, True), (5, False), (7, False)]
    assert visible(plog, committed=True) == expected
    assert cleaner.needs_cleaning(plog, now_ms=1010)
    cleaner.clean(plog, now_ms=1010)
    assert controls() == [(5, False), (7, False)]
    assert _entries(plog) == []
    assert visible(plog, committed=True) == expected
    m.close()
    for name in os.listdir(plog.directory):
        if name.endswith(".snapshot"):
            os.unlink(plog.directory / name)
    plog2 = open_manager(tmp_path, cfg).get_or_create("t", 0)
    assert plog2.last_stable_offset == plog2.high_watermark == plog2.log_end_offset
    assert visible(plog2, committed=True) == expected
