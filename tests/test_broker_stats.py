"""The broker's plain counters (broker_stats.py), the admin.listener setting and the JSON log lines."""

from __future__ import annotations

import json
import logging

import pytest

from kcompat.config.broker_properties import admin_address
from kcompat.log_lines import JsonFormatter
from kcompat.server.broker_stats import LATENCY_BUCKETS_S, BrokerStats


def test_latency_lands_in_the_first_bucket_whose_bound_is_not_below_it() -> None:
    stats = BrokerStats()
    for seconds in (0.0, 0.0001, 0.00010001, 0.5, 30.0, 31.0):
        stats.observe(0, seconds)
    stats.observe(0, 0.002, failed=True)
    s = stats.requests[0]
    counted = dict(zip((*LATENCY_BUCKETS_S, float("inf")), s.buckets, strict=True))
    # Prometheus buckets are "<= le": a bound value belongs to its own bucket, not the next one.
    assert counted[0.0001] == 2 and counted[0.00025] == 1 and counted[0.5] == 1 and counted[30.0] == 1
    assert counted[0.0025] == 1 and counted[float("inf")] == 1
    assert s.count == 7 == sum(s.buckets) and s.errors == 1
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
