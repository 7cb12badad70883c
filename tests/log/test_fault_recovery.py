"""Power-loss damage that reaches recovery through an index rebuild (issue 8).

A segment rolled but not yet fsynced when the power went can lose its tail; its index then points
past the log, so loading rebuilds it, and that rebuild is what meets the torn batch. The log must
end there, as the recovery scan would end it: no later segment may survive behind a hole of lost
offsets, and one line says what was cut.
"""

from __future__ import annotations

import logging
import os

from kcompat.log.checkpoints import RECOVERY_POINT_CHECKPOINT
from tests.log.test_recovery import all_batches, assert_prefix_kept, fill, restart, truncation_warnings


def test_torn_sealed_segment_with_stale_index_ends_the_log(tmp_path, caplog):
    _, plog, stored = fill(tmp_path)
    victim = plog.segments[-3]
    assert victim.offset_index.entries > 0
    first_of_next = plog.segments[-2].base_offset
    last_batch = max(b for b, _ in stored if b < first_of_next)
    kept = [b for b, _ in stored].index(last_batch)
    os.truncate(victim.log.path, victim.size - 20)  # its last batch lost its tail
    with caplog.at_level(logging.INFO, logger="kcompat.log"):
        _, plog2 = restart(tmp_path)
    assert len(plog2.segments) == len(plog.segments) - 2
    assert_prefix_kept(plog2, stored, kept)
    (line,) = truncation_warnings(caplog)
    msg = line.getMessage()
    assert "t-0" in msg and f"from offset {last_batch}" in msg and "deleted 2 later segment(s)" in msg


def test_torn_sealed_segment_with_stale_index_and_no_checkpoint(tmp_path, caplog):
    _, plog, stored = fill(tmp_path)
    victim = plog.segments[1]
    first_of_next = plog.segments[2].base_offset
    kept = [b for b, _ in stored].index(max(b for b, _ in stored if b < first_of_next))
    os.truncate(victim.log.path, victim.size - 3)
    (tmp_path / RECOVERY_POINT_CHECKPOINT).unlink()
    with caplog.at_level(logging.INFO, logger="kcompat.log"):
        _, plog2 = restart(tmp_path)
    assert [s.base_offset for s in plog2.segments] == [s.base_offset for s in plog.segments[:2]]
    assert_prefix_kept(plog2, stored, kept)
    assert len(truncation_warnings(caplog)) == 1


def test_missing_indexes_of_a_torn_segment_end_the_log(tmp_path, caplog):
    _, plog, stored = fill(tmp_path, close=True)
    victim = plog.segments[0]
    kept = [b for b, _ in stored].index(max(b for b, _ in stored if b < plog.segments[1].base_offset))
    os.unlink(victim.offset_index.path)
    os.truncate(victim.log.path, victim.size - 1)
    with caplog.at_level(logging.INFO, logger="kcompat.log"):
        _, plog2 = restart(tmp_path)
    assert len(plog2.segments) == 1
    assert all_batches(plog2) == stored[:kept]
    assert_prefix_kept(plog2, stored, kept)
    assert len(truncation_warnings(caplog)) == 1
