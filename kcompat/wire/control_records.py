"""Control records: the transaction markers a broker writes, never a client.

A control batch has attributes bit 5 set (and bit 4, transactional) and holds one record:

    key   => version int16 (0), type int16          0 = ABORT, 1 = COMMIT (others: KRaft's own)
    value => version int16 (0), coordinatorEpoch int32     for ABORT and COMMIT (EndTxnMarker)

Consumers skip control batches; read_committed consumers use them to drop aborted records.
Newer value versions may append fields, so bytes after the ones we know are ignored, as Java does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from kcompat.wire.errors import DecodeError
from kcompat.wire.records import Record, build_batch

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
CURRENT_KEY_VERSION = 0
CURRENT_MARKER_VERSION = 0


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    commit: bool
    coordinator_epoch: int


def control_key(control_type: ControlType) -> bytes:
    return _KEY.pack(CURRENT_KEY_VERSION, control_type)


def parse_control_key(key: bytes | memoryview | None) -> int:
    """The control type id in a control record's key (an unknown id is returned as it is)."""
    if key is None or len(key) < _KEY.size:
        raise DecodeError(f"control key needs {_KEY.size} bytes", "control_record.key")
    version, ctype = _KEY.unpack_from(key)
    if version < 0:
        raise DecodeError(f"negative control key version {version}", "control_record.key.version")
    ctype_int: int = ctype
    return ctype_int


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _MARKER_VALUE.pack(CURRENT_MARKER_VERSION, coordinator_epoch)


def read_end_txn_marker(record: Record) -> EndTxnMarker | None:
    """The COMMIT or ABORT marker in a control record, or None for other control types."""
    ctype = parse_control_key(record.key)
    if ctype not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    value = record.value
    if value is None or len(value) < _MARKER_VALUE.size:
        raise DecodeError(
            f"end transaction marker value needs {_MARKER_VALUE.size} bytes", "control_record.value"
        )
    version, epoch = _MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise DecodeError(f"negative marker version {version}", "control_record.value.version")
    return EndTxnMarker(ctype == ControlType.COMMIT, epoch)


def build_end_txn_marker_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The one-record control batch that ends a producer's transaction on a partition."""
    record = Record(
        base_offset,
        timestamp,
        control_key(ControlType.COMMIT if commit else ControlType.ABORT),
        end_txn_marker_value(coordinator_epoch),
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        transactional=True,
        control=True,
    )
