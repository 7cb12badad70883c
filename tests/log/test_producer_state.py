"""Producer state: sequence rules (client-requirements trap 12) and Kafka's snapshot format."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from kcompat.log.errors import InvalidProducerEpoch, OutOfOrderSequence
from kcompat.log.producer_state import (
    BatchMetadata,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
)
from kcompat.wire.record_batch import BatchHeader


def header(pid, epoch, first_seq, count, base_offset, ts=100, attributes=0):
    return BatchHeader(base_offset, 100, 0, 2, 0, attributes, count - 1, ts, ts, pid, epoch, first_seq, count)


def test_unknown_producer_accepts_any_sequence(tmp_path):
    ps = ProducerStateManager(tmp_path)
    assert ps.check(42, 0, 17, 20) is None


def test_in_sequence_duplicate_gap_and_new_epoch(tmp_path):
    ps = ProducerStateManager(tmp_path)
    ps.update(header(42, 0, 0, 5, 100))
    ps.update(header(42, 0, 5, 5, 105))
    assert ps.check(42, 0, 10, 14) is None  # next in sequence
    assert ps.check(42, 0, 0, 4) == BatchMetadata(0, 4, 100, 104, 100)  # retry: original offsets
    with pytest.raises(OutOfOrderSequence):
        ps.check(42, 0, 12, 14)  # gap
    with pytest.raises(OutOfOrderSequence):
        ps.check(42, 1, 3, 5)  # a new epoch must start at 0
    assert ps.check(42, 1, 0, 3) is None


def test_lower_epoch_is_fenced(tmp_path):
    ps = ProducerStateManager(tmp_path)
    ps.update(header(42, 2, 0, 1, 110))
    with pytest.raises(InvalidProducerEpoch):
        ps.check(42, 1, 0, 0)


def test_only_last_five_batches_are_remembered(tmp_path):
    ps = ProducerStateManager(tmp_path)
    for i in range(7):
        ps.update(header(9, 0, i * 2, 2, i * 2))
    with pytest.raises(OutOfOrderSequence):
        ps.check(9, 0, 2, 3)  # batch 1 is forgotten: no longer a duplicate, and out of order
    assert ps.check(9, 0, 4, 5) == BatchMetadata(4, 5, 4, 5, 100)  # batch 2 is the oldest kept
    assert ps.check(9, 0, 12, 13) == BatchMetadata(12, 13, 12, 13, 100)


def test_sequence_wraps_at_int32_max(tmp_path):
    ps = ProducerStateManager(tmp_path)
    ps.update(header(5, 0, 0x7FFFFFFF - 1, 2, 0))
    assert ps.check(5, 0, 0, 3) is None


def test_snapshot_golden_bytes(tmp_path):
    ps = ProducerStateManager(tmp_path)
    ps.update(header(1000, 3, 10, 5, 200, ts=1234))
    data = encode_snapshot(ps.producers.values())
    entries = struct.pack(">i", 1) + struct.pack(
        ">qhiqiqiq",
        1000,  # producerId
        3,  # epoch
        14,  # lastSequence
        204,  # lastOffset
        4,  # offsetDelta
        1234,  # timestamp
        -1,  # coordinatorEpoch
        -1,  # currentTxnFirstOffset
    )
    assert data == struct.pack(">hI", 1, crc32c(entries)) + entries
    (entry,) = decode_snapshot(data)
    assert entry.producer_id == 1000 and entry.epoch == 3
    assert list(entry.batches) == [BatchMetadata(10, 14, 200, 204, 1234)]


def test_snapshot_file_round_trip_and_corruption(tmp_path):
    ps = ProducerStateManager(tmp_path)
    ps.update(header(1, 0, 0, 3, 0))
    ps.update(header(2, 5, 7, 1, 3))
    path = ps.take_snapshot()
    assert path.name == "00000000000000000004.snapshot"
    other = ProducerStateManager(tmp_path)
    assert other.load(0, 4) == 4
    assert other.check(1, 0, 0, 2) == BatchMetadata(0, 2, 0, 2, 100)
    assert other.check(2, 5, 7, 7) == BatchMetadata(7, 7, 3, 3, 100)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    third = ProducerStateManager(tmp_path)
    assert third.load(0, 4) == 0  # unreadable snapshot is dropped: replay from the log start
    assert not path.exists()


def test_truncate_head_forgets_producers_below_log_start(tmp_path):
    ps = ProducerStateManager(tmp_path)
    ps.update(header(1, 0, 0, 3, 0))
    ps.update(header(2, 0, 0, 3, 10))
    ps.truncate_head(5)
    assert set(ps.producers) == {2}
    assert ps.check(1, 0, 99, 99) is None  # no state: any sequence
