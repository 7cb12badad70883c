"""Several log dirs (log/log_dirs.py): placement, start-up checks, moving a replica as Kafka's future
replica (copy while serving, swap, every crash point) and a failed dir."""

from __future__ import annotations

import os
import shutil
import threading

import pytest

from kcompat.log import LogConfig, LogManager
from kcompat.log.errors import KafkaStorageError, LogDirNotFound, LogMoved
from kcompat.log.log_dirs import DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, suffixed_dir_name
from kcompat.log.manager import read_properties
from tests.log.batches import batch
from tests.log.test_transactions import marker, txn_batch, visible

CFG = LogConfig(segment_bytes=4000, index_interval_bytes=200)


def manager(tmp_path, n=2, cfg=CFG):
    return LogManager([tmp_path / f"d{i}" for i in range(n)], cfg, cluster_id="c", node_id=1, clock=lambda: 0)


def move(m, topic, partition, dest):
    assert m.start_move(topic, partition, str(dest)) is True
    while not m.copy_step(topic, partition):
        pass


def values(plog, start=0):
    return visible(plog, start, committed=False)


def test_new_partitions_go_to_the_dir_with_the_fewest(tmp_path):
    m = manager(tmp_path, 3)
    for p in range(6):
        m.get_or_create("t", p)
    counts = {d: sum(1 for _ in d.glob("t-*")) for d in m.log_dirs}
    assert sorted(counts.values()) == [2, 2, 2]
    m.delete("t", 0)
    first = m.dir_of("t", 1)
    m.get_or_create("u", 0)  # where t-0 was: that dir has one fewer now
    assert m.dir_of("u", 0) != first or counts[first] == 2
    m.close()
    again = manager(tmp_path, 3)
    assert again.partitions() == sorted([("t", p) for p in range(1, 6)] + [("u", 0)])
    again.close()


def test_a_log_in_two_dirs_and_a_shared_directory_id_are_refused(tmp_path):
    m = manager(tmp_path)
    m.get_or_create("t", 0)
    m.close()
    here = m.dir_of("t", 0)
    other = next(d for d in m.log_dirs if d != here)
    shutil.copytree(here / "t-0", other / "t-0")
    with pytest.raises(KafkaStorageError, match="t-0 has a log in both"):
        manager(tmp_path)
    shutil.rmtree(other / "t-0")
    shutil.copy(here / "meta.properties", other / "meta.properties")
    with pytest.raises(KafkaStorageError, match=r"same directory\.id"):
        manager(tmp_path)


def test_move_copies_while_appends_go_on_then_swaps(tmp_path):
    m = manager(tmp_path)
    src = m.get_or_create("t", 0)
    for _ in range(30):
        src.append(batch(5), leader_epoch=3, now_ms=0)
    src.delete_records_before(12)
    dest = next(d for d in m.log_dirs if d != m.dir_of("t", 0))
    assert m.start_move("t", 0, str(dest)) is True
    assert m.start_move("t", 0, str(dest)) is True  # the same move, asked again
    assert m.future_of("t", 0).directory.name.endswith(FUTURE_DIR_SUFFIX)
    steps = 0
    while not m.copy_step("t", 0):
        src.append(batch(2), leader_epoch=4, now_ms=0)  # the source serves on meanwhile
        steps += 1
    moved = m.get("t", 0)
    assert moved is not src and m.dir_of("t", 0) == dest and m.future_of("t", 0) is None
    assert moved.directory == dest / "t-0"
    assert (moved.log_start_offset, moved.log_end_offset) == (12, src.log_end_offset)
    assert values(moved, 12) == values(src, 12)
    assert moved.epoch_end_offset(3) == src.epoch_end_offset(3)
    assert not any(n.endswith(DELETE_DIR_SUFFIX) for n in os.listdir(src.directory.parent.parent))
    with pytest.raises(LogMoved):  # a producer that held the old log: it takes the new one
        src.append(batch(1), leader_epoch=4, now_ms=0)
    moved.append(batch(1), leader_epoch=4, now_ms=0)
    assert m.start_move("t", 0, str(dest)) is False  # there already
    m.close()
    again = manager(tmp_path)
    assert again.dir_of("t", 0) == dest and again.get("t", 0).log_end_offset == moved.log_end_offset
    assert again.get("t", 0).log_start_offset == 12


def test_a_move_keeps_transactions_aborted(tmp_path):
    m = manager(tmp_path)
    src = m.get_or_create("t", 0)
    src.append(txn_batch(7, 0), leader_epoch=0, now_ms=0)
    src.append(marker(7, 0, commit=False), leader_epoch=0, now_ms=0)
    src.append(txn_batch(8, 0), leader_epoch=0, now_ms=0)
    src.append(marker(8, 0, commit=True), leader_epoch=0, now_ms=0)
    move(m, "t", 0, next(d for d in m.log_dirs if d != m.dir_of("t", 0)))
    moved = m.get("t", 0)
    assert visible(moved, committed=True) == visible(src, committed=True) == [(3, b"p8-0"), (4, b"p8-1")]


def test_a_compacted_log_with_gaps_moves(tmp_path):
    cfg = LogConfig(segment_bytes=300, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    m = manager(tmp_path, cfg=cfg)
    src = m.get_or_create("c", 0, cfg)
    for i in range(40):
        src.append(batch([(b"k%d" % (i % 3), b"v%d" % i)]), leader_epoch=0, now_ms=0)
    src.roll(0)
    assert m.run_cleaner(10**12) > 0
    assert len(values(src)) < 40
    move(m, "c", 0, next(d for d in m.log_dirs if d != m.dir_of("c", 0)))
    assert values(m.get("c", 0)) == values(src)


def test_bad_moves(tmp_path):
    m = manager(tmp_path)
    m.get_or_create("t", 0)
    with pytest.raises(LogDirNotFound):
        m.start_move("t", 0, str(tmp_path / "elsewhere"))
    assert m.start_move("nope", 0, str(m.log_dirs[0])) is None
    m.fail_dir(m.log_dirs[1], "test")
    with pytest.raises(KafkaStorageError, match="offline"):
        m.start_move("t", 0, str(m.log_dirs[1]))


@pytest.mark.parametrize("crash", ["copying", "between-the-renames", "after-the-swap"])
def test_a_crash_anywhere_in_a_move_loses_nothing(tmp_path, crash):
    m = manager(tmp_path, cfg=LogConfig(segment_bytes=300_000))
    src = m.get_or_create("t", 0)
    for _ in range(20):
        src.append(batch(3, value_size=20_000), leader_epoch=1, now_ms=0)  # more than one copy step
    expected = values(src)
    here = m.dir_of("t", 0)
    dest = next(d for d in m.log_dirs if d != here)
    assert m.start_move("t", 0, str(dest))
    if crash == "copying":
        assert m.copy_step("t", 0) is False
    else:
        move(m, "t", 0, dest)
        # The source renamed for deletion but not removed yet ...
        shutil.copytree(dest / "t-0", here / suffixed_dir_name("t", 0, DELETE_DIR_SUFFIX))
        if crash == "between-the-renames":  # ... and the future not renamed yet
            os.rename(dest / "t-0", dest / suffixed_dir_name("t", 0, FUTURE_DIR_SUFFIX))
    # No close: what a kill -9 leaves (the page cache survives it).
    again = manager(tmp_path, cfg=LogConfig(segment_bytes=300_000))
    assert values(again.get("t", 0)) == expected
    if crash == "copying":  # the unfinished copy is removed; the move starts over
        assert again.dir_of("t", 0) == here and again.restarted_moves == {("t", 0): dest}
        again.restart_moves()
        while not again.copy_step("t", 0):
            pass
    assert again.dir_of("t", 0) == dest and values(again.get("t", 0)) == expected
    assert [n for d in again.log_dirs for n in os.listdir(d) if n.startswith("t-0.")] == []


def test_a_failed_dir_goes_offline_and_the_others_serve(tmp_path):
    m = manager(tmp_path)
    a, b = m.get_or_create("t", 0), m.get_or_create("t", 1)
    bad = m.dir_of("t", 0)
    assert m.dir_of("t", 1) != bad
    assert m.fail_dir(bad, "EIO") == [("t", 0)]
    assert m.get("t", 0) is None and bad in m.offline_dirs
    with pytest.raises(KafkaStorageError, match="offline log dir"):
        m.get_or_create("t", 0)  # never made again, empty, in another dir
    b.append(batch(1), leader_epoch=0, now_ms=0)
    for p in range(2, 5):  # new partitions go to the dirs still online
        assert m.dir_of(*("t", p)) is None
        m.get_or_create("t", p)
        assert m.dir_of("t", p) != bad
    m.close()
    assert a.log_end_offset == 0


def test_a_dir_that_cannot_be_read_at_start_is_offline(tmp_path):
    m = manager(tmp_path)
    m.get_or_create("t", 0)
    m.get_or_create("t", 1)
    m.close()
    broken = m.dir_of("t", 0)
    (broken / "meta.properties").unlink()
    (broken / "meta.properties").mkdir()  # reading it fails with an OSError, as a failed disk does
    again = manager(tmp_path)
    assert broken in again.offline_dirs and again.get("t", 1) is not None
    assert again.held_offline("t", 0) and not again.held_offline("t", 1)  # t-0 may be in the failed dir
    with pytest.raises(KafkaStorageError):
        again.get_or_create("t", 0)
    assert again.get_or_create("new", 0).directory.parent != broken


def test_every_dir_offline_at_start_is_one_error(tmp_path):
    for i in range(2):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / "meta.properties").mkdir()
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        manager(tmp_path)


def test_concurrent_appends_during_the_swap_all_land(tmp_path):
    m = manager(tmp_path, cfg=LogConfig(segment_bytes=64_000))
    src = m.get_or_create("t", 0)
    for _ in range(200):
        src.append(batch(2, value_size=200), leader_epoch=0, now_ms=0)
    dest = next(d for d in m.log_dirs if d != m.dir_of("t", 0))
    acked: list[int] = []
    stop = threading.Event()

    def produce():
        while not stop.is_set() and len(acked) < 5000:
            plog = m.get("t", 0)
            try:
                acked.append(plog.append(batch(1), leader_epoch=0, now_ms=0).base_offset)
            except LogMoved:
                continue

    t = threading.Thread(target=produce)
    t.start()
    try:
        move(m, "t", 0, dest)
    finally:
        stop.set()
        t.join()
    moved = m.get("t", 0)
    assert read_properties(dest / "meta.properties")["directory.id"]
    offsets = {o for o, _ in values(moved)}
    assert set(acked) <= offsets and len(acked) == len(set(acked))
    assert moved.log_end_offset == 400 + len(acked)
