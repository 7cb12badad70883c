"""Produce: acks, validation errors with Kafka's codes, idempotence, LogAppendTime, recompression."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcompat.server.dispatcher import CloseConnection
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.protocol import encode_request
from kcompat.wire.record_batch import read_header, split_batches
from kcompat.wire.records import Record, build_batch, decode_batch
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    return broker_harness({"num.partitions": "2"})


def produce(
    h: BrokerHarness, topic: str, records: Any, *, partition: int = 0, acks: int = -1, version: int = 9
) -> Any:
    body = {"acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}  # fmt: skip
    return h.call(PRODUCE, version, body).responses[0].partition_responses[0]


def create(h: BrokerHarness, name: str, configs: dict[str, str] | None = None, partitions: int = 1) -> None:
    resp = h.call(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                                  "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                                      "timeout_ms": 1000})  # fmt: skip
    assert resp.topics[0].error_code == 0, resp


def fetched(h: BrokerHarness, topic: str, offset: int = 0, partition: int = 0) -> bytes:
    resp = h.call(
        FETCH,
        12,
        {
            "max_wait_ms": 0,
            "min_bytes": 1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        },
    )
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0
    return bytes(p.records)


def test_offsets_are_assigned_in_order_and_the_log_start_reported(h: BrokerHarness) -> None:
    r1 = produce(h, "t", batch(b"a", b"b", b"c"))
    r2 = produce(h, "t", batch(b"d"))
    assert (r1.error_code, r1.base_offset, r1.log_append_time_ms, r1.log_start_offset) == (0, 0, -1, 0)
    assert (r2.error_code, r2.base_offset) == (0, 3)
    data = fetched(h, "t")
    bases = [read_header(data, pos).base_offset for pos, _ in split_batches(data)]
    assert bases == [0, 3]
    assert [r.value for r in decode_batch(data[: split_batches(data)[0][1]])[1]] == [b"a", b"b", b"c"]


@pytest.mark.parametrize("version", [12, 13])
def test_v12_and_v13(h: BrokerHarness, version: int) -> None:
    create(h, "t")
    topic_id = h.broker.metadata.topic("t").topic_id
    nowhere = uuid.uuid4()
    # v13 names topics by id only (KIP-516): an unknown id is UNKNOWN_TOPIC_ID, never auto-created
    data = [{"name": "t", "topic_id": topic_id, "partition_data": [{"index": 0, "records": batch(b"a")}]},
            {"name": "u", "topic_id": nowhere, "partition_data": [{"index": 0, "records": batch(b"b")}]}]  # fmt: skip
    r = h.call(PRODUCE, version, {"acks": -1, "timeout_ms": 1000, "topic_data": data})
    got = [
        (t.name, t.topic_id, [(p.error_code, p.base_offset) for p in t.partition_responses])
        for t in r.responses
    ]
    if version == 13:
        assert got == [("", topic_id, [(0, 0)]), ("", nowhere, [(ErrorCode.UNKNOWN_TOPIC_ID, -1)])]
        assert h.broker.metadata.topic("u") is None
    else:  # by name: "u" is auto-created
        assert [(n, e) for n, _, e in got] == [("t", [(0, 0)]), ("u", [(0, 0)])]
    assert fetched(h, "t")  # the record landed in "t"


def test_unknown_topic_without_auto_create(broker_harness: HarnessFactory) -> None:
    h = broker_harness({"auto.create.topics.enable": "false"})
    r = produce(h, "nope", batch(b"a"))
    assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert h.broker.metadata.topic("nope") is None


def test_unknown_partition(h: BrokerHarness) -> None:
    produce(h, "t", batch(b"a"))
    assert produce(h, "t", batch(b"a"), partition=7).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_corrupt_crc_is_corrupt_message(h: BrokerHarness) -> None:
    data = bytearray(batch(b"hello"))
    data[-1] ^= 0xFF
    r = produce(h, "t", bytes(data))
    assert r.error_code == ErrorCode.CORRUPT_MESSAGE
    assert "CRC" in r.error_message
    assert h.broker.replicas.partition_log("t", 0).log_end_offset == 0


def test_record_over_max_message_bytes(broker_harness: HarnessFactory) -> None:
    h = broker_harness({"message.max.bytes": "1000"})
    r = produce(h, "t", batch(b"x" * 2000))
    assert r.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert produce(h, "t", batch(b"x" * 100)).error_code == 0
    create(h, "small", {"max.message.bytes": "200"})
    assert produce(h, "small", batch(b"x" * 300)).error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_two_batches_in_one_partition_are_invalid(h: BrokerHarness) -> None:
    r = produce(h, "t", batch(b"a") + batch(b"b"))
    assert r.error_code == ErrorCode.INVALID_RECORD


def test_empty_records_are_invalid(h: BrokerHarness) -> None:
    assert produce(h, "t", b"").error_code == ErrorCode.INVALID_RECORD
    assert produce(h, "t", None).error_code == ErrorCode.INVALID_RECORD


def test_zstd_needs_produce_v7(h: BrokerHarness) -> None:
    z = batch(b"compressed", compression=4)
    assert produce(h, "t", z, version=6).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert produce(h, "t", z, version=7).error_code == 0


def test_invalid_acks(h: BrokerHarness) -> None:
    assert produce(h, "t", batch(b"a"), acks=2).error_code == ErrorCode.INVALID_REQUIRED_ACKS


def test_acks_zero_sends_no_response(h: BrokerHarness) -> None:
    frame = encode_request(
        0,
        9,
        1,
        {
            "acks": 0,
            "timeout_ms": 100,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch(b"a")}]}],
        },
    )
    assert h.raw(frame) is None
    assert h.broker.replicas.partition_log("t", 0).log_end_offset == 1


def test_acks_zero_error_closes_the_connection(h: BrokerHarness) -> None:
    bad = bytearray(batch(b"a"))
    bad[-1] ^= 1
    frame = encode_request(
        0,
        9,
        1,
        {
            "acks": 0,
            "timeout_ms": 100,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": bytes(bad)}]}],
        },
    )
    with pytest.raises(CloseConnection):
        h.raw(frame)


def test_log_append_time(broker_harness: HarnessFactory) -> None:
    now = [1_800_000_000.0]
    h = broker_harness(clock=lambda: now[0])
    create(h, "lat", {"message.timestamp.type": "LogAppendTime"})
    r = produce(h, "lat", batch(b"a", b"b", ts=1000))
    assert r.error_code == 0 and r.log_append_time_ms == 1_800_000_000_000
    h_, recs = decode_batch(fetched(h, "lat"))  # CRC recomputed: decode_batch verifies it
    assert h_.log_append_time and [x.timestamp for x in recs] == [1_800_000_000_000] * 2
    # the time index has the stamped time, not the producer's (the changed header is read anew)
    assert h.broker.replicas.partition_log("lat", 0).offset_for_timestamp(1_800_000_000_000) == (
        0,
        1_800_000_000_000,
    )
    assert produce(h, "t", batch(b"a", ts=1000)).log_append_time_ms == -1


@pytest.mark.parametrize(
    ("codec_name", "codec_id"), [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4), ("uncompressed", 0)]
)
def test_topic_compression_recompresses(h: BrokerHarness, codec_name: str, codec_id: int) -> None:
    create(h, "c", {"compression.type": codec_name})
    original = batch(
        b"v1",
        b"v2",
        key=b"k",
        compression=0 if codec_id else 1,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )
    assert produce(h, "c", original).error_code == 0
    header, recs = decode_batch(fetched(h, "c"))
    assert header.compression == codec_id
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 0, 0)
    assert [(r.offset, r.key, r.value) for r in recs] == [(0, b"k", b"v1"), (1, b"k", b"v2")]


def test_producer_compression_keeps_the_batch_as_sent(h: BrokerHarness) -> None:
    original = batch(b"v", compression=2)
    produce(h, "t", original)
    assert fetched(h, "t")[21:] == original[21:]  # only base offset / leader epoch patched


def idem(h: BrokerHarness, seq: int, n: int = 1, *, epoch: int = 0, pid: int = 42) -> Any:
    values = [b"r%d" % (seq + i) for i in range(n)]
    return produce(h, "idem", batch(*values, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def test_idempotent_duplicate_gets_the_original_offset(h: BrokerHarness) -> None:
    assert idem(h, 0, 2).base_offset == 0
    assert idem(h, 2, 1).base_offset == 2
    dup = idem(h, 0, 2)
    assert (dup.error_code, dup.base_offset) == (0, 0)
    assert h.broker.replicas.partition_log("idem", 0).log_end_offset == 3


def test_idempotent_sequence_errors(h: BrokerHarness) -> None:
    assert idem(h, 5).error_code == 0  # no state yet: any sequence is accepted
    assert idem(h, 9).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert idem(h, 0, epoch=1).error_code == 0  # a new epoch starts at 0
    assert idem(h, 1, epoch=0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert idem(h, 3, epoch=2).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_idempotent_duplicate_detected_after_restart(h: BrokerHarness) -> None:
    assert idem(h, 0, 3).base_offset == 0
    h.restart()
    dup = idem(h, 0, 3)
    assert (dup.error_code, dup.base_offset) == (0, 0)
    assert idem(h, 3).base_offset == 3
    assert h.broker.replicas.partition_log("idem", 0).log_end_offset == 4


def test_transactional_batches_need_a_transactional_id(h: BrokerHarness) -> None:
    r = produce(h, "t", batch(b"a", producer_id=1, producer_epoch=0, base_sequence=0, transactional=True))
    assert r.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_storage_error_is_kafka_storage_error(h: BrokerHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    produce(h, "t", batch(b"a"))
    plog = h.broker.replicas.partition_log("t", 0)
    import errno
    import os

    def enospc(*_a: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", enospc)
    r = produce(h, "t", batch(b"b"))
    monkeypatch.undo()
    assert r.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert plog.log_end_offset == 1
    assert produce(h, "t", batch(b"c")).base_offset == 1


def test_v8_error_message_and_v3_without_it(h: BrokerHarness) -> None:
    bad = bytearray(batch(b"a"))
    bad[-1] ^= 1
    assert produce(h, "t", bytes(bad), version=8).error_message
    assert produce(h, "t", bytes(bad), version=3).error_code == ErrorCode.CORRUPT_MESSAGE


# --- per-record errors (KIP-467): Kafka's LogValidator checks ----------------------------------

NOW = 1_800_000_000_000
LONG_MAX = 2**63 - 1


@pytest.fixture
def hc(broker_harness: HarnessFactory) -> BrokerHarness:
    """A broker whose clock stands still at NOW."""
    return broker_harness({"num.partitions": "1"}, clock=lambda: NOW / 1000)


def keyed(*keys: bytes | None, ts: int = NOW, **kw: Any) -> bytes:
    return build_batch([Record(i, ts + i, k, b"v%d" % i) for i, k in enumerate(keys)], **kw)


def test_compacted_topic_refuses_records_without_key(hc: BrokerHarness) -> None:
    create(hc, "c", {"cleanup.policy": "compact"})
    r = produce(hc, "c", keyed(b"a", None, b"b", None))
    no_key = "Compacted topic cannot accept message without key in topic partition c-0"
    assert r.error_code == ErrorCode.INVALID_RECORD and r.base_offset == -1
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [
        (1, no_key),
        (3, no_key),
    ]
    assert r.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{no_key}'), "
        f"RecordError(batchIndex=3, message='{no_key}')]"
    )
    assert hc.broker.replicas.partition_log("c", 0).log_end_offset == 0  # the whole batch is refused
    assert (
        produce(hc, "c", keyed(b"a", None), version=7).error_code == ErrorCode.INVALID_RECORD
    )  # no record_errors
    # Keys are found inside compressed batches too; a fully keyed batch (tombstones included) goes in.
    assert produce(hc, "c", keyed(None, compression=1)).record_errors[0].batch_index == 0
    ok = build_batch([Record(0, NOW, b"a", None), Record(1, NOW, b"b", b"x")], compression=1)
    assert (produce(hc, "c", ok).error_code, produce(hc, "delete-topic", keyed(None, None)).error_code) == (
        0,
        0,
    )


def test_create_time_outside_the_window_is_invalid_timestamp(hc: BrokerHarness) -> None:
    create(hc, "t")
    future = NOW + 3_600_000 + 1  # the default message.timestamp.after.max.ms is one hour
    r = produce(hc, "t", keyed(b"a", b"b", ts=future - 1))
    assert r.error_code == ErrorCode.INVALID_TIMESTAMP
    assert r.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [
        (1, f"Timestamp {future} of message with offset 1 is out of range. The timestamp should be within "
            f"[{NOW - LONG_MAX}, {NOW + 3_600_000}]"),
    ]  # fmt: skip
    assert produce(hc, "t", keyed(b"a", ts=NOW + 3_600_000)).error_code == 0  # the bound itself is inside
    assert produce(hc, "t", keyed(b"a", ts=0)).error_code == 0  # no lower bound by default
    assert produce(hc, "t", keyed(b"a", ts=-1)).error_code == 0  # NO_TIMESTAMP is never checked


def test_timestamp_window_from_topic_overrides_and_broker_defaults(broker_harness: HarnessFactory) -> None:
    props = {"log.message.timestamp.before.max.ms": "60000", "log.message.timestamp.after.max.ms": "1000"}
    h = broker_harness(props, clock=lambda: NOW / 1000)
    create(h, "b")
    assert produce(h, "b", keyed(b"a", ts=NOW - 60_000)).error_code == 0
    r = produce(h, "b", keyed(b"a", b"b", ts=NOW - 60_001))
    assert r.error_code == ErrorCode.INVALID_TIMESTAMP and [e.batch_index for e in r.record_errors] == [0]
    assert f"within [{NOW - 60_000}, {NOW + 1000}]" in r.record_errors[0].batch_index_error_message
    assert produce(h, "b", keyed(b"a", ts=NOW + 1001)).error_code == ErrorCode.INVALID_TIMESTAMP
    create(h, "o", {"message.timestamp.before.max.ms": "5000", "message.timestamp.after.max.ms": "86400000"})
    assert produce(h, "o", keyed(b"a", ts=NOW + 80_000_000)).error_code == 0
    assert (
        produce(h, "o", keyed(b"a", ts=NOW - 5001, compression=1)).error_code == ErrorCode.INVALID_TIMESTAMP
    )
    # LogAppendTime topics take any producer timestamp: the broker's replaces it.
    create(h, "l", {"message.timestamp.type": "LogAppendTime"})
    assert produce(h, "l", keyed(b"a", ts=NOW + 10**9)).error_code == 0
    # A key error and a timestamp error together: INVALID_TIMESTAMP, both records named.
    create(h, "ck", {"cleanup.policy": "compact"})
    r = produce(h, "ck", build_batch([Record(0, NOW, None, b"x"), Record(1, NOW + 10**7, b"k", b"y")]))
    assert r.error_code == ErrorCode.INVALID_TIMESTAMP and [e.batch_index for e in r.record_errors] == [
        0,
        1,
    ]
    assert h.broker.replicas.partition_log("ck", 0).log_end_offset == 0
