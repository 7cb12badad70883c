"""LocalLog, the segments under a PartitionLog: what it does on its own, told offsets and cuts."""

from __future__ import annotations

import pytest

from kcompat.log import LogConfig, OffsetOutOfRange
from kcompat.log.local_log import LocalLog
from kcompat.log.segment import LogSegment
from kcompat.wire.record_batch import read_header, split_batches
from tests.log.batches import batch

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096)


def new_log(tmp_path, config=SMALL) -> LocalLog:
    d = tmp_path / "t-0"
    d.mkdir()
    return LocalLog(d, "t", 0, config, [LogSegment(d, 0, config, created_ms=0, active=True)], now_ms=0)


def put(local: LocalLog, n: int = 1) -> None:
    """Append one batch of `n` records at the log end, numbered as PartitionLog would number it."""
    data = batch(n, base_offset=local.log_end_offset)
    h = read_header(data, 0)
    local.append(memoryview(data), [(0, len(data), h.last_offset, h.max_timestamp)], h.last_offset + 1)


def offsets(local: LocalLog, offset: int = 0, **kw) -> list[int]:
    data = local.read(offset, 1 << 20, **kw).read_bytes()
    return [read_header(data, pos).base_offset for pos, _ in split_batches(data)]


def test_append_moves_the_log_end_and_counts_what_is_unflushed(tmp_path):
    local = new_log(tmp_path)
    put(local, 3)
    put(local, 2)
    assert (local.log_end_offset, local.unflushed_messages, local.recovery_point) == (5, 5, 0)
    assert offsets(local) == [0, 3]
    assert offsets(local, 5) == []
    with pytest.raises(OffsetOutOfRange):
        local.read(6, 100)


def test_a_read_below_max_offset_stops_at_that_batch(tmp_path):
    local = new_log(tmp_path)
    for _ in range(3):
        put(local, 2)
    assert offsets(local, max_offset=4) == [0, 2]
    assert offsets(local, 4, max_offset=4) == []


def test_roll_starts_a_segment_at_the_log_end_but_never_leaves_an_empty_one(tmp_path):
    local = new_log(tmp_path)
    first = local.active_segment
    assert local.roll(now_ms=0) is first  # empty: nothing to seal
    put(local, 2)
    new = local.roll(now_ms=0)
    assert new is local.active_segment and new.base_offset == 2
    assert [s.base_offset for s in local.segments] == [0, 2]
    assert [s.base_offset for s in local.segments_from(1)] == [0, 2]
    assert [s.base_offset for s in local.segments_from(2)] == [2]


def test_flush_bookkeeping_moves_the_recovery_point_up_only(tmp_path):
    local = new_log(tmp_path)
    put(local, 2)
    local.roll(now_ms=0)
    put(local, 1)
    assert [s.base_offset for s in local.unflushed_segments()] == [0, 2]
    assert [s.base_offset for s in local.unflushed_segments(active=False)] == [0]
    local.mark_flushed(2)
    assert [s.base_offset for s in local.unflushed_segments()] == [2]
    local.mark_flushed(1)
    assert local.recovery_point == 2


def test_truncation_cuts_whole_batches_and_brings_the_recovery_point_down(tmp_path):
    local = new_log(tmp_path)
    put(local, 2)
    local.roll(now_ms=0)
    put(local, 2)
    put(local, 2)
    local.mark_flushed(6)
    local.truncate_to(3)  # inside the batch at 2: it goes whole
    assert (local.log_end_offset, local.recovery_point) == (2, 2)
    assert [s.base_offset for s in local.segments] == [0, 2]
    assert offsets(local) == [0]
    local.truncate_fully_and_start_at(10, now_ms=0)
    assert [s.base_offset for s in local.segments] == [10]
    assert (local.log_end_offset, local.recovery_point) == (10, 10)


def test_removed_and_replaced_segments_leave_the_list_whole(tmp_path):
    local = new_log(tmp_path)
    for _ in range(3):
        put(local, 1)
        local.roll(now_ms=0)
    s0, s1, s2, active = local.segments
    local.remove_segments([s0])
    assert local.segments == (s1, s2, active)
    assert not s0.log.path.exists()
    stand_in = LogSegment(local.directory, 1, SMALL, created_ms=0, suffix=".cleaned", active=True)
    local.replace_segments([s1, s2], stand_in)
    assert local.segments == (stand_in, active)
