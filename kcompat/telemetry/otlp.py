"""The OTLP metrics payload of a PushTelemetry (KIP-714), read from its protobuf wire format.

A client pushes one `MetricsData` (opentelemetry-proto, metrics/v1/metrics.proto). Only the
fields a receiver shows are read; every other field is skipped by its wire type, so a newer
client's additions do no harm:

    MetricsData      1 resource_metrics (ResourceMetrics, repeated)
    ResourceMetrics  1 resource (Resource: 1 attributes)   2 scope_metrics (repeated)
    ScopeMetrics     2 metrics (Metric, repeated)
    Metric           1 name   5 gauge   7 sum   (9 histogram and the others: counted, not read)
    Gauge, Sum       1 data_points (NumberDataPoint, repeated)
    NumberDataPoint  3 time_unix_nano (fixed64)   4 as_double (double)   6 as_int (sfixed64)
                     7 attributes (KeyValue, repeated)
    KeyValue         1 key   2 value (AnyValue: 1 string 2 bool 3 int 4 double)

Hand-written rather than generated: the five messages above are all a receiver needs, and the
protobuf runtime would be a dependency for them alone. Anything malformed is OtlpError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_UINT64 = struct.Struct("<Q")
MAX_FIELDS = 1 << 20  # fields read per payload at most: a payload of tiny fields cannot spin


class OtlpError(ValueError):
    """The payload is not an OTLP MetricsData."""


@dataclass(frozen=True, slots=True)
class DataPoint:
    """One number a client pushed: its metric's name, kind (gauge or sum), labels and value."""

    name: str
    kind: str
    attributes: tuple[tuple[str, str], ...]
    value: float
    time_unix_nano: int


@dataclass(frozen=True, slots=True)
class MetricsData:
    resource: tuple[tuple[str, str], ...]  # the client's own attributes (client_id, ...)
    points: list[DataPoint]
    skipped: int  # metrics of kinds not read (histograms, summaries)


def _fields(buf: memoryview) -> list[tuple[int, int, object]]:
    """(field number, wire type, value) of one message: int for varint/fixed, memoryview for bytes."""
    out: list[tuple[int, int, object]] = []
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise OtlpError("field number 0")
        value: object
        if wire == _VARINT:
            value, i = _varint(buf, i)
        elif wire == _I64:
            if i + 8 > n:
                raise OtlpError("truncated fixed64")
            value, i = _UINT64.unpack_from(buf, i)[0], i + 8
        elif wire == _LEN:
            size, i = _varint(buf, i)
            if i + size > n:
                raise OtlpError("truncated length-delimited field")
            value, i = buf[i : i + size], i + size
        elif wire == _I32:
            if i + 4 > n:
                raise OtlpError("truncated fixed32")
            value, i = int.from_bytes(buf[i : i + 4], "little"), i + 4
        else:
            raise OtlpError(f"wire type {wire} is not read")
        out.append((number, wire, value))
        if len(out) > MAX_FIELDS:
            raise OtlpError("too many fields")
    return out


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise OtlpError("truncated or overlong varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _bytes(value: object) -> memoryview:
    if not isinstance(value, memoryview):
        raise OtlpError("a message field is not length-delimited")
    return value


def _text(value: object) -> str:
    try:
        return bytes(_bytes(value)).decode("utf-8")
    except UnicodeDecodeError:
        raise OtlpError("a string is not UTF-8") from None


def _any_value(buf: memoryview) -> str:
    for number, wire, value in _fields(buf):
        if number == 1 and wire == _LEN:
            return _text(value)
        if number == 2 and wire == _VARINT:
            return "true" if value else "false"
        if number == 3 and wire == _VARINT:
            assert isinstance(value, int)
            return str(value - (1 << 64) if value >= 1 << 63 else value)
        if number == 4 and wire == _I64:
            assert isinstance(value, int)
            return repr(_DOUBLE.unpack(_UINT64.pack(value))[0])
    return ""


def _attributes(values: list[object]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for kv in values:
        key, text = "", ""
        for number, _wire, value in _fields(_bytes(kv)):
            if number == 1:
                key = _text(value)
            elif number == 2:
                text = _any_value(_bytes(value))
        pairs.append((key, text))
    return tuple(sorted(pairs))


def _point(name: str, kind: str, buf: memoryview) -> DataPoint:
    value, when, attrs = 0.0, 0, []
    for number, wire, v in _fields(buf):
        assert isinstance(v, (int, memoryview))
        if number == 3 and wire == _I64 and isinstance(v, int):
            when = v
        elif number == 4 and wire == _I64 and isinstance(v, int):
            value = _DOUBLE.unpack(_UINT64.pack(v))[0]
        elif number == 6 and wire == _I64 and isinstance(v, int):
            value = float(_INT64.unpack(_UINT64.pack(v))[0])
        elif number == 7:
            attrs.append(v)
    return DataPoint(name, kind, _attributes(list(attrs)), value, when)


def _metric(buf: memoryview, points: list[DataPoint]) -> bool:
    """Appends the metric's number points; False when it is of a kind not read."""
    name, body, kind = "", None, ""
    for number, _wire, value in _fields(buf):
        if number == 1:
            name = _text(value)
        elif number in (5, 7):
            body, kind = _bytes(value), "gauge" if number == 5 else "sum"
        elif number in (9, 10, 11):
            return False
    if body is not None:
        for number, _wire, value in _fields(body):
            if number == 1:
                points.append(_point(name, kind, _bytes(value)))
    return True


def decode_metrics_data(payload: bytes) -> MetricsData:
    """The points of an uncompressed MetricsData; OtlpError if it is not one."""
    points: list[DataPoint] = []
    resource: tuple[tuple[str, str], ...] = ()
    skipped = 0
    for number, _wire, rm in _fields(memoryview(payload)):
        if number != 1:
            continue
        for rnum, _w, rvalue in _fields(_bytes(rm)):
            if rnum == 1:
                resource += _attributes([v for n, _, v in _fields(_bytes(rvalue)) if n == 1])
            elif rnum == 2:
                for snum, _s, metric in _fields(_bytes(rvalue)):
                    if snum == 2 and not _metric(_bytes(metric), points):
                        skipped += 1
    return MetricsData(tuple(sorted(resource)), points, skipped)
