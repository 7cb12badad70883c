"""RecordBatch header patching and produce-path validation (the client libraries read the patched batches in compat_tests/test_wire_client_codecs.py)."""

from __future__ import annotations

import struct

import pytest

from kcompat.wire.compression import Compression
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import (
    HEADER_SIZE,
    RecordBatchError,
    compute_crc,
    crc_ok,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    split_batches,
    validate_batch,
)
from kcompat.wire.records import Record, build_batch, decode_batch

BASE_TS = 1_700_000_000_000


def _records(n: int = 5) -> list[Record]:
    return [Record(i, BASE_TS + i, b"k", b"value %d" % i, (("h", b"v"),)) for i in range(n)]


def _client_batch(codec: Compression = Compression.NONE, n: int = 5) -> bytearray:
    """A producer's batch (built here by kcompat's encoder; compat_tests/test_wire_client_codecs.py
    has kafka-python's builder and reader)."""
    recs = [Record(r.offset, r.timestamp, r.key, r.value * 30, r.headers) for r in _records(n)]
    return bytearray(build_batch(recs, compression=codec))


def _with_crc(data: bytearray) -> bytearray:
    struct.pack_into(">I", data, 17, compute_crc(data))
    return data


def test_patches_at_a_position_inside_a_larger_buffer() -> None:
    blob = bytearray(build_batch(_records(2)) + build_batch(_records(3)))
    (p0, s0), (p1, s1) = split_batches(blob)
    set_base_offset(blob, 50, p1)
    set_partition_leader_epoch(blob, 4, p1)
    set_log_append_time(blob, BASE_TS + 999, p1)
    h, recs = decode_batch(memoryview(blob)[p1 : p1 + s1])
    assert (h.base_offset, h.partition_leader_epoch, h.max_timestamp) == (50, 4, BASE_TS + 999)
    assert [r.offset for r in recs] == [50, 51, 52]
    assert decode_batch(memoryview(blob)[p0 : p0 + s0])[1] == _records(2)  # neighbour untouched


def test_log_append_time_on_a_memoryview() -> None:
    data = bytearray(build_batch(_records()))
    set_log_append_time(memoryview(data), 42)
    assert crc_ok(data) and read_header(data).max_timestamp == 42


# ---- validate_batch ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Compression))
def test_valid_client_batches_pass(codec: Compression) -> None:
    data = _client_batch(codec)
    h = validate_batch(bytes(data))
    assert h == read_header(data)
    assert validate_batch(memoryview(data)).records_count == 5


def _rejects(data: bytes | bytearray, error: ErrorCode, field: str) -> RecordBatchError:
    with pytest.raises(RecordBatchError) as exc:
        validate_batch(data)
    assert exc.value.error is error
    assert exc.value.error_name == error.name
    assert exc.value.field == field
    assert isinstance(exc.value, DecodeError)
    return exc.value


def test_crc_mismatch_is_corrupt_message() -> None:
    data = _client_batch()
    data[-1] ^= 0x01
    _rejects(data, ErrorCode.CORRUPT_MESSAGE, "record_batch.crc")


def test_every_single_byte_change_inside_the_crc_is_rejected() -> None:
    clean = bytes(_client_batch(Compression.GZIP))
    for pos in range(21, len(clean)):
        data = bytearray(clean)
        data[pos] ^= 0x40
        with pytest.raises(RecordBatchError) as exc:
            validate_batch(data)
        assert exc.value.error is ErrorCode.CORRUPT_MESSAGE


def test_length_problems_are_corrupt_message() -> None:
    data = _client_batch()
    for cut in (0, 12, HEADER_SIZE - 1):
        _rejects(data[:cut], ErrorCode.CORRUPT_MESSAGE, "record_batch")
    _rejects(data[:-1], ErrorCode.CORRUPT_MESSAGE, "record_batch.batch_length")
    _rejects(data + b"\x00" * 3, ErrorCode.CORRUPT_MESSAGE, "record_batch.batch_length")


def test_two_batches_for_one_partition_are_invalid_record() -> None:
    data = _client_batch() + _client_batch()
    _rejects(data, ErrorCode.INVALID_RECORD, "record_batch")


def test_structural_header_problems_are_invalid_record() -> None:
    clean = _client_batch()
    bad_magic = bytearray(clean)
    bad_magic[16] = 1
    _rejects(bad_magic, ErrorCode.INVALID_RECORD, "record_batch.magic")

    for count in (0, -1, 4, 6):
        d = bytearray(clean)
        struct.pack_into(">i", d, 57, count)
        _rejects(
            _with_crc(d),
            ErrorCode.INVALID_RECORD,
            "record_batch." + ("records_count" if count <= 0 else "last_offset_delta"),
        )

    d = bytearray(clean)
    struct.pack_into(">i", d, 23, -1)
    _rejects(_with_crc(d), ErrorCode.INVALID_RECORD, "record_batch.last_offset_delta")

    d = bytearray(clean)
    struct.pack_into(">h", d, 21, 5)
    _rejects(_with_crc(d), ErrorCode.INVALID_RECORD, "record_batch.attributes")


def test_more_records_than_bytes_is_invalid_record() -> None:
    d = bytearray(build_batch([Record(0, 0, None, None)]))
    struct.pack_into(">i", d, 57, 100)
    struct.pack_into(">i", d, 23, 99)
    _rejects(_with_crc(d), ErrorCode.INVALID_RECORD, "record_batch.records_count")


def test_control_batches_only_when_allowed() -> None:
    from kcompat.wire.control_records import build_end_txn_marker_batch

    marker = build_end_txn_marker_batch(
        commit=True, producer_id=5, producer_epoch=0, coordinator_epoch=1, timestamp=BASE_TS
    )
    _rejects(marker, ErrorCode.INVALID_RECORD, "record_batch.attributes")
    assert validate_batch(marker, allow_control=True).is_control


def test_validate_does_not_decompress() -> None:
    # A batch whose compressed body is garbage still passes: only the header and CRC are read.
    data = bytearray(_client_batch(Compression.ZSTD))
    data[HEADER_SIZE:] = b"\xff" * (len(data) - HEADER_SIZE)
    validate_batch(_with_crc(data))
    with pytest.raises(DecodeError):
        decode_batch(data)
