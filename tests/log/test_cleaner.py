"""Compaction: latest value per key, offsets kept, tombstones expire, crash-safe swap, reads unharmed."""

from __future__ import annotations

import os
import threading

from kcompat.log import LogCleaner, LogConfig, LogManager
from kcompat.log.cleaner import CLEANED_SUFFIX, SWAP_SUFFIX, CleanStats
from kcompat.wire.record_batch import DELETE_HORIZON_MASK, read_header, split_batches
from kcompat.wire.records import decode_batch
from tests.log.batches import batch

CFG = LogConfig(
    segment_bytes=1500,
    index_interval_bytes=200,
    cleanup_policy=("compact",),
    delete_retention_ms=1000,
    min_cleanable_dirty_ratio=0.0,
)


def open_manager(d, cfg=CFG):
    return LogManager([d], cfg, cluster_id="c", node_id=0, clock=lambda: 0)


def records(plog, start=None):
    """(offset, key, value) of every record, each batch's CRC checked."""
    data = plog.read(plog.log_start_offset if start is None else start, 1 << 30).read_bytes()
    out = []
    for pos, n in split_batches(data):
        _, recs = decode_batch(data[pos : pos + n], verify_crc=True)
        out += [(r.offset, r.key, r.value) for r in recs]
    return out


def write_history(plog, rounds=12, keys=5, compression=0):
    expected = {}
    for r in range(rounds):
        kvs = [(b"key-%d" % k, b"value-%d-%d" % (k, r)) for k in range(keys)]
        info = plog.append(batch(kvs, timestamp=r, compression=compression), leader_epoch=0, now_ms=0)
        for i, (k, v) in enumerate(kvs):
            expected[k] = (info.base_offset + i, v)
    return expected


def test_keeps_the_latest_value_of_each_key_at_its_offset(tmp_path):
    m = open_manager(tmp_path)
    plog = m.get_or_create("c", 0)
    expected = write_history(plog)
    before = records(plog)
    active_base = plog.active_segment.base_offset
    stats = LogCleaner().clean(plog, now_ms=0)
    assert stats.segments_cleaned > 0 and stats.records_removed > 0
    after = records(plog)
    sealed_after = [r for r in after if r[0] < active_base]
    # every key's latest record survives at its original offset; the active segment is untouched
    for k, (off, v) in expected.items():
        assert (off, k, v) in after
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert len({k for _, k, _ in sealed_after}) == len(sealed_after)
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)
    assert plog.log_end_offset == len(before)
    assert plog.verify() == []
    assert not [
        n for n in os.listdir(plog.directory) if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX, ".deleted"))
    ]


def test_compressed_batches_are_rebuilt_with_their_codec(tmp_path):
    m = open_manager(tmp_path)
    plog = m.get_or_create("c", 0)
    expected = write_history(plog, compression=4)
    LogCleaner().clean(plog, now_ms=0)
    data = plog.read(0, 1 << 30).read_bytes()
    assert all(read_header(data, p).compression == 4 for p, _ in split_batches(data))
    after = records(plog)
    for k, (off, v) in expected.items():
        assert (off, k, v) in after


def test_tombstones_get_a_delete_horizon_then_go(tmp_path):
    m = open_manager(tmp_path)
    plog = m.get_or_create("c", 0)
    plog.append(batch([(b"a", b"1"), (b"b", b"1")]), leader_epoch=0, now_ms=0)
    plog.append(batch([(b"a", None)]), leader_epoch=0, now_ms=0)  # delete a
    for i in range(30):
        plog.append(batch([(b"c%d" % i, b"x" * 40)]), leader_epoch=0, now_ms=0)
    cleaner = LogCleaner()
    cleaner.clean(plog, now_ms=5000)
    after = records(plog)
    assert (2, b"a", None) in after and not [r for r in after if r[1] == b"a" and r[2] is not None]
    data = plog.read(2, 100).read_bytes()
    h = read_header(data)
    assert h.attributes & DELETE_HORIZON_MASK and h.base_timestamp == 5000 + CFG.delete_retention_ms
    assert plog.tombstone_horizon_ms == 6000
    cleaner.clean(plog, now_ms=5999)
    assert (2, b"a", None) in records(plog)  # horizon not reached yet
    assert cleaner.needs_cleaning(plog, now_ms=6000)
    cleaner.clean(plog, now_ms=6000)
    assert [r for r in records(plog) if r[1] == b"a"] == []
    assert (1, b"b", b"1") in records(plog)


def test_last_batch_of_a_producer_is_kept_empty(tmp_path):
    m = open_manager(tmp_path)
    plog = m.get_or_create("c", 0)
    plog.append(
        batch([(b"k", b"old")], producer_id=3, producer_epoch=0, base_sequence=0), leader_epoch=0, now_ms=0
    )
    plog.append(batch([(b"k", b"new")]), leader_epoch=0, now_ms=0)
    for i in range(30):
        plog.append(batch([(b"f%d" % i, b"x" * 40)]), leader_epoch=0, now_ms=0)
    LogCleaner().clean(plog, now_ms=0)
    data = plog.read(0, 1 << 30).read_bytes()
    first = read_header(data)
    assert (first.base_offset, first.records_count, first.producer_id, first.base_sequence) == (0, 0, 3, 0)
    assert (1, b"k", b"new") in records(plog)


def test_slice_taken_before_compaction_stays_readable(tmp_path):
    m = open_manager(tmp_path)
    plog = m.get_or_create("c", 0)
    write_history(plog)
    s = plog.read(0, 1 << 30)
    before = s.read_bytes()
    LogCleaner().clean(plog, now_ms=0)
    assert s.read_bytes() == before
    assert records(plog, start=1)[0][0] >= 1  # an offset compacted away reads from the next one


def test_crash_leaving_cleaned_files_loses_nothing(tmp_path):
    m = open_manager(tmp_path)
    plog = m.get_or_create("c", 0)
    write_history(plog)
    before = records(plog)
    cleaner = LogCleaner()
    group = cleaner._group(list(plog.segments[:-1]), plog)[0]
    cleaner._clean_group(plog, group, {}, {}, 0, 1000, CleanStats())
    assert any(n.endswith(".log" + CLEANED_SUFFIX) for n in os.listdir(plog.directory))
    m2 = open_manager(tmp_path)  # no close: a crash
    assert records(m2.get("c", 0)) == before
    assert not any(n.endswith(CLEANED_SUFFIX) for n in os.listdir(plog.directory))


def test_crash_leaving_swap_files_completes_the_swap(tmp_path):
    m = open_manager(tmp_path)
    plog = m.get_or_create("c", 0)
    write_history(plog)
    before = records(plog)
    active_base = plog.active_segment.base_offset
    cleaner = LogCleaner()
    cleanable = list(plog.segments[:-1])
    offset_map = cleaner._build_offset_map(cleanable, 0)
    group = cleaner._group(cleanable, plog)[0]
    cleaned, _ = cleaner._clean_group(plog, group, offset_map, {}, 0, 1000, CleanStats())
    cleaned.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)  # crash right after the rename to .swap
    m2 = open_manager(tmp_path)
    plog2 = m2.get("c", 0)
    after = records(plog2)
    group_end = group[-1].read_next_offset()
    assert [r for r in after if r[0] >= group_end] == [r for r in before if r[0] >= group_end]
    in_group = [r for r in after if r[0] < group_end]
    assert len(in_group) < len([r for r in before if r[0] < group_end])
    assert all(offset_map.get(k, -1) <= o for o, k, _ in in_group)
    assert plog2.verify() == [] and plog2.log_end_offset == len(before)
    assert active_base == plog2.active_segment.base_offset


def test_appends_continue_while_cleaning(tmp_path):
    m = open_manager(tmp_path)
    plog = m.get_or_create("c", 0)
    write_history(plog, rounds=30)
    errors = []

    def clean():
        try:
            LogCleaner().clean(plog, now_ms=0)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=clean)
    t.start()
    for i in range(200):
        plog.append(batch([(b"late-%d" % i, b"v")]), leader_epoch=0, now_ms=0)
    t.join()
    assert errors == []
    after = records(plog)
    assert [k for _, k, _ in after[-200:]] == [b"late-%d" % i for i in range(200)]
    assert plog.verify() == []
