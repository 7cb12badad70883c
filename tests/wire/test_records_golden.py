"""Golden batches built once by kafka-python and aiokafka (golden/records/make_golden.py) decode to the
records that went in, and re-encode to the same bytes wherever the codec's output is deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcompat.wire.compression import Compression
from kcompat.wire.legacy_records import decode_message_set
from kcompat.wire.record_batch import crc_ok, read_header
from kcompat.wire.records import Record, build_batch, decode_batch

GOLDEN = Path(__file__).parent / "golden" / "records"
CODECS = {c.name.lower(): c for c in Compression}


def _golden(name: str) -> bytes:
    return bytes.fromhex((GOLDEN / f"{name}.hex").read_text().strip())


def _expected() -> list[Record]:
    return [
        Record(
            r["offset"],
            r["timestamp"],
            None if r["key"] is None else bytes.fromhex(r["key"]),
            None if r["value"] is None else bytes.fromhex(r["value"]),
            tuple((k, None if v is None else bytes.fromhex(v)) for k, v in r["headers"]),
        )
        for r in json.loads((GOLDEN / "records.json").read_text())
    ]


@pytest.mark.parametrize("lib", ["kafka_python", "aiokafka"])
@pytest.mark.parametrize("codec", list(CODECS))
def test_golden_v2_batch_decodes_to_the_records_put_in(lib: str, codec: str) -> None:
    data = _golden(f"{lib}_v2_{codec}")
    h, records = decode_batch(data)
    assert h.compression == CODECS[codec]  # the library really compressed it
    assert crc_ok(data)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (1234, 5, 10)
    assert h.records_count == len(records) == 6
    assert h.last_offset_delta == 5
    assert records == _expected()


@pytest.mark.parametrize("codec", ["none", "snappy", "zstd"])
def test_our_encoding_is_byte_identical_to_kafka_python(codec: str) -> None:
    # gzip embeds an mtime and kafka-python's lz4 stores the content size; these three are deterministic.
    theirs = _golden(f"kafka_python_v2_{codec}")
    ours = build_batch(
        _expected(),
        compression=CODECS[codec],
        producer_id=1234,
        producer_epoch=5,
        base_sequence=10,
        partition_leader_epoch=read_header(theirs).partition_leader_epoch,
    )
    assert ours == theirs


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_golden_legacy_message_set_decodes(magic: int, codec: str) -> None:
    path = GOLDEN / f"kafka_python_v{magic}_{codec}.hex"
    if magic == 0 and codec == "lz4":
        assert not path.exists()  # kafka-python needs xxhash to write these; see test_records_legacy
        return
    data = bytes.fromhex(path.read_text().strip())
    if codec != "none":
        assert data[17] & 0x07 == CODECS[codec]  # attributes of the wrapper
    records = decode_message_set(data)
    expected = _expected()
    offset_shift = -5 if magic == 1 and codec != "none" else 0  # producer-side wrapper offset is 0
    assert [(r.offset, r.key, r.value) for r in records] == [
        (e.offset + offset_shift, e.key, e.value) for e in expected
    ]
    assert [r.timestamp for r in records] == [e.timestamp if magic else -1 for e in expected]
    assert all(r.magic == magic for r in records)
