"""Kafka's text checkpoint files and the leader epoch cache."""

from __future__ import annotations

from kcompat.log.checkpoints import read_offsets, write_offsets
from kcompat.log.leader_epoch import LeaderEpochCache


def test_offset_checkpoint_golden_text(tmp_path):
    p = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets(p, {("orders", 1): 57, ("orders", 0): 1200, ("__consumer_offsets", 3): 0})
    assert p.read_text() == "0\n3\n__consumer_offsets 3 0\norders 0 1200\norders 1 57\n"
    assert read_offsets(p) == {("orders", 1): 57, ("orders", 0): 1200, ("__consumer_offsets", 3): 0}


def test_checkpoint_written_by_kafka_is_read(tmp_path):
    p = tmp_path / "log-start-offset-checkpoint"
    p.write_text("0\n2\nmy-topic 0 10\nmy-topic 1 0\n")
    assert read_offsets(p) == {("my-topic", 0): 10, ("my-topic", 1): 0}


def test_missing_or_malformed_checkpoint_reads_as_none(tmp_path):
    assert read_offsets(tmp_path / "nope") is None
    bad = tmp_path / "bad"
    for text in ["1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt zero 1\n", "garbage", "0\n1\nt 0\n"]:
        bad.write_text(text)
        assert read_offsets(bad) is None, text


def test_leader_epoch_checkpoint_golden_text(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(3, 1200)
    cache.assign(3, 1300)  # not newer: ignored
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 1200\n"
    assert LeaderEpochCache(tmp_path).entries() == [(0, 0), (3, 1200)]


def test_end_offset_for_epoch_follows_kafka(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in [(2, 10), (4, 50), (7, 90)]:
        cache.assign(epoch, start)
    leo = 120
    assert cache.end_offset_for_epoch(7, leo) == (7, 120)  # latest epoch: the log end
    assert cache.end_offset_for_epoch(4, leo) == (4, 90)  # ends where the next one starts
    assert cache.end_offset_for_epoch(5, leo) == (4, 90)  # unknown epoch between: the floor epoch
    assert cache.end_offset_for_epoch(1, leo) == (1, 10)  # older than all: first start offset
    assert cache.end_offset_for_epoch(8, leo) == (-1, -1)  # newer than all
    assert cache.end_offset_for_epoch(-1, leo) == (-1, -1)


def test_truncation_from_both_ends(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries() == [(1, 0), (2, 10)]
    cache.truncate_from_start(15)
    assert cache.entries() == [(2, 15)]
    assert LeaderEpochCache(tmp_path).entries() == [(2, 15)]


def test_entries_kept_in_memory_are_written_once_records_carry_them(tmp_path):
    """sync(log_end_offset=...) (clean close, maintenance) writes what assign(write=False) kept
    only as far as records carry it: an entry starting at the log end stays in memory (a start
    would drop it) and is written by a later sync once the log has grown past it."""
    path = tmp_path / "leader-epoch-checkpoint"
    c = LeaderEpochCache(tmp_path)
    c.assign(0, 0, write=False)
    c.sync(fsync=False, log_end_offset=0)
    assert not path.exists()  # nothing carries epoch 0 yet: no file
    c.sync(fsync=False, log_end_offset=5)
    assert path.read_text() == "0\n1\n0 0\n"
    c.assign(1, 5, write=False)
    c.sync(fsync=False, log_end_offset=5)
    assert path.read_text() == "0\n1\n0 0\n"  # epoch 1 starts at the log end: still unwritten
    inode = path.stat().st_ino
    c.sync(fsync=False, log_end_offset=5)
    assert path.stat().st_ino == inode  # unchanged contents: not written again
    c.sync(fsync=False, log_end_offset=9)
    assert path.read_text() == "0\n2\n0 0\n1 5\n"
    assert LeaderEpochCache(tmp_path).entries() == [(0, 0), (1, 5)]
