"""The data-path answers (Produce, Fetch, ShareFetch, ShareAcknowledge) leave the proxy as the
very frame that came in unless they name a node: the skim walks their bytes by the schema and
agrees with a full decode in every version, records, tagged fields and all."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from kcompat.proxy.frames import Pending, rewrite_answer
from kcompat.proxy.skim import SKIMMED, names_nodes, skimmed
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import decode_response, encode_response, response_codec

RECORDS = bytes(range(256)) * 40  # stands in for a record batch: skipped by its length, never read
TOPIC_ID = uuid.UUID("5f2b9e0e-6c1a-4f3e-9a57-0c3c2b1d8e11")
ENDPOINTS = [{"node_id": 2, "host": "10.9.8.7", "port": 9092, "rack": "r"}]


def fetch_body(endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    partition = {
        "partition_index": 0, "high_watermark": 99, "records": RECORDS,
        "aborted_transactions": [{"producer_id": 5, "first_offset": 3}],
        "current_leader": {"leader_id": 1, "leader_epoch": 4},
        "diverging_epoch": {"epoch": 2, "end_offset": 7}, "preferred_read_replica": 1,
    }  # fmt: skip
    other = {"partition_index": 1, "error_code": 6, "records": None}
    topics = [{"topic": "orders", "topic_id": TOPIC_ID, "partitions": [partition, other]}]
    return {"throttle_time_ms": 1, "session_id": 3, "responses": topics, "node_endpoints": endpoints}


def produce_body(endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    partition = {"index": 0, "base_offset": 10, "current_leader": {"leader_id": 1, "leader_epoch": 4},
                 "record_errors": [{"batch_index": 0, "batch_index_error_message": "x"}]}  # fmt: skip
    return {"responses": [{"name": "orders", "topic_id": TOPIC_ID, "partition_responses": [partition]}],
            "node_endpoints": endpoints}  # fmt: skip


def share_body(key: int, endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    partition: dict[str, Any] = {"partition_index": 0, "current_leader": {"leader_id": 1, "leader_epoch": 4}}
    if key == 78:
        partition |= {"records": RECORDS, "acquired_records": [{"first_offset": 0, "last_offset": 9}]}
    return {"error_message": None, "responses": [{"topic_id": TOPIC_ID, "partitions": [partition]}],
            "node_endpoints": endpoints}  # fmt: skip


def body_of(key: int, endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    if key == 1:
        return fetch_body(endpoints)
    if key == 0:
        return produce_body(endpoints)
    return share_body(key, endpoints)


def frame_of(key: int, version: int, body: dict[str, Any]) -> bytes:
    chunks = encode_response(key, version, 7, response_codec(key).build(body))
    return b"".join(bytes(c) for c in chunks)[4:]


CASES = [
    (key, v)
    for key in sorted(SKIMMED)
    for v in range(APIS[key].versions.low, (APIS[key].versions.high or 0) + 1)
    if key not in (0, 1) or v >= {0: 10, 1: 16}[key]  # before KIP-951 they are relayed undecoded
]


def test_the_data_path_answers_are_skimmed() -> None:
    assert {0, 1, 78, 79} == SKIMMED
    assert all(skimmed(k) for k in SKIMMED)  # their node fields are all top-level ones
    assert not skimmed(55) and not skimmed(2)  # DescribeQuorum's are nested; ListOffsets has none


@pytest.mark.parametrize(("key", "version"), CASES)
def test_no_node_the_frame_leaves_untouched(key: int, version: int) -> None:
    frame = frame_of(key, version, body_of(key, []))
    assert not names_nodes(key, version, frame)
    chunks, decoded = rewrite_answer(Pending(key, version, 7), frame, lambda n: ("proxy", 1), lambda *a: None)
    assert decoded is None
    assert chunks[1] is frame  # the bytes received, not a copy nor an encoding
    assert chunks[0] == struct.pack(">i", len(frame))


@pytest.mark.parametrize(("key", "version"), CASES)
def test_a_node_endpoint_is_found_and_rewritten(key: int, version: int) -> None:
    frame = frame_of(key, version, body_of(key, ENDPOINTS))
    assert names_nodes(key, version, frame)
    learnt: list[tuple[int, str, int]] = []
    chunks, decoded = rewrite_answer(
        Pending(key, version, 7), frame, lambda n: ("proxy", 30000 + n), lambda *a: learnt.append(a)
    )
    out = b"".join(bytes(c) for c in chunks)
    _, answer = decode_response(key, version, out[4:])
    assert decoded is not None
    assert [(e.node_id, e.host, e.port) for e in answer.node_endpoints] == [(2, "proxy", 30002)]
    assert learnt == [(2, "10.9.8.7", 9092)]


@pytest.mark.parametrize(("key", "version"), CASES)
def test_the_skim_agrees_with_the_decoder_on_every_prefix(key: int, version: int) -> None:
    """A truncated answer is refused, as the decoder refuses it, never read past its end."""
    frame = frame_of(key, version, body_of(key, ENDPOINTS))
    for cut in (len(frame) - 1, len(frame) // 2, 6):
        with pytest.raises(DecodeError):
            decode_response(key, version, frame[:cut])
        with pytest.raises(DecodeError):
            names_nodes(key, version, frame[:cut])
    with pytest.raises(DecodeError):
        names_nodes(key, version, frame + b"\x00")
