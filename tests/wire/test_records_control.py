"""Transaction markers (as kafka-python and aiokafka read them: compat_tests/test_wire_client_codecs.py)."""

from __future__ import annotations

import pytest

from kcompat.wire.control_records import (
    ControlType,
    EndTxnMarker,
    parse_control_key,
    read_end_txn_marker,
)
from kcompat.wire.errors import DecodeError
from kcompat.wire.records import Record


def test_unknown_and_malformed_control_records() -> None:
    other = Record(0, 0, b"\x00\x00\x00\x02", b"")
    assert parse_control_key(other.key) == ControlType.LEADER_CHANGE
    assert read_end_txn_marker(other) is None
    assert read_end_txn_marker(
        Record(0, 0, b"\x00\x00\x00\x01", b"\x00\x01\x00\x00\x00\x05xyz")
    ) == EndTxnMarker(True, 5)  # a newer value version with extra fields
    for key in (None, b"\x00", b"\xff\xff\x00\x00"):
        with pytest.raises(DecodeError):
            parse_control_key(key)
    with pytest.raises(DecodeError):
        read_end_txn_marker(Record(0, 0, b"\x00\x00\x00\x00", b"\x00\x00"))
