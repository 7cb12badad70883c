"""Answers through the proxy's rewriter: node addresses replaced in every version that has them,
learnt when they are brokers', other answers relayed byte for byte; ApiVersions intersected;
a Produce's acks read without decoding its records."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kcompat.proxy.api_versions import rewrite_api_versions, unsupported_answer
from kcompat.proxy.frames import Pending, produce_acks, rewrite_answer
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import decode_response, encode_request, encode_response, response_codec

UP = ("10.9.8.7", 9092)
PROXY_HOST = "proxy.example"
BASE = 30000


def endpoint(node_id: int) -> tuple[str, int]:
    return PROXY_HOST, BASE + node_id


def frame_of(key: int, version: int, body: dict[str, Any], correlation: int = 7) -> bytes:
    chunks = encode_response(key, version, correlation, response_codec(key).build(body))
    return b"".join(bytes(c) for c in chunks)[4:]


def through(key: int, version: int, body: dict[str, Any]) -> tuple[Any, list[tuple[int, str, int]], bytes]:
    """(decoded answer the client gets, what was learnt, the frame the upstream sent)."""
    frame = frame_of(key, version, body)
    learnt: list[tuple[int, str, int]] = []
    chunks, _ = rewrite_answer(Pending(key, version, 7), frame, endpoint, lambda *a: learnt.append(a))
    out = b"".join(bytes(c) for c in chunks)
    assert struct.unpack(">i", out[:4])[0] == len(out) - 4
    correlation, answer = decode_response(key, version, out[4:])
    assert correlation == 7
    return answer, learnt, frame


@pytest.mark.parametrize("version", range(14))
def test_metadata_brokers_in_every_version(version: int) -> None:
    body = {"brokers": [{"node_id": 1, "host": UP[0], "port": UP[1]}, {"node_id": 2, "host": "b2", "port": 9093}],
            "controller_id": 1}  # fmt: skip
    answer, learnt, _ = through(3, version, body)
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [
        (1, PROXY_HOST, 30001),
        (2, PROXY_HOST, 30002),
    ]
    assert learnt == [(1, *UP), (2, "b2", 9093)]


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_single_and_list(version: int) -> None:
    body = {"node_id": 3, "host": UP[0], "port": UP[1],
            "coordinators": [{"key": "g", "node_id": 3, "host": UP[0], "port": UP[1]}]}  # fmt: skip
    answer, learnt, _ = through(10, version, body)
    if version <= 3:
        assert (answer.node_id, answer.host, answer.port) == (3, PROXY_HOST, 30003)
    else:
        assert [(c.node_id, c.host, c.port) for c in answer.coordinators] == [(3, PROXY_HOST, 30003)]
    assert learnt == [(3, *UP)]


def test_find_coordinator_error_is_left_alone() -> None:
    body = {"error_code": 15, "node_id": -1, "host": "", "port": -1}
    answer, learnt, _ = through(10, 3, body)
    assert (answer.node_id, answer.host, answer.port) == (-1, "", -1) and learnt == []


@pytest.mark.parametrize(("key", "version"), [(0, 10), (0, 13), (1, 16), (1, 18), (78, 1), (79, 1)])
def test_kip951_node_endpoints(key: int, version: int) -> None:
    body = {"node_endpoints": [{"node_id": 2, "host": UP[0], "port": UP[1], "rack": "r"}]}
    answer, learnt, _ = through(key, version, body)
    assert [(e.node_id, e.host, e.port, e.rack) for e in answer.node_endpoints] == [
        (2, PROXY_HOST, 30002, "r")
    ]
    assert learnt == [(2, *UP)]


@pytest.mark.parametrize(("key", "version"), [(0, 9), (1, 15), (2, 9), (19, 7)])
def test_answers_without_node_fields_are_relayed_as_bytes(key: int, version: int) -> None:
    frame = frame_of(key, version, {})
    chunks, body = rewrite_answer(Pending(key, version, 7), frame, endpoint, lambda *a: None)
    assert body is None
    assert b"".join(bytes(c) for c in chunks) == struct.pack(">i", len(frame)) + frame


def test_unknown_api_key_is_relayed_as_bytes() -> None:
    frame = struct.pack(">i", 7) + b"\x00\x01whatever"
    chunks, body = rewrite_answer(Pending(999, 0, 7), frame, endpoint, lambda *a: None)
    assert body is None and b"".join(bytes(c) for c in chunks)[4:] == frame


def test_describe_cluster_brokers_learnt_controllers_not() -> None:
    brokers = [{"broker_id": 4, "host": UP[0], "port": UP[1]}]
    answer, learnt, _ = through(60, 1, {"endpoint_type": 1, "brokers": brokers})
    assert (answer.brokers[0].host, answer.brokers[0].port) == (PROXY_HOST, 30004) and learnt == [(4, *UP)]
    answer, learnt, _ = through(60, 1, {"endpoint_type": 2, "brokers": brokers})
    assert (answer.brokers[0].host, answer.brokers[0].port) == (PROXY_HOST, 30004) and learnt == []


def test_describe_quorum_listeners_rewritten_not_learnt() -> None:
    body = {"nodes": [{"node_id": 3000, "listeners": [{"name": "CONTROLLER", "host": UP[0], "port": 9093}]}]}
    answer, learnt, _ = through(55, 2, body)
    listener = answer.nodes[0].listeners[0]
    assert (listener.host, listener.port) == (PROXY_HOST, 33000) and learnt == []


def api_versions_frame(version: int, keys: list[tuple[int, int, int]], error: int = 0) -> bytes:
    return frame_of(18, version, {
        "error_code": error,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in keys],
    })  # fmt: skip


def test_api_versions_intersected_with_the_proxy_codec() -> None:
    metadata_high = APIS[3].versions.high
    assert metadata_high is not None
    frame = api_versions_frame(3, [(3, 0, metadata_high + 5), (0, 3, 13), (999, 0, 4), (1, 4, 99)])
    out = rewrite_api_versions(3, frame)
    assert out is not None
    _, answer = decode_response(18, 3, b"".join(bytes(c) for c in out)[4:])
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert ranges[3] == (0, metadata_high)  # capped: the proxy must decode Metadata to rewrite it
    assert ranges[0] == (3, 13)
    assert 999 not in ranges  # an API the proxy has no schema for is not offered
    assert ranges[1] == (4, APIS[1].versions.high)


def test_api_versions_error_answer_relayed() -> None:
    frame = api_versions_frame(0, [(18, 0, 3)], error=ErrorCode.UNSUPPORTED_VERSION)
    assert rewrite_api_versions(3, frame) is None


def test_unsupported_api_versions_answered_in_v0() -> None:
    out = b"".join(bytes(c) for c in unsupported_answer(42))[4:]
    correlation, answer = decode_response(18, 0, out)
    assert correlation == 42 and answer.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [k.api_key for k in answer.api_keys] == [18]


@pytest.mark.parametrize("version", [3, 8, 9, 11, 13])
@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("client_id", [None, "", "a-client"])
def test_produce_acks(version: int, acks: int, client_id: str | None) -> None:
    body = {"acks": acks, "timeout_ms": 100, "transactional_id": "tx", "topic_data": []}
    frame = encode_request(0, version, 5, body, client_id)[4:]
    assert produce_acks(frame, version) == acks
