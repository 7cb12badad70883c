"""The OTLP MetricsData decoder of PushTelemetry payloads: gauges and sums read with their
attributes, other kinds counted, unknown fields skipped, malformed payloads refused."""

from __future__ import annotations

import pytest

from kcompat.telemetry.otlp import DataPoint, OtlpError, decode_metrics_data
from tests.telemetry.otlp_encode import field, metric, metrics_data, number_point, varint


def test_gauges_sums_attributes_and_resource() -> None:
    payload = metrics_data(
        metric("org.apache.kafka.producer.record.send.rate", "gauge", number_point(1.5, time_ns=2_000_000)),
        metric(
            "org.apache.kafka.producer.topic.record.send.total",
            "sum",
            number_point(7, {"topic": "t", "client_id": "p1"}),
            number_point(-3, {"topic": "u"}),
        ),
        metric("org.apache.kafka.producer.latency", "histogram", b""),
        resource={"client_id": "p1", "node": 3},
    )
    data = decode_metrics_data(payload)
    assert data.resource == (("client_id", "p1"), ("node", "3"))
    assert data.skipped == 1
    assert data.points == [
        DataPoint("org.apache.kafka.producer.record.send.rate", "gauge", (), 1.5, 2_000_000),
        DataPoint(
            "org.apache.kafka.producer.topic.record.send.total",
            "sum",
            (("client_id", "p1"), ("topic", "t")),
            7.0,
            0,
        ),
        DataPoint("org.apache.kafka.producer.topic.record.send.total", "sum", (("topic", "u"),), -3.0, 0),
    ]


def test_unknown_fields_are_skipped() -> None:
    extra = varint(15 << 3) + varint(99) + field(14, b"later") + varint(13 << 3 | 5) + b"\x01\x02\x03\x04"
    payload = metrics_data(metric("m", "gauge", number_point(2.0) + extra) + extra) + extra
    assert [(p.name, p.value) for p in decode_metrics_data(payload).points] == [("m", 2.0)]
    assert decode_metrics_data(b"").points == []


@pytest.mark.parametrize(
    "payload",
    [
        metrics_data(metric("m", "gauge", number_point(1.0)))[:-3],  # truncated
        b"\x0a\xff\xff\xff\xff\x0f",  # a length beyond the payload
        b"\x0b",  # wire type 3 (groups) is not OTLP
        b"\x00",  # field number 0
        b"\x0a" + b"\xff" * 11,  # an overlong varint
        field(1, field(2, field(2, field(1, b"\xff\xfe")))),  # a name that is not UTF-8
    ],
)
def test_malformed_payloads_are_refused(payload: bytes) -> None:
    with pytest.raises(OtlpError):
        decode_metrics_data(payload)
