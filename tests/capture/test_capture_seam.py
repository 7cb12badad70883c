"""The capture on the broker's dispatcher seam (in process): it sees what the client got, an
injected fault's answer included; acks=0 records have no offset; a refused partition lists
nothing; the seam goes back to the plain path when the last capture stops."""

from __future__ import annotations

from typing import Any

import pytest

from kcompat.capture import spec_from_json
from kcompat.faults import rule_from_json
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.produce import PRODUCE
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    harness = broker_harness({"num.partitions": "1"})
    resp = harness.call(CREATE_TOPICS, 7, {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}],
                                           "timeout_ms": 1000})  # fmt: skip
    assert resp.topics[0].error_code == 0
    return harness


def produce(h: BrokerHarness, *values: bytes, acks: int = -1) -> Any:
    body = {"acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch(*values)}]}]}  # fmt: skip
    if acks == 0:
        assert h.raw(h.frame(PRODUCE, 9, body)) is None
        return None
    return h.call(PRODUCE, 9, body).responses[0].partition_responses[0]


def test_capture_sees_the_faults_answer_and_only_written_records(h: BrokerHarness) -> None:
    broker: Any = h.broker
    cid = broker.captures.start(spec_from_json({"match": {"topic": "t"}}))
    log = broker.captures.start(
        spec_from_json({"match": {"api": "Produce"}, "kind": "log", "file": "p.jsonl"})
    )
    broker.faults.add(rule_from_json({"match": {"api": "Produce"}, "action": {"kind": "error",
                                      "error": "NOT_LEADER_OR_FOLLOWER"}, "trigger": "once"}))  # fmt: skip
    assert produce(h, b"refused").error_code == 6
    assert produce(h, b"a", b"b").base_offset == 0
    produce(h, b"fire-and-forget", acks=0)
    got = broker.captures.records(cid)["records"]
    assert [(r["value"], r["offset"], r["client_id"]) for r in got] == [("a", 0, "test"), ("b", 1, "test"),
                                                                        ("fire-and-forget", None, "test")]  # fmt: skip
    broker.captures.stop(log)
    lines = (h.broker.log_dirs[0] / "captures" / "p.jsonl").read_text().splitlines()
    assert len(lines) == 3 and '"error_code":6' in lines[0]  # the injected answer, as the client got it

    fetches = broker.captures.start(spec_from_json({"match": {"api": ["Fetch", "ListOffsets"]}}))
    assert broker.captures.api_keys is None  # the topic capture may match any API
    broker.captures.stop(cid)
    assert broker.captures.api_keys == {1, 2}  # now a Produce does not even reach observe()
    produce(h, b"d")
    assert broker.captures.records(fetches)["seen"] == 0

    assert broker.dispatcher._tap.on
    broker.captures.clear()
    assert not broker.dispatcher._tap.on  # back to the plain path
    produce(h, b"c")
    assert broker.captures.listing() == [] and broker.captures.api_keys == frozenset()
