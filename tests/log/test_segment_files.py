"""Segment files hold no descriptor when idle: theirs come from one bounded LRU (segment_files.py),
the active segment's too. Appends, flushes and reads of a file the cache let go reopen it, losing
nothing; reads still hand out file pieces whose descriptors stay open for as long as the piece
lives, even after the cache let them go."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kcompat.log import LogConfig, PartitionLog
from kcompat.log.segment_files import RESERVED, SEGMENT_FILES, bound_for
from kcompat.wire.record_batch import read_header, split_batches
from tests.log.batches import batch

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096)
BOUND = 3


@pytest.fixture(autouse=True)
def small_bound() -> Iterator[None]:
    before = SEGMENT_FILES.bound
    SEGMENT_FILES.set_bound(BOUND)
    yield
    SEGMENT_FILES.set_bound(before)


def open_files(d: Path) -> list[str]:
    """Names of the files under `d` this process holds descriptors on (index maps included)."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(d)):
            names.append(Path(target).name)
    return names


def open_segment_files(d: Path) -> int:
    """Descriptors of this process open on `.log` files under `d`."""
    return sum(1 for n in open_files(d) if n.endswith(".log"))


def fill(d: Path, segments: int) -> tuple[PartitionLog, list[int]]:
    plog = PartitionLog(d, "t", 0, SMALL, now_ms=0)
    while len(plog.segments) < segments:
        plog.append(batch(5), leader_epoch=0, now_ms=0)
    return plog, [s.base_offset for s in plog.segments]


def offsets(data: bytes) -> list[int]:
    return [read_header(data, pos).base_offset for pos, _ in split_batches(data)]


def test_many_segments_hold_at_most_the_bound(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    plog, bases = fill(d, 12)
    assert open_segment_files(d) <= BOUND
    # A rolled segment's indexes (a page or less) are read into memory and their maps dropped: only
    # the active segment's may hold a descriptor (the one a map keeps, before Python 3.13).
    active = f"{bases[-1]:020d}."
    assert [n for n in open_files(d) if "index" in n and not n.startswith(active)] == []
    for base in bases:  # every old segment read again, in turn: still at most the bound open
        assert offsets(plog.read(base, 100).read_bytes())[0] == base
        assert open_segment_files(d) <= BOUND
    assert offsets(plog.read(0, 1 << 20).read_bytes()) == list(range(0, plog.log_end_offset, 5))
    leo = plog.log_end_offset
    plog.close()
    assert open_segment_files(d) == 0
    # A start checks each sealed segment's time index against its last batch: through the cache too.
    again = PartitionLog(d, "t", 0, SMALL, now_ms=0, recovery_point=leo, clean_shutdown=True)
    assert open_segment_files(d) <= BOUND
    assert len(open_files(d)) == open_segment_files(d)  # small indexes are read, not mapped
    assert offsets(again.read(bases[1], 100).read_bytes())[0] == bases[1]
    again.close()


def test_a_piece_outlives_the_cache_letting_its_descriptor_go(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    plog, bases = fill(d, 8)
    held = plog.read(bases[0], 100)  # the oldest segment: the first the cache lets go
    expected = held.read_bytes()
    for base in bases[1:-1]:
        plog.read(base, 100)
    (piece,) = held.pieces
    assert piece.file._h is None  # let go by the cache ...
    assert os.pread(piece.fd, piece.length, piece.position) == expected  # ... yet open for the piece
    plog.delete_records_before(bases[2])  # and after its segment is deleted
    plog.run_retention(0)
    assert not (d / f"{bases[0]:020d}.log").exists()
    assert os.pread(piece.fd, piece.length, piece.position) == expected
    plog.close()


def test_a_partition_reopened_after_a_clean_stop_holds_only_its_log(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    plog = PartitionLog(d, "t", 0, SMALL, now_ms=0)
    plog.append(batch(3, timestamp=1000), leader_epoch=0, now_ms=1000)
    plog.close()  # no index entry: no index file, not even the closing time index entry
    assert sorted(os.listdir(d)) == ["00000000000000000000.log", "leader-epoch-checkpoint"]
    again = PartitionLog(d, "t", 0, SMALL, now_ms=0, recovery_point=3, clean_shutdown=True)
    assert again.active_segment.time_index.entries == 0
    assert again.max_timestamp_offset() == (2, 1002)  # found by the load's scan of the tail
    assert open_files(d) == ["00000000000000000000.log"]
    again.append(batch(2, timestamp=900), leader_epoch=0, now_ms=2000)  # appends and reads go on
    assert offsets(again.read(0, 1 << 20).read_bytes()) == [0, 3]
    again.roll(now_ms=3000)  # a roll seals the segment with its largest timestamp, as before
    assert again.segments[0].time_index.last_entry() == (1002, 2)
    again.close()


def test_recovery_after_a_crash_does_not_map_a_small_index_either(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    plog = PartitionLog(d, "t", 0, SMALL, now_ms=0)
    plog.append(batch(3), leader_epoch=0, now_ms=0)
    plog.close()  # a clean stop, then a crash after more appends
    crashed = PartitionLog(d, "t", 0, SMALL, now_ms=0, recovery_point=3, clean_shutdown=True)
    crashed.append(batch(2), leader_epoch=0, now_ms=0)
    crashed.active_segment.log.flush()
    # No close: the next start recovers from offset 0 (re-indexing zeroes the old entries).
    again = PartitionLog(d, "t", 0, SMALL, now_ms=0, recovery_point=0, clean_shutdown=False)
    assert again.log_end_offset == 5
    assert [n for n in open_files(d) if n.startswith("0000")].count("00000000000000000000.log") >= 1
    assert not [n for n in open_files(d) if n.endswith("index")]
    assert offsets(again.read(0, 1 << 20).read_bytes()) == [0, 3]
    again.close()


def test_idle_partitions_hold_no_descriptor_and_evicted_writers_lose_nothing(tmp_path: Path) -> None:
    logs = [PartitionLog(tmp_path / f"t-{p}", "t", p, SMALL, now_ms=0) for p in range(10)]
    for _ in range(3):  # round-robin appends: every append after the first round reopens its file
        for plog in logs:
            plog.append(batch(2), leader_epoch=0, now_ms=0)
            assert plog.active_segment.log.is_open  # the one in use is open ...
        assert sum(open_segment_files(tmp_path / f"t-{p}") for p in range(10)) == BOUND  # ... the bound
    first = logs[0].active_segment.log
    assert not first.is_open  # let go since its last append: it holds no descriptor ...
    logs[0].flush()  # ... and a flush reopens it to fsync the file (the writes of the closed one)
    assert offsets(logs[0].read(0, 1 << 20).read_bytes()) == [0, 2, 4]
    for p, plog in enumerate(logs):
        assert plog.log_end_offset == 6
        # What each file holds on disk, read by path: the three appends, none lost to an eviction.
        raw = (tmp_path / f"t-{p}" / "00000000000000000000.log").read_bytes()
        assert offsets(raw) == [0, 2, 4]
    # A crash now (no close): recovery finds every batch of every partition.
    for p in range(10):
        again = PartitionLog(
            tmp_path / f"t-{p}", "t", p, SMALL, now_ms=0, recovery_point=0, clean_shutdown=False
        )
        assert again.log_end_offset == 6
        again.close()
    for plog in logs:
        plog.close()
    assert sum(open_segment_files(tmp_path / f"t-{p}") for p in range(10)) == 0
    assert len(SEGMENT_FILES) == 0  # closed files leave the cache


def test_an_append_keeps_its_descriptor_while_the_cache_lets_it_go(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0, SMALL, now_ms=0)
    f = plog.active_segment.log
    h = f.handle()
    others = [PartitionLog(tmp_path / f"o-{p}", "o", p, SMALL, now_ms=0) for p in range(BOUND)]
    assert not f.is_open  # let go by the cache ...
    assert os.fstat(h.fd).st_size == 0  # ... but still open for whoever holds it (a write under way)
    plog.append(batch(3), leader_epoch=0, now_ms=0)  # reopened
    assert f.is_open and offsets(plog.read(0, 1 << 20).read_bytes()) == [0]
    for o in [plog, *others]:
        o.close()


def test_the_default_bound_is_half_the_open_file_limit() -> None:
    assert bound_for(0, 20_000) == 10_000
    assert bound_for(0, 1024) == 512
    assert bound_for(64, 20_000) == 64  # set: taken as it is ...
    assert bound_for(50_000, 20_000) == 20_000 - RESERVED  # ... within what the limit leaves
    assert bound_for(0, 100) == 36  # a tiny limit: what it leaves
    assert bound_for(0, 200) == 100
