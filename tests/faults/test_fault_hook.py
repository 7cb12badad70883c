"""The broker's fault hook (kcompat/server/fault_hook.py) through Broker.handle, in process:
what each action does to a request's handling, and that no rule leaves handling as it was."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kcompat.faults import rule_from_json
from kcompat.server.dispatcher import CloseConnection
from kcompat.wire.messages.produce import PRODUCE
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch, flatten


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    return broker_harness()


def produce_body(value: bytes, acks: int = -1) -> dict[str, Any]:
    return {"acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch(value)}]}]}  # fmt: skip


def add(h: BrokerHarness, rule: dict[str, Any]) -> int:
    return h.broker.faults.add(rule_from_json(rule))


def offset_of(h: BrokerHarness, value: bytes) -> tuple[int, int]:
    p = h.call(PRODUCE, 9, produce_body(value)).responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def test_error_answers_without_running_the_handler(h: BrokerHarness) -> None:
    assert offset_of(h, b"a") == (0, 0)
    add(
        h,
        {
            "match": {"api": "Produce", "topic": "t"},
            "action": {"kind": "error", "error": 6},
            "trigger": "once",
        },
    )
    assert offset_of(h, b"b")[0] == 6
    assert offset_of(h, b"c") == (0, 1)  # b was never appended


def test_drop_before_and_after_the_handler(h: BrokerHarness) -> None:
    add(h, {"match": {"api": "Produce"}, "action": "drop", "trigger": "once"})
    with pytest.raises(CloseConnection, match="fault rule 1: drop"):
        h.raw(h.frame(PRODUCE, 9, produce_body(b"a")))
    add(h, {"match": {"api": "Produce"}, "action": {"kind": "drop", "when": "after"}, "trigger": "once"})
    with pytest.raises(CloseConnection, match="after the request was served"):
        h.raw(h.frame(PRODUCE, 9, produce_body(b"b")))
    assert offset_of(h, b"c") == (0, 1)  # a dropped before, b appended, its answer lost


def test_error_on_acks_0_closes(h: BrokerHarness) -> None:
    add(h, {"match": {"api": "Produce"}, "action": {"kind": "error", "error": 6}})
    with pytest.raises(CloseConnection, match="acks=0"):
        h.raw(h.frame(PRODUCE, 9, produce_body(b"a", acks=0)))


def test_blackhole_answers_never(h: BrokerHarness) -> None:
    add(h, {"match": {"api": "Produce"}, "action": "blackhole"})
    answer = h.raw(h.frame(PRODUCE, 9, produce_body(b"a")))
    assert isinstance(answer, asyncio.Future)
    h.sleep(0.05)
    assert not answer.done()
    answer.cancel()


def test_delay_and_corrupt_after(h: BrokerHarness) -> None:
    add(h, {"match": {"api": "Produce"}, "action": "corrupt", "trigger": "once"})
    frame = h.frame(PRODUCE, 9, produce_body(b"a"))
    data = flatten(h.raw(frame) or [])
    assert int.from_bytes(data[4:8], "big") != h.correlation
    add(h, {"match": {"api": "Produce"}, "action": {"kind": "delay", "delay_ms": 200}, "trigger": "once"})
    loop = h.loop
    started = loop.time()
    assert offset_of(h, b"b") == (0, 1)
    assert loop.time() - started >= 0.2


def test_no_rule_and_a_cleared_rule_leave_handling_alone(h: BrokerHarness) -> None:
    assert not h.broker.faults.armed
    add(h, {"match": {"api": "Fetch"}, "action": "drop"})
    assert offset_of(h, b"a") == (0, 0)  # armed, not matching
    h.broker.faults.clear()
    assert offset_of(h, b"b") == (0, 1)
    assert h.broker.faults.fired_by_action == {}
