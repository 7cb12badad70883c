"""Transaction markers as kafka-python and aiokafka read them."""

from __future__ import annotations

import pytest
from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER, ControlRecord
from kafka.record.default_records import DefaultRecordBatch as KpBatch

from kcompat.wire.control_records import (
    ControlType,
    EndTxnMarker,
    build_end_txn_marker_batch,
    parse_control_key,
    read_end_txn_marker,
)
from kcompat.wire.errors import DecodeError
from kcompat.wire.records import Record, decode_batch


@pytest.mark.parametrize("commit", [True, False])
def test_marker_batch_reads_in_clients(commit: bool) -> None:
    data = build_end_txn_marker_batch(
        commit=commit, producer_id=4000, producer_epoch=2, coordinator_epoch=9, timestamp=1234, base_offset=77
    )
    h, (rec,) = decode_batch(data)
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_offset) == (4000, 2, 77)
    assert read_end_txn_marker(rec) == EndTxnMarker(commit, 9)

    kp = KpBatch(data)
    assert kp.validate_crc() and kp.is_control_batch and kp.is_transactional
    (kp_rec,) = list(kp)
    assert kp_rec.commit is commit and kp_rec.abort is (not commit)
    assert ControlRecord.parse(rec.key or b"") == (COMMIT_MARKER if commit else ABORT_MARKER)


def test_unknown_and_malformed_control_records() -> None:
    other = Record(0, 0, b"\x00\x00\x00\x02", b"")
    assert parse_control_key(other.key) == ControlType.LEADER_CHANGE
    assert read_end_txn_marker(other) is None
    assert read_end_txn_marker(Record(0, 0, b"\x00\x00\x00\x01", b"\x00\x01\x00\x00\x00\x05xyz")) == EndTxnMarker(
        True, 5
    )  # a newer value version with extra fields
    for key in (None, b"\x00", b"\xff\xff\x00\x00"):
        with pytest.raises(DecodeError):
            parse_control_key(key)
    with pytest.raises(DecodeError):
        read_end_txn_marker(Record(0, 0, b"\x00\x00\x00\x00", b"\x00\x00"))
