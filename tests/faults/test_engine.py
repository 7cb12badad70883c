"""The fault rule engine (kcompat/faults): rules from JSON, matching, the trigger table, errors
for any API, and what duplicate and corrupt do to an answer. Pure: no broker, no clock."""

from __future__ import annotations

import struct
import uuid

import pytest

from kcompat.faults import (
    FaultEngine,
    RequestFacts,
    RuleError,
    corrupt,
    duplicate,
    error_response,
    rule_from_json,
)
from kcompat.faults.rules import rule_to_json
from kcompat.faults.triggers import TRIGGERS
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_codec,
)

PRODUCE = {
    "acks": -1,
    "timeout_ms": 1000,
    "topic_data": [{"name": "orders", "partition_data": [{"index": 0}, {"index": 2}]}],
}


def produce_facts(version: int = 9, client_id: str = "app", body: dict | None = None) -> RequestFacts:
    frame = encode_request(0, version, 1, body or PRODUCE, client_id=client_id)
    req = decode_request(frame[4:])
    return RequestFacts(
        0, version, client_id, principal="User:alice", peer="127.0.0.1", broker=1, body=req.body
    )


def engine_with(*rules: dict) -> FaultEngine:
    engine = FaultEngine()
    for r in rules:
        engine.add(rule_from_json(r))
    return engine


def fires(engine: FaultEngine, n: int, facts: RequestFacts | None = None) -> list[bool]:
    return [engine.decide(facts or produce_facts()) is not None for _ in range(n)]


# -- triggers: the table, row by row -------------------------------------------------------------


@pytest.mark.parametrize(
    ("trigger", "expected", "seen"),
    [
        ("once", [True, False, False, False, False], 1),
        ("always", [True] * 5, 5),
        ({"nth": 3}, [False, False, True, False, False], 3),
        ({"times": 2}, [True, True, False, False, False], 2),
    ],
)
def test_triggers(trigger: object, expected: list[bool], seen: int) -> None:
    engine = engine_with({"match": {"api": "Produce"}, "action": "drop", "trigger": trigger})
    assert fires(engine, 5) == expected
    listed = engine.listing()[0]
    assert listed["seen"] == seen and listed["fired"] == sum(expected)  # a spent rule is not consulted
    assert listed["state"] == ("armed" if trigger == "always" else "spent")


def test_the_table_has_a_row_per_kind() -> None:
    assert set(TRIGGERS) == {"once", "nth", "times", "always", "probability"}


def test_probability_is_reproducible_with_a_seed() -> None:
    rule = {"action": "drop", "trigger": {"probability": 0.3, "seed": 42}}
    first, again = fires(engine_with(rule), 200), fires(engine_with(rule), 200)
    other = fires(engine_with({**rule, "trigger": {"probability": 0.3, "seed": 7}}), 200)
    assert first == again
    assert first != other
    assert 30 < sum(first) < 90  # about 60 of 200


def test_first_firing_rule_decides_and_later_triggers_do_not_advance() -> None:
    engine = engine_with(
        {
            "match": {"api": "Produce"},
            "action": {"kind": "error", "error": "NOT_LEADER_OR_FOLLOWER"},
            "trigger": "once",
        },
        {"match": {"api": "Produce"}, "action": "drop", "trigger": "once"},
    )
    kinds = [v.action.kind if (v := engine.decide(produce_facts())) else None for _ in range(3)]
    assert kinds == ["error", "drop", None]
    assert engine.fired_by_action == {"error": 1, "drop": 1}


def test_cleared_rules_keep_their_counts_by_action() -> None:
    engine = engine_with({"action": "drop"})
    fires(engine, 3)
    assert engine.clear() == 1 and not engine.armed
    assert engine.decide(produce_facts()) is None
    assert engine.fired_by_action == {"drop": 3}


def test_replace_starts_the_trigger_afresh() -> None:
    engine = engine_with({"action": "drop", "trigger": "once"})
    assert fires(engine, 2) == [True, False]
    assert engine.replace(
        1,
        rule_from_json({"action": "delay", "trigger": "once"} | {"action": {"kind": "delay", "delay_ms": 5}}),
    )
    assert fires(engine, 2) == [True, False]
    assert not engine.replace(99, rule_from_json({"action": "drop"}))
    assert engine.remove(1) and not engine.remove(1)


# -- matching ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("match", "hit"),
    [
        ({"api": "Produce"}, True),
        ({"api": 0}, True),
        ({"api": ["Fetch", "EndTxn"]}, False),
        ({"versions": "9+"}, True),
        ({"versions": "3-8"}, False),
        ({"versions": 9}, True),
        ({"topic": "orders"}, True),
        ({"topic": ["x", "orders"]}, True),
        ({"topic": "other"}, False),
        ({"partition": 2}, True),
        ({"partition": 1}, False),
        ({"topic": "orders", "partition": [1, 0]}, True),
        ({"client_id": "app"}, True),
        ({"client_id": "other"}, False),
        ({"principal": "User:alice"}, True),
        ({"principal": "User:bob"}, False),
        ({"peer": "127.0.0.1"}, True),
        ({"broker": 1}, True),
        ({"broker": 2}, False),
        ({"group_id": "g"}, False),
        ({"transactional_id": "t"}, False),
    ],
)
def test_matchers(match: dict, hit: bool) -> None:
    engine = engine_with({"match": match, "action": "drop"})
    assert (engine.decide(produce_facts()) is not None) == hit


def test_names_from_bodies_of_other_apis() -> None:
    def facts(key: int, version: int, body: dict, topic_name=None) -> RequestFacts:
        req = decode_request(encode_request(key, version, 1, body)[4:])
        return RequestFacts(key, version, "c", body=req.body, topic_name=topic_name)

    txn = facts(26, 4, {"transactional_id": "tx-1", "producer_id": 1, "producer_epoch": 0, "committed": True})
    assert txn.names.transactional_ids == {"tx-1"}
    groups = facts(15, 5, {"groups": ["g1", "g2"]})
    assert groups.names.group_ids == {"g1", "g2"}
    commit = facts(8, 8, {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 4}]}]})
    assert (commit.names.group_ids, commit.names.topics, commit.names.partitions) == ({"g"}, {"t"}, {4})
    tid = uuid.uuid4()
    fetch = facts(
        1, 13, {"topics": [{"topic_id": tid, "partitions": [{"partition": 1}]}]}, {tid: "by-id"}.get
    )
    assert fetch.names.topics == {"by-id"} and fetch.names.partitions == {1}
    assert RequestFacts(1, 13, "c").names.topics == set()  # no body: no names, no match by name


# -- hostile rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([], "a rule is a JSON object"),
        ({"action": "explode"}, "action.kind: 'explode'"),
        ({}, "action: an object with kind"),
        ({"action": "drop", "extra": 1}, "rule: unknown field(s) extra"),
        ({"action": "drop", "match": {"api": "Nope"}}, "match.api: 'Nope' is no Kafka API"),
        ({"action": "drop", "match": {"api": 999}}, "match.api: 999"),
        ({"action": "drop", "match": {"topik": "x"}}, "match: unknown field(s) topik"),
        ({"action": "drop", "match": {"partition": "zero"}}, "match.partition"),
        ({"action": "drop", "match": {"partition": True}}, "match.partition"),
        ({"action": "drop", "match": {"topic": []}}, "match.topic: one value or a list"),
        ({"action": "drop", "match": {"versions": "a-b"}}, "match.versions"),
        ({"action": {"kind": "error", "error": "NO_SUCH"}}, "action.error: 'NO_SUCH'"),
        ({"action": {"kind": "error", "error": 12345}}, "action.error: 12345"),
        ({"action": {"kind": "delay"}}, "action.delay_ms: required"),
        ({"action": {"kind": "delay", "delay_ms": -1}}, "action.delay_ms: -1"),
        ({"action": {"kind": "delay", "delay_ms": 10**30}}, "action.delay_ms"),
        ({"action": {"kind": "throttle"}}, "action.bytes_per_second: required"),
        ({"action": {"kind": "corrupt", "when": "before"}}, "corrupt acts on the answer"),
        ({"action": {"kind": "error", "error": 6, "when": "after"}}, "error acts before"),
        ({"action": "drop", "trigger": "sometimes"}, "trigger:"),
        ({"action": "drop", "trigger": {"nth": 0}}, "trigger.nth: 0"),
        ({"action": "drop", "trigger": {"probability": 2}}, "trigger.probability: 2"),
        ({"action": "drop", "trigger": {"probability": 0.5, "seed": "x"}}, "trigger.seed"),
        ({"action": "drop", "trigger": {"seed": 1}}, "trigger.seed: only with probability"),
    ],
)
def test_hostile_rules_name_the_field(data: object, says: str) -> None:
    with pytest.raises(RuleError) as e:
        rule_from_json(data)
    assert says in str(e.value)


def test_json_round_trip() -> None:
    data = {
        "match": {
            "api": ["Produce"],
            "topic": ["orders"],
            "partition": [0],
            "versions": "9+",
            "client_id": ["a"],
        },
        "action": {"kind": "error", "error": "NOT_LEADER_OR_FOLLOWER", "when": "before"},
        "trigger": {"probability": 0.5, "seed": 3},
    }
    assert rule_to_json(rule_from_json(data)) == data
    assert (
        rule_from_json({"action": {"kind": "error", "error": 48}}).action.error == ErrorCode.INVALID_TXN_STATE
    )


# -- answers -------------------------------------------------------------------------------------


def test_an_error_response_for_every_api_and_version() -> None:
    """Built from the schema: every API and version encodes, and its ErrorCode fields carry the error."""
    for key, api in APIS.items():
        high = api.versions.high
        assert high is not None
        for version in range(api.versions.low, high + 1):
            body = error_response(key, version, request_codec(key).new(), 48, "injected")
            chunks = encode_response(key, version, 7, body)
            frame = b"".join(bytes(c) for c in chunks)
            correlation, decoded = decode_response(key, version, frame[4:])
            assert correlation == 7
            top = [f for f in api.response.fields if f.name.endswith("error_code") and version in f.versions]
            for f in top:
                assert getattr(decoded, f.name) == 48, (api.name, version, f.name)


def test_error_response_echoes_the_request_entries() -> None:
    body = error_response(0, 9, produce_facts().body, 6, "x")
    [topic] = body.responses
    assert topic.name == "orders"
    assert [(p.index, p.error_code) for p in topic.partition_responses] == [(0, 6), (2, 6)]
    req = decode_request(
        encode_request(1, 12, 1, {"topics": [{"topic": "t", "partitions": [{"partition": 3}]}]})[4:]
    )
    fetch = error_response(1, 12, req.body, 6, "x")
    assert [
        (r.topic, [(p.partition_index, p.error_code) for p in r.partitions]) for r in fetch.responses
    ] == [("t", [(3, 6)])]
    req = decode_request(encode_request(15, 5, 1, {"groups": ["g1", "g2"]})[4:])
    assert [(g.group_id, g.error_code) for g in error_response(15, 5, req.body, 16, "x").groups] == [
        ("g1", 16),
        ("g2", 16),
    ]


def test_an_error_answer_to_a_share_fetch_encodes() -> None:
    """ShareFetch v1+ Records are not nullable: an entry echoed from the request gets empty records
    (the null default made the answer fail to encode, so the rule's client got nothing)."""
    topic_id = uuid.uuid4()
    body = {"group_id": "g", "member_id": "m", "share_session_epoch": 0, "max_wait_ms": 0, "min_bytes": 1,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 1}]}]}  # fmt: skip
    for version in (1, 2):
        req = decode_request(encode_request(78, version, 1, body)[4:])
        answer = error_response(78, version, req.body, 6, "x")
        frame = b"".join(bytes(c) for c in encode_response(78, version, 7, answer))
        [topic] = decode_response(78, version, frame[4:])[1].responses
        assert topic.topic_id == topic_id
        assert [(p.partition_index, p.error_code, len(p.records)) for p in topic.partitions] == [(1, 6, 0)]


def test_duplicate_and_corrupt() -> None:
    frame = struct.pack(">ii", 4, 77) + b"body"
    assert b"".join(duplicate([frame[:6], frame[6:]])) == frame * 2
    bad = b"".join(corrupt([frame[:9], frame[9:]]))
    assert bad[:4] == frame[:4] and bad[8:] == frame[8:]
    assert struct.unpack_from(">i", bad, 4)[0] != 77


def test_throttle_spaces_answers_at_the_rate() -> None:
    engine = engine_with({"action": {"kind": "throttle", "bytes_per_second": 1000}})
    assert engine.throttle_delay(1, 500, now=10.0) == pytest.approx(0.5)
    assert engine.throttle_delay(1, 500, now=10.0) == pytest.approx(1.0)  # queued behind the first
    assert engine.throttle_delay(1, 500, now=20.0) == pytest.approx(0.5)  # the link went idle
    assert engine.throttle_delay(99, 500, now=20.0) == 0.0
