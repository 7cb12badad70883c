"""Crash tests: damage the files as a crash or a bad disk would, restart, check what survives.

Every case must come back up (never refuse to start), keep every batch before the damage byte for
byte, drop the damaged batch and everything after it, and log one warning line saying so.
"""

from __future__ import annotations

import logging
import os

import pytest

import kcompat.log.recovery as recovery
from kcompat.log import LogConfig, LogManager
from kcompat.log.checkpoints import RECOVERY_POINT_CHECKPOINT
from kcompat.wire.record_batch import read_header, split_batches
from tests.log.batches import batch

CFG = LogConfig(segment_bytes=3000, index_interval_bytes=200, segment_index_bytes=1200)


def start(d):
    return LogManager([d], CFG, cluster_id="c1", node_id=1, clock=lambda: 0)


def fill(d, n=80, close=False):
    """A log of n batches; returns the list of (base offset, batch bytes) as stored."""
    m = start(d)
    plog = m.get_or_create("t", 0)
    for i in range(n):
        plog.append(batch(1 + i % 4, timestamp=1000 + i), leader_epoch=1 + i // 40, now_ms=0)
    stored = all_batches(plog)
    if close:
        m.close()
    return m, plog, stored


def all_batches(plog):
    data = plog.read(plog.log_start_offset, 1 << 30).read_bytes()
    return [(read_header(data, p).base_offset, data[p : p + n]) for p, n in split_batches(data)]


def restart(d):
    m = start(d)
    return m, m.get("t", 0)


def assert_prefix_kept(plog, stored, kept):
    after = all_batches(plog)
    assert after == stored[:kept]
    assert plog.log_end_offset == (stored[kept][0] if kept < len(stored) else plog.log_end_offset)
    assert plog.verify() == []
    # reads, lookups and appends all work again
    info = plog.append(batch(2), leader_epoch=9, now_ms=0)
    assert info.base_offset == plog.log_end_offset - 2
    assert plog.read(info.base_offset, 100).first_offset == info.base_offset


def truncation_warnings(caplog):
    return [r for r in caplog.records if r.name == "kcompat.log" and r.levelno >= logging.WARNING]


def test_torn_last_batch_is_cut(tmp_path, caplog):
    _, plog, stored = fill(tmp_path)
    path = plog.active_segment.log.path
    os.truncate(path, os.path.getsize(path) - 30)  # the last batch, half written
    with caplog.at_level(logging.INFO, logger="kcompat.log"):
        _, plog2 = restart(tmp_path)
    assert_prefix_kept(plog2, stored, len(stored) - 1)
    (line,) = truncation_warnings(caplog)
    assert "truncated" in line.getMessage() and "t-0" in line.getMessage()


def test_flipped_bytes_in_last_batch_are_cut(tmp_path, caplog):
    _, plog, stored = fill(tmp_path)
    path = plog.active_segment.log.path
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size - 5)
        f.write(b"\xff\x00\xff")
    with caplog.at_level(logging.INFO, logger="kcompat.log"):
        _, plog2 = restart(tmp_path)
    assert_prefix_kept(plog2, stored, len(stored) - 1)
    (line,) = truncation_warnings(caplog)
    assert "CRC" in line.getMessage()


def test_corrupt_batch_mid_log_cuts_there_and_drops_later_segments(tmp_path, caplog):
    _m, plog, stored = fill(tmp_path)
    victim_segment = plog.segments[-3]
    victim_offset = victim_segment.base_offset
    kept = [b for b, _ in stored].index(victim_offset) + 1  # its first batch survives
    pos = len(stored[kept - 1][1]) + 70  # inside the second batch of that segment
    with open(victim_segment.log.path, "r+b") as f:
        f.seek(pos)
        f.write(b"\x00\x00\x00\x00")
    (tmp_path / RECOVERY_POINT_CHECKPOINT).unlink()  # recover everything
    with caplog.at_level(logging.INFO, logger="kcompat.log"):
        _, plog2 = restart(tmp_path)
    assert len(plog2.segments) == len(plog.segments) - 2
    assert_prefix_kept(plog2, stored, kept)
    (line,) = truncation_warnings(caplog)
    assert "deleted 2 later segment" in line.getMessage()


def test_zeroed_tail_pages_are_cut(tmp_path, caplog):
    _, plog, stored = fill(tmp_path)
    with open(plog.active_segment.log.path, "ab") as f:
        f.write(bytes(8192))  # the inode grew, the data never landed
    with caplog.at_level(logging.INFO, logger="kcompat.log"):
        _, plog2 = restart(tmp_path)
    assert_prefix_kept(plog2, stored, len(stored))
    assert len(truncation_warnings(caplog)) == 1


@pytest.mark.parametrize("which", ["active", "sealed"])
def test_index_cut_short_is_rebuilt(tmp_path, which):
    _, plog, stored = fill(tmp_path, close=True)
    seg = plog.active_segment if which == "active" else plog.segments[0]
    assert seg.offset_index.entries > 1
    os.truncate(seg.offset_index.path, 5)  # not even one entry
    os.truncate(seg.time_index.path, 7)
    _, plog2 = restart(tmp_path)
    assert all_batches(plog2) == stored
    rebuilt = next(s for s in plog2.segments if s.base_offset == seg.base_offset)
    assert rebuilt.offset_index.entries > 1 and rebuilt.time_index.entries > 1
    assert_prefix_kept(plog2, stored, len(stored))


def test_index_pointing_past_the_log_is_rebuilt(tmp_path):
    _, plog, stored = fill(tmp_path, close=True)
    seg = plog.segments[0]
    with open(seg.offset_index.path, "r+b") as f:
        f.seek(8)
        f.write(b"\x00\x00\x00\x05\x7f\x00\x00\x00")
    _, plog2 = restart(tmp_path)
    assert all_batches(plog2) == stored
    for off, _ in stored[::7]:
        assert plog2.read(off, 10).first_offset == off


def test_missing_checkpoint_files_mean_full_recovery_not_loss(tmp_path):
    _, _plog, stored = fill(tmp_path)
    for name in os.listdir(tmp_path):
        if name.endswith("checkpoint"):
            (tmp_path / name).unlink()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink()
    _, plog2 = restart(tmp_path)
    assert all_batches(plog2) == stored
    assert plog2.leader_epoch_cache.entries() == [(1, 0), (2, stored[40][0])]  # rebuilt from headers


def test_clean_restart_skips_the_scan(tmp_path, monkeypatch):
    fill(tmp_path, close=True)
    calls = []
    real = recovery.recover_segment
    monkeypatch.setattr(recovery, "recover_segment", lambda *a, **k: calls.append(1) or real(*a, **k))
    m, _plog = restart(tmp_path)
    assert calls == []
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # a crash from now on is unclean
    m.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_unclean_restart_scans_only_from_the_recovery_point(tmp_path, monkeypatch):
    m, plog, _stored = fill(tmp_path)
    plog.flush()
    m.checkpoint()
    plog.append(batch(2), leader_epoch=2, now_ms=0)
    scanned = []
    real = recovery.recover_segment
    monkeypatch.setattr(
        recovery,
        "recover_segment",
        lambda seg, *a, **k: scanned.append(seg.base_offset) or real(seg, *a, **k),
    )
    _, plog2 = restart(tmp_path)
    assert scanned == [plog.active_segment.base_offset]
    assert plog2.log_end_offset == plog.log_end_offset


def test_producer_state_survives_a_crash(tmp_path):
    m = start(tmp_path)
    plog = m.get_or_create("t", 0)
    for i in range(30):
        plog.append(batch(2, producer_id=5, producer_epoch=0, base_sequence=2 * i), leader_epoch=0, now_ms=0)
    _, plog2 = restart(tmp_path)  # no close: rebuilt from snapshots taken at rolls + batch headers
    dup = plog2.append(batch(2, producer_id=5, producer_epoch=0, base_sequence=58), leader_epoch=0, now_ms=0)
    assert dup.duplicate and dup.base_offset == 58
    nxt = plog2.append(batch(1, producer_id=5, producer_epoch=0, base_sequence=60), leader_epoch=0, now_ms=0)
    assert nxt.base_offset == 60 and not nxt.duplicate
