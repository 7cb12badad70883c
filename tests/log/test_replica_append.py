"""PartitionLog as a replica: appending the leader's batches as they are, the replicated high
watermark, and reads that stop below it."""

from __future__ import annotations

import pytest

from kcompat.log import CorruptRecord, LogConfig, PartitionLog
from tests.log.batches import batch

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096)


def open_log(d, name="t-0"):
    return PartitionLog(d / name, "t", 0, SMALL, now_ms=0)


def leader_batches(tmp_path, epochs):
    """Batches as a leader wrote them: (bytes, base offset, epoch) appended with the given epochs."""
    leader = open_log(tmp_path, "leader-0")
    for i, epoch in enumerate(epochs):
        leader.append(
            batch(2, producer_id=7, producer_epoch=0, base_sequence=2 * i), leader_epoch=epoch, now_ms=0
        )
    return leader


def test_follower_keeps_offsets_epochs_and_producer_state(tmp_path):
    leader = leader_batches(tmp_path, [0, 0, 3, 3])
    data = leader.read(0, 1 << 20).read_bytes()
    follower = open_log(tmp_path)
    assert follower.append_as_follower(data, now_ms=0) == 8
    assert follower.read(0, 1 << 20).read_bytes() == data  # byte for byte as the leader stored them
    assert follower.leader_epoch_cache.entries() == [(0, 0), (3, 4)]
    # Once leader, a retry of the last batch is answered with its original offsets, not appended again.
    again = follower.append(
        batch(2, producer_id=7, producer_epoch=0, base_sequence=6), leader_epoch=4, now_ms=0
    )
    assert again.duplicate and (again.base_offset, again.last_offset) == (6, 7)


def test_follower_refuses_a_gap_or_an_overlap(tmp_path):
    leader = leader_batches(tmp_path, [0, 0])
    follower = open_log(tmp_path)
    second = leader.read(2, 1 << 20).read_bytes()
    with pytest.raises(CorruptRecord):
        follower.append_as_follower(second, now_ms=0)  # starts at 2, the follower's log ends at 0
    assert follower.log_end_offset == 0
    follower.append_as_follower(leader.read(0, 1 << 20).read_bytes(), now_ms=0)
    with pytest.raises(CorruptRecord):
        follower.append_as_follower(second, now_ms=0)  # already held
    assert follower.log_end_offset == 4


def test_high_watermark_is_bounded_and_reads_stop_below_it(tmp_path):
    plog = open_log(tmp_path)
    for _ in range(3):
        plog.append(batch(2), leader_epoch=0, now_ms=0)
    assert plog.high_watermark == 6  # a single node: the log end
    assert plog.set_high_watermark(4) == 4
    assert plog.high_watermark == 4
    below = plog.read(0, 1 << 20, max_offset=4).read_bytes()
    assert below == plog.read(0, 1 << 20).read_bytes()[: len(below)]
    assert len(below) * 3 == len(plog.read(0, 1 << 20).read_bytes()) * 2  # two of the three equal batches
    assert len(plog.read(4, 1 << 20, max_offset=4)) == 0
    assert plog.set_high_watermark(99) == 6  # never past the log end
    plog.truncate_to(2)
    assert plog.high_watermark == 2
