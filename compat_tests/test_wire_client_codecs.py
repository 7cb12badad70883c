"""kcompat.wire against the client libraries' own codecs: kafka-python, aiokafka and librdkafka
(confluent-kafka) read what kcompat writes and kcompat reads what they write. Moved from the unit
layer (tests/wire), which imports no third-party Kafka client.
"""

from __future__ import annotations

import aiokafka.codec as aio
import confluent_kafka
import kafka.codec as kp
import kafka.errors
import pytest
from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER, ControlRecord
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from kcompat.wire.compression import Compression, compress, decompress
from kcompat.wire.control_records import EndTxnMarker, build_end_txn_marker_batch, read_end_txn_marker
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.record_batch import (
    crc_ok,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batch,
)
from kcompat.wire.records import Record, build_batch, decode_batch

CODECS = list(Compression)
CODEC_IDS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
PAYLOAD = b"".join(b"record %d with some repetition; " % i for i in range(5000))  # ~170 KB, > 2 lz4 blocks
BASE_TS = 1_700_000_000_000


def _sample(n: int = 8) -> list[Record]:
    return [
        Record(
            i,
            BASE_TS + 11 * i,
            None if i % 3 == 0 else b"k%d" % i,
            None if i == 5 else b"payload-%d " % i * 40,
            (("a", b"1"), ("nil", None), ("", b""))[: i % 4],
        )
        for i in range(n)
    ]


def _records(n: int = 5) -> list[Record]:
    return [Record(i, BASE_TS + i, b"k", b"value %d" % i, (("h", b"v"),)) for i in range(n)]


def _client_batch(codec: Compression = Compression.NONE, n: int = 5) -> bytearray:
    b = KpBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for r in _records(n):
        b.append(r.offset, r.timestamp, r.key, r.value * 30, list(r.headers))
    return bytearray(b.build())


# -- codecs (from tests/wire/test_compression.py) --


THEIR_ENCODERS = {
    "kafka-python": {1: kp.gzip_encode, 2: kp.snappy_encode, 3: kp.lz4_encode, 4: kp.zstd_encode},
    "aiokafka": {1: aio.gzip_encode, 2: aio.snappy_encode, 3: aio.lz4_encode, 4: aio.zstd_encode},
}


THEIR_DECODERS = {
    "kafka-python": {1: kp.gzip_decode, 2: kp.snappy_decode, 3: kp.lz4_decode, 4: kp.zstd_decode},
    "aiokafka": {1: aio.gzip_decode, 2: aio.snappy_decode, 3: aio.lz4_decode, 4: aio.zstd_decode},
}


@pytest.mark.parametrize("lib", list(THEIR_ENCODERS))
@pytest.mark.parametrize("cid", CODEC_IDS)
def test_interop_with_client_codecs(lib: str, cid: Compression) -> None:
    assert decompress(cid, THEIR_ENCODERS[lib][cid](PAYLOAD)) == PAYLOAD
    assert THEIR_DECODERS[lib][cid](compress(cid, PAYLOAD)) == PAYLOAD


# -- error codes (from tests/wire/test_error_codes.py) --


def test_every_code_kafka_python_knows() -> None:
    codes = {
        cls.errno
        for cls in vars(kafka.errors).values()
        if isinstance(cls, type)
        and issubclass(cls, kafka.errors.BrokerResponseError)
        and cls.errno is not None
    }
    assert len(codes) > 100
    assert codes <= set(ErrorCode)


def test_every_code_librdkafka_knows_with_its_name() -> None:
    known = {
        getattr(confluent_kafka.KafkaError, n): n
        for n in dir(confluent_kafka.KafkaError)
        if n.isupper() and not n.startswith("_") and getattr(confluent_kafka.KafkaError, n) >= -1
    }
    assert len(known) > 100
    assert set(known) <= set(ErrorCode)
    # librdkafka abbreviates some names; most are Kafka's verbatim.
    same = [c for c, n in known.items() if ErrorCode(c).name == n]
    assert len(same) >= len(known) - 12


# -- record batches (from tests/wire/test_records.py, test_record_batch.py, test_records_control.py) --


def _from_lib(recs: object) -> list[Record]:
    return [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in recs]  # type: ignore[attr-defined]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder", [KpBuilder, AioBuilder], ids=["kafka-python", "aiokafka"])
def test_client_built_batches_decode(codec: Compression, builder: type) -> None:
    recs = _sample()
    b = builder(2, codec, False, 99, 3, 17, 1 << 20)
    for r in recs:
        b.append(r.offset, r.timestamp, r.key, r.value, list(r.headers))
    theirs = bytes(b.build())
    h, got = decode_batch(theirs)
    assert h.compression == codec
    assert got == recs
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (99, 3, 17, len(recs))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("batch_cls", [KpBatch, AioBatch], ids=["kafka-python", "aiokafka"])
def test_our_batches_decode_in_clients(codec: Compression, batch_cls: type) -> None:
    recs = [Record(r.offset + 1000, r.timestamp, r.key, r.value, r.headers) for r in _sample()]
    data = build_batch(recs, base_offset=1000, compression=codec)
    theirs = batch_cls(data)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert _from_lib(theirs) == recs


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.SNAPPY, Compression.ZSTD])
def test_byte_identical_to_kafka_python(codec: Compression) -> None:
    recs = _sample()
    b = KpBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for r in recs:
        b.append(r.offset, r.timestamp, r.key, r.value, list(r.headers))
    assert build_batch(recs, compression=codec, partition_leader_epoch=0) == bytes(b.build())


def test_memory_records_builder_batch_decodes() -> None:
    mb = MemoryRecordsBuilder(2, Compression.GZIP, 1 << 20, offset=0)
    for r in _sample():
        mb.append(r.timestamp, r.key, r.value, list(r.headers))
    mb.close()
    data = bytes(mb.buffer())
    _, got = decode_batch(data)
    assert got == _sample()
    batch = MemoryRecords(build_batch(_sample(), compression=Compression.LZ4)).next_batch()
    assert _from_lib(batch) == _sample()


@pytest.mark.parametrize("codec", list(Compression))
def test_base_offset_and_leader_epoch_patches_keep_the_crc(codec: Compression) -> None:
    data = _client_batch(codec)
    set_base_offset(data, 123_456_789_000)
    set_partition_leader_epoch(data, 17)
    h = read_header(data)
    assert (h.base_offset, h.partition_leader_epoch) == (123_456_789_000, 17)
    assert crc_ok(data)
    kp = KpBatch(bytes(data))
    assert kp.validate_crc()
    assert [r.offset for r in kp] == [123_456_789_000 + i for i in range(5)]


@pytest.mark.parametrize("codec", list(Compression))
def test_log_append_time_as_kafka_python_reads_it(codec: Compression) -> None:
    data = _client_batch(codec)
    before = read_header(data)
    append_time = BASE_TS + 86_400_000
    set_log_append_time(data, append_time)
    h = read_header(data)
    assert h.log_append_time and h.max_timestamp == append_time
    assert h.attributes == before.attributes | 0x08  # codec and other bits kept
    assert crc_ok(data)
    kp = KpBatch(bytes(data))
    assert kp.validate_crc()
    assert kp.timestamp_type == 1
    assert [r.timestamp for r in kp] == [append_time] * 5
    assert {r.timestamp for r in decode_batch(data)[1]} == {append_time}
    validate_batch(data)


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
