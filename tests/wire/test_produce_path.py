"""The common Produce's own decoder and answer template against the generic codec: the same frames
and answers give the same requests and bytes; any other shape is left to the codec (None)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.wire.errors import DecodeError
from kcompat.wire.produce_path import decode_produce, encode_produce_answer
from kcompat.wire.protocol import UnsupportedRequest, decode_request, encode_request, encode_response
from kcompat.wire.types.produce import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)

VERSIONS = range(3, 13)
names = st.text(min_size=1, max_size=140)
records = st.one_of(
    st.binary(max_size=200), st.integers(16380, 16390).map(lambda n: b"r" * n)
)  # 2, 3-byte sizes
partitions = st.lists(
    st.fixed_dictionaries({"index": st.integers(0, 2**31 - 1), "records": records}), max_size=3
)
topics = st.lists(st.fixed_dictionaries({"name": names, "partition_data": partitions}), max_size=3)


def frame(version: int, body: dict[str, Any], client_id: str | None = "producer-1") -> memoryview:
    return memoryview(bytearray(encode_request(0, version, 7, body, client_id=client_id)[4:]))


def same_as_codec(f: memoryview) -> None:
    fast = decode_produce(f)
    try:
        generic = decode_request(f, strict=False)
    except (DecodeError, UnsupportedRequest):
        assert fast is None
        return
    assert fast is None or fast == generic


@settings(max_examples=150, deadline=None)
@given(
    version=st.sampled_from(VERSIONS),
    txn=st.one_of(st.none(), st.text(max_size=140)),
    client=st.one_of(st.none(), st.text(max_size=20)),
    acks=st.sampled_from([-1, 0, 1, 5]),
    topic_data=topics,
)
def test_the_decoder_reads_what_the_codec_reads(version, txn, client, acks, topic_data) -> None:
    body = {"transactional_id": txn, "acks": acks, "timeout_ms": 30000, "topic_data": topic_data}
    f = frame(version, body, client)
    fast = decode_produce(f)
    common = len((txn or "").encode()) < 127 and all(len(t["name"].encode()) < 127 for t in topic_data)
    assert fast is not None or (version >= 9 and not common)
    if fast is not None:
        assert fast == decode_request(f, strict=False)
        for t in fast.body.topic_data:  # views of the frame, not copies
            assert all(p.records is None or p.records.obj is f.obj for p in t.partition_data)


@settings(max_examples=150, deadline=None)
@given(
    version=st.sampled_from(VERSIONS), topic_data=topics, cut=st.integers(0, 400), junk=st.binary(max_size=3)
)
def test_cut_or_extended_frames_are_read_as_the_codec_reads_them_or_left_to_it(
    version, topic_data, cut, junk
):
    f = bytes(frame(version, {"acks": 1, "timeout_ms": 5, "topic_data": topic_data}))
    same_as_codec(memoryview(bytearray(f[: max(len(f) - cut, 0)])))
    same_as_codec(memoryview(bytearray(f + junk)))
    if len(f) > 20:
        flipped = bytearray(f)
        flipped[cut % len(f)] ^= 0x80  # a length's varint continued, a sign flipped
        same_as_codec(memoryview(flipped))


@pytest.mark.parametrize("version", [9, 12])
def test_tagged_fields_and_null_records_are_left_to_the_codec(version: int) -> None:
    body = {
        "acks": 1,
        "timeout_ms": 5,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}],
    }
    assert decode_produce(frame(version, body)) is None
    ok = bytearray(frame(version, {**body, "topic_data": [{"name": "t", "partition_data": []}]}))
    assert decode_produce(memoryview(ok)) is not None
    ok[-1:] = b"\x01\x05\x01\x00"  # one unknown tag (5) of one byte in the body's tagged fields
    assert decode_produce(memoryview(ok)) is None
    assert decode_request(memoryview(ok), strict=False).body._unknown_tags == [(5, b"\x00")]
    one = {**body, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"RECS"}]}]}
    f = bytes(frame(version, one))
    at = f.index(b"RECS") + 4  # the partition's tagged fields, then the topic's
    for where in (at, at + 1):
        tagged = memoryview(bytearray(f[:where] + b"\x01\x05\x01\x00" + f[where + 1 :]))
        assert decode_produce(tagged) is None
        t = decode_request(tagged, strict=False).body.topic_data[0]
        assert (t if where > at else t.partition_data[0])._unknown_tags == [(5, b"\x00")]


def test_other_keys_and_versions_are_not_read() -> None:
    assert decode_produce(memoryview(bytearray(encode_request(1, 12, 7, {})[4:]))) is None
    body = {"acks": 1, "timeout_ms": 5, "topic_data": []}
    assert decode_produce(frame(13, body)) is None
    assert decode_produce(memoryview(bytearray(b"\x00\x00\x00"))) is None


def answer(name: str, **partition: Any) -> ProduceResponse:
    p = PartitionProduceResponse(index=partition.pop("index", 3), **partition)
    return ProduceResponse(responses=[TopicProduceResponse(name=name, partition_responses=[p])])


@settings(max_examples=150, deadline=None)
@given(
    version=st.sampled_from(VERSIONS),
    name=names,
    index=st.integers(0, 2**31 - 1),
    base=st.integers(-1, 2**63 - 1),
    append_time=st.integers(-1, 2**42),
    log_start=st.integers(-1, 2**40),
    throttle=st.integers(0, 2**31 - 1),
    correlation=st.integers(-(2**31), 2**31 - 1),
)
def test_the_template_writes_the_codecs_bytes(
    version, name, index, base, append_time, log_start, throttle, correlation
):
    body = answer(
        name, index=index, base_offset=base, log_append_time_ms=append_time, log_start_offset=log_start
    )
    body.throttle_time_ms = throttle
    fast = encode_produce_answer(version, correlation, body)
    if fast is None:
        assert version >= 9 and len(name.encode()) >= 126
    else:
        assert fast == encode_response(0, version, correlation, body)


@pytest.mark.parametrize(
    "body",
    [
        answer("t", error_code=6),
        answer("t", error_message="no"),
        answer("t", record_errors=[BatchIndexAndErrorMessage(batch_index=0)]),
        answer("t", current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=2)),
        ProduceResponse(responses=[]),
        ProduceResponse(responses=[TopicProduceResponse(name="t", partition_responses=[])]),
        ProduceResponse(
            responses=[
                TopicProduceResponse(
                    name="t", partition_responses=[PartitionProduceResponse(index=i) for i in (0, 1)]
                )
            ]
        ),
        ProduceResponse(responses=[TopicProduceResponse(name=n) for n in "ab"]),
    ],
)
def test_other_answers_are_left_to_the_codec(body: ProduceResponse) -> None:
    assert encode_produce_answer(10, 1, body) is None
    with_endpoints = answer("t")
    with_endpoints.node_endpoints = [NodeEndpoint(node_id=1, host="h", port=1)]
    assert encode_produce_answer(10, 1, with_endpoints) is None
    assert encode_produce_answer(13, 1, answer("t")) is None
