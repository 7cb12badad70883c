"""The broker's plain counters (broker_stats.py), the admin.listener setting and the JSON log lines."""

from __future__ import annotations

import json
import logging

import pytest

from kcompat.config.broker_properties import admin_address
from kcompat.log_lines import JsonFormatter
from kcompat.server.admin.request_metrics import RecentCounts, quantile_ms
from kcompat.server.broker_stats import LATENCY_BUCKETS_S, BrokerStats
from kcompat.server.error_counts import count_errors, plan
from kcompat.wire.structs import Encoded, Struct
from kcompat.wire.types.create_topics import CreatableTopicResult, CreateTopicsResponse
from kcompat.wire.types.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from kcompat.wire.types.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse


def test_latency_lands_in_the_first_bucket_whose_bound_is_not_below_it() -> None:
    stats = BrokerStats()
    for seconds in (0.0, 0.0001, 0.00010001, 0.5, 30.0, 31.0):
        stats.observe(0, seconds)
    stats.observe(0, 0.002, failed=True)
    s = stats.requests[0]
    counted = dict(zip((*LATENCY_BUCKETS_S, float("inf")), s.histogram(), strict=True))
    # Prometheus buckets are "<= le": a bound value belongs to its own bucket, not the next one.
    assert counted[0.0001] == 2 and counted[0.00025] == 1 and counted[0.5] == 1 and counted[30.0] == 1
    assert counted[0.0025] == 1 and counted[float("inf")] == 1
    assert s.count == 7 == sum(s.buckets) and s.error_codes == {-1: 1}
    assert s.seconds == pytest.approx(61.50220001)


def test_topic_counters_add_up_and_go_with_the_topic() -> None:
    stats = BrokerStats()
    stats.records_in("t", 3, 300)
    stats.records_in("t", 2, 120)
    stats.bytes_out("t", 420)
    t = stats.topics["t"]
    assert (t.messages_in, t.bytes_in, t.bytes_out) == (5, 420, 420)
    stats.forget_topic("t")
    assert "t" not in stats.topics


@pytest.mark.parametrize(("value", "expected"), [
    ("127.0.0.1:9644", ("127.0.0.1", 9644)),
    ("http://0.0.0.0:1", ("0.0.0.0", 1)),
    (":9644", ("", 9644)),
    ("[::1]:9644", ("::1", 9644)),
    ("", None),
    ("  ", None),
])  # fmt: skip
def test_admin_address(value: str, expected: tuple[str, int] | None) -> None:
    assert admin_address(value) == expected


@pytest.mark.parametrize("value", ["localhost", "host:port", "h:65536", "h:-1"])
def test_admin_address_refuses(value: str) -> None:
    with pytest.raises(ValueError, match="is not host:port"):
        admin_address(value)


def test_json_log_line() -> None:
    record = logging.LogRecord("kcompat.server", logging.WARNING, __file__, 1, 'a %s "b"', ("é",), None)
    record.created, record.msecs = 1767323045.678, 678.0
    line = json.loads(JsonFormatter().format(record))
    assert line == {"time": "2026-01-02T03:04:05.678Z", "level": "WARNING", "logger": "kcompat.server",
                    "message": 'a é "b"'}  # fmt: skip
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        record.exc_info = sys.exc_info()
    assert "RuntimeError: boom" in json.loads(JsonFormatter().format(record))["exception"]


def test_error_codes_of_the_answers_are_counted_per_api() -> None:
    """Kafka's ErrorsPerSec: each error code in an answer, NONE included; six topics refused in one
    CreateTopics count six. A leader-and-epoch struct holds none and is not walked."""
    stats = BrokerStats()
    refused = CreateTopicsResponse(
        topics=[CreatableTopicResult(name=f"t{i}", error_code=36) for i in range(6)]
    )
    stats.observe(19, 0.001, body=refused)
    produced = ProduceResponse(responses=[TopicProduceResponse(name="t", partition_responses=[
        PartitionProduceResponse(index=0), PartitionProduceResponse(index=1, error_code=6)])])  # fmt: skip
    stats.observe(0, 0.001, body=produced)
    stats.observe(0, 0.001, failed=True)
    fetched = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[
        PartitionData(partition_index=i, error_code=code) for i, code in enumerate((0, 1, 1, 6))])])  # fmt: skip
    fetched.responses[0].partitions.append(Encoded(PartitionData, 16, b""))  # pre-encoded: not read
    stats.observe(1, 0.001, body=fetched)
    assert stats.requests[1].error_codes == {0: 2, 1: 2, 6: 1}  # the top-level code and each partition's
    assert stats.requests[19].error_codes == {36: 6}
    assert stats.requests[0].error_codes == {0: 1, 6: 1, -1: 1}
    p = plan(PartitionProduceResponse)
    assert (p.codes, p.structs, p.lists) == (("error_code",), (), ())


class _Leaf(Struct):
    __slots__ = ("error_code", "note")
    error_code: int
    note: str

    def __init__(self, error_code: int = 0) -> None:
        self.error_code, self.note, self._unknown_tags = error_code, "", None


class _Node(Struct):
    __slots__ = ("error_code", "leaf")
    error_code: int
    leaf: _Leaf | None

    def __init__(self, error_code: int = 0, leaf: _Leaf | None = None) -> None:
        self.error_code, self.leaf, self._unknown_tags = error_code, leaf, None


class _Tree(Struct):
    __slots__ = ("error_code", "nodes")
    error_code: int
    nodes: list[_Node]

    def __init__(self, error_code: int = 0, nodes: list[_Node] | None = None) -> None:
        self.error_code, self.nodes, self._unknown_tags = error_code, nodes or [], None


def test_counters_walk_struct_fields_inside_lists() -> None:
    """The generated counter follows a struct field in a list's items (None is skipped)."""
    tree = _Tree(0, [_Node(3, _Leaf(7)), _Node(0, None), _Node(0, _Leaf(0)), _Node(7, _Leaf(3))])
    counts: dict[int, int] = {}
    count_errors(tree, counts)
    assert counts == {0: 4, 3: 2, 7: 2}
    count_errors(_Tree(), counts)
    assert counts == {0: 5, 3: 2, 7: 2}


def test_quantiles_interpolate_in_fine_buckets_of_the_last_window() -> None:
    now = [0.0]
    recent = RecentCounts(clock=lambda: now[0], window_s=300.0)
    stats = BrokerStats()
    for i in range(1000):  # 1 ms ... 100 ms evenly
        stats.observe(0, 0.001 + 0.099 * i / 999)
    window = recent.since_window(stats.requests)[0]
    assert quantile_ms(window, 0.5) == pytest.approx(50.5, rel=0.13)
    assert quantile_ms(window, 0.99) == pytest.approx(99.0, rel=0.13)
    assert quantile_ms(window, 0.5) < quantile_ms(window, 0.99) <= 100.0
    # Five minutes on, only what came since the snapshot of then counts: 100 fast requests.
    now[0] = 301.0
    for _ in range(100):
        stats.observe(0, 0.0002)
    window = recent.since_window(stats.requests)[0]
    assert sum(window) == 100
    assert 0.2 <= quantile_ms(window, 0.99) <= 0.25  # inside the fine bucket holding 0.2 ms
    assert quantile_ms([0] * len(window), 0.5) == 0.0
