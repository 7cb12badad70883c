"""A few lines of protobuf encoding to build OTLP MetricsData payloads as a client writes them
(field numbers of opentelemetry-proto's metrics/v1/metrics.proto), for the decoder's tests."""

from __future__ import annotations

import struct


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fixed64(number: int, raw: bytes) -> bytes:
    return varint(number << 3 | 1) + raw


def key_value(key: str, value: str | int | bool | float) -> bytes:
    if isinstance(value, bool):
        any_value = varint(2 << 3) + varint(int(value))
    elif isinstance(value, int):
        any_value = varint(3 << 3) + varint(value)
    elif isinstance(value, float):
        any_value = fixed64(4, struct.pack("<d", value))
    else:
        any_value = field(1, value.encode())
    return field(1, key.encode()) + field(2, any_value)


def number_point(value: float | int, attributes: dict[str, str] | None = None, time_ns: int = 0) -> bytes:
    body = fixed64(3, struct.pack("<Q", time_ns))
    body += (
        fixed64(4, struct.pack("<d", value))
        if isinstance(value, float)
        else fixed64(6, struct.pack("<q", value))
    )
    for k, v in (attributes or {}).items():
        body += field(7, key_value(k, v))
    return body


def metric(name: str, kind: str, *points: bytes) -> bytes:
    """A gauge (5), sum (7) or histogram (9) metric with these data points."""
    number = {"gauge": 5, "sum": 7, "histogram": 9}[kind]
    data = b"".join(field(1, p) for p in points)
    if kind == "sum":
        data += varint(2 << 3) + varint(1) + varint(3 << 3) + varint(1)  # delta, monotonic
    return field(1, name.encode()) + field(3, b"1") + field(number, data)


def metrics_data(*metrics: bytes, resource: dict[str, str | int] | None = None) -> bytes:
    res = b"".join(field(1, key_value(k, v)) for k, v in (resource or {}).items())
    scope = field(1, field(1, b"org.apache.kafka")) + b"".join(field(2, m) for m in metrics)
    return field(1, field(1, res) + field(2, scope))
