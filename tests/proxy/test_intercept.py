"""The proxy's fault and capture hooks (kcompat/proxy/intercept.py) without sockets: what each
rule kind does to a request or an answer, and what a capture is shown."""

from __future__ import annotations

import struct

import pytest

from kcompat.capture import CaptureEngine, spec_from_json
from kcompat.faults import FaultEngine, rule_from_json
from kcompat.proxy.hooks import AnswerNow, CloseConnection, Exchange, HoldAnswer, HoldRequest
from kcompat.proxy.intercept import Intercept
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import decode_response, encode_request

PRODUCE = {
    "acks": -1,
    "timeout_ms": 1000,
    "topic_data": [{"name": "orders", "partition_data": [{"index": 0}]}],
}
METADATA = {"topics": None}


def exchange(api_key: int, version: int, correlation: int, node: int | None = 1) -> Exchange:
    return Exchange(7, ("127.0.0.1", 5000), node, api_key, version, correlation)


def frame(api_key: int, version: int, correlation: int, body: dict) -> bytes:
    return encode_request(api_key, version, correlation, body, client_id="app")[4:]


def metadata_answer(correlation: int) -> list[bytes]:
    return [struct.pack(">ii", 8, correlation), b"\0\0\0\0"]  # the hooks never decode it


def intercept(*rules: dict) -> Intercept:
    engine = FaultEngine()
    for rule in rules:
        engine.add(rule_from_json(rule))
    return Intercept(engine, CaptureEngine())


def test_nothing_set_decodes_nothing() -> None:
    hooks = intercept()
    assert hooks.request(exchange(3, 12, 1), b"not a request") is None
    assert hooks.response(exchange(3, 12, 1), [b"x"]) is None


def test_an_error_is_answered_by_the_proxy_for_the_matching_node_only() -> None:
    hooks = intercept(
        {
            "match": {"api": "Produce", "broker": 2},
            "action": {"kind": "error", "error": "NOT_LEADER_OR_FOLLOWER"},
        }
    )
    hooks.request(exchange(0, 9, 1, node=1), frame(0, 9, 1, PRODUCE))  # node 1: relayed
    with pytest.raises(AnswerNow) as answered:
        hooks.request(exchange(0, 9, 2, node=2), frame(0, 9, 2, PRODUCE))
    correlation, body = decode_response(0, 9, b"".join(answered.value.chunks)[4:])
    assert correlation == 2
    assert body.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_an_error_on_an_acks_0_produce_closes_the_connection() -> None:
    hooks = intercept({"match": {"api": "Produce"}, "action": {"kind": "error", "error": 6}})
    with pytest.raises(CloseConnection):
        hooks.request(exchange(0, 9, 1), frame(0, 9, 1, {**PRODUCE, "acks": 0}))


@pytest.mark.parametrize("when", ["before", "after"])
def test_drop_closes_before_or_after_the_answer(when: str) -> None:
    hooks = intercept({"match": {"api": "Metadata"}, "action": {"kind": "drop", "when": when}})
    if when == "before":
        with pytest.raises(CloseConnection):
            hooks.request(exchange(3, 12, 1), frame(3, 12, 1, METADATA))
        return
    assert hooks.request(exchange(3, 12, 1), frame(3, 12, 1, METADATA)) is None
    with pytest.raises(CloseConnection):
        hooks.response(exchange(3, 12, 1), metadata_answer(1))


def test_duplicate_changes_only_its_own_answer() -> None:
    hooks = intercept({"match": {"api": "Metadata"}, "action": {"kind": "duplicate"}, "trigger": "once"})
    hooks.request(exchange(3, 12, 1), frame(3, 12, 1, METADATA))
    hooks.request(exchange(3, 12, 2), frame(3, 12, 2, METADATA))
    first = hooks.response(exchange(3, 12, 1), metadata_answer(1))
    assert first is not None and b"".join(first) == b"".join(metadata_answer(1)) * 2
    assert hooks.response(exchange(3, 12, 2), metadata_answer(2)) is None


@pytest.mark.parametrize(("when", "held"), [("before", HoldRequest), ("after", HoldAnswer)])
def test_delay_holds_the_request_or_its_answer(when: str, held: type[Exception]) -> None:
    hooks = intercept(
        {"match": {"api": "Metadata"}, "action": {"kind": "delay", "delay_ms": 250, "when": when}}
    )
    if when == "before":
        with pytest.raises(HoldRequest) as raised:
            hooks.request(exchange(3, 12, 1), frame(3, 12, 1, METADATA))
        assert raised.value.delay == 0.25
        return
    assert hooks.request(exchange(3, 12, 1), frame(3, 12, 1, METADATA)) is None
    with pytest.raises(HoldAnswer) as answer:
        hooks.response(exchange(3, 12, 1), metadata_answer(1))
    assert answer.value.delay == 0.25


@pytest.mark.parametrize("when", ["before", "after"])
def test_blackhole_never_sends_the_answer(when: str) -> None:
    hooks = intercept({"match": {"api": "Metadata"}, "action": {"kind": "blackhole", "when": when}})
    cid = hooks.captures.start(spec_from_json({"match": {"api": "Metadata"}}))
    if when == "before":
        with pytest.raises(HoldRequest) as raised:
            hooks.request(exchange(3, 12, 1), frame(3, 12, 1, METADATA))
        assert raised.value.delay is None
    else:
        hooks.request(exchange(3, 12, 1), frame(3, 12, 1, METADATA))
        with pytest.raises(HoldAnswer) as answer:
            hooks.response(exchange(3, 12, 1), metadata_answer(1))
        assert answer.value.delay is None
    assert hooks.captures.captures[cid].seen == 0  # the client got nothing
    assert not hooks._capturing


def test_throttle_holds_each_answer_for_its_size_at_the_rate() -> None:
    hooks = intercept({"match": {"api": "Metadata"}, "action": {"kind": "throttle", "bytes_per_second": 100}})
    delays = []
    for correlation in (1, 2):
        hooks.request(exchange(3, 12, correlation), frame(3, 12, correlation, METADATA))
        with pytest.raises(HoldAnswer) as answer:
            hooks.response(exchange(3, 12, correlation), metadata_answer(correlation))
        assert answer.value.delay is not None
        delays.append(answer.value.delay)
    assert delays[0] == pytest.approx(0.12, abs=0.01)  # 12 bytes at 100 bytes/s
    assert delays[1] == pytest.approx(0.24, abs=0.02)  # behind the first one's bytes


def test_partition_refuses_new_connections_and_closes_matching_ones() -> None:
    hooks = intercept({"match": {"broker": 2, "peer": "127.0.0.1"}, "action": {"kind": "partition"}})
    assert hooks.connect(1, ("127.0.0.1", 5000))
    assert hooks.connect(None, ("127.0.0.1", 5000))
    assert not hooks.connect(2, ("127.0.0.1", 5000))
    assert hooks.connect(2, ("10.0.0.9", 5000))
    hooks.request(exchange(3, 12, 1, node=1), frame(3, 12, 1, METADATA))
    with pytest.raises(CloseConnection):
        hooks.request(exchange(3, 12, 2, node=2), frame(3, 12, 2, METADATA))
    hooks.faults.clear()
    assert hooks.connect(2, ("127.0.0.1", 5000))


def test_a_connection_check_consults_only_partition_rules() -> None:
    hooks = intercept({"action": {"kind": "error", "error": 6}, "trigger": "once"})
    assert hooks.connect(1, ("127.0.0.1", 5000))
    with pytest.raises(AnswerNow):  # the once-rule was not spent by the connection
        hooks.request(exchange(3, 12, 1), frame(3, 12, 1, METADATA))


def test_a_capture_sees_the_injected_answer() -> None:
    hooks = intercept(
        {"match": {"api": "Metadata"}, "action": {"kind": "error", "error": "UNKNOWN_SERVER_ERROR"}}
    )
    cid = hooks.captures.start(spec_from_json({"match": {"api": "Metadata"}}))
    with pytest.raises(AnswerNow) as answered:
        hooks.request(exchange(3, 12, 1), frame(3, 12, 1, METADATA))
    assert hooks.response(exchange(3, 12, 1), answered.value.chunks) is None
    assert hooks.captures.captures[cid].seen == 1
