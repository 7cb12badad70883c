"""The generated coders (kcompat.wire.codegen.generate) agree with the reference closures: same
values decoded, same bytes encoded, the same DecodeError (message and field path) for truncated or
corrupted input, for every declared message and version; and valid input never needs the reference
(the generated path really is the one doing the work)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcompat.wire.codec import MessageCodec
from kcompat.wire.errors import DecodeError
from kcompat.wire.primitives import Writer
from kcompat.wire.schema import Message

from .schema_reference import MESSAGES
from .strategies import message_values

CASES = [
    (m, v)
    for m in MESSAGES
    for v in range(m.versions.low, (m.versions.high if m.versions.high is not None else m.versions.low) + 1)
]
CODECS = {m.name: (MessageCodec(m), MessageCodec(m, generated=False)) for m in MESSAGES}
FALLBACKS: list[str] = []  # the structs whose generated coder handed over to the reference


def _fast(name: str, version: int) -> MessageCodec:
    """The generated codec of a message, compiled for version, noting in FALLBACKS each use of the reference."""
    codec = CODECS[name][0]
    codec.decoder(version)
    for (struct, v), (decode, _, _) in codec._compiled.items():
        ns = decode.__globals__  # the namespace the generated source was exec'd in
        if "counted" in ns:
            continue
        ns["counted"] = True
        for key in ("ref_decode", "ref_encode"):

            def counted(*args: Any, _ref: Any = ns[key], _what: str = f"{key} {struct} v{v}") -> Any:
                FALLBACKS.append(_what)
                return _ref(*args)

            ns[key] = counted
    return codec


def _nan_free(value: Any) -> Any:
    """NaN never equals itself: a flipped float64 byte can decode to one in both codecs."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_free(v) for v in value]
    return value


def _outcome(codec: MessageCodec, data: bytes, version: int) -> Any:
    try:
        return ("ok", _nan_free(codec.decode(data, version).to_dict()))
    except DecodeError as e:
        return ("error", str(e))


def test_generated_is_in_use() -> None:
    fast, ref = CODECS["FetchRequest"]
    assert fast.decoder(12).__code__.co_filename.startswith("<kcompat.wire.codec")
    assert not ref.decoder(12).__code__.co_filename.startswith("<kcompat.wire.codec")


@pytest.mark.parametrize(("message", "version"), CASES, ids=[f"{m.name}-v{v}" for m, v in CASES])
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_generated_matches_reference(message: Message, version: int, data: st.DataObject) -> None:
    fast, ref = _fast(message.name, version), CODECS[message.name][1]
    value = data.draw(message_values(message, version))
    encoded = ref.encode(ref.build(value), version)
    FALLBACKS.clear()
    assert fast.encode(fast.build(value), version) == encoded
    assert _outcome(fast, encoded, version) == _outcome(ref, encoded, version)
    assert FALLBACKS == []
    cut = data.draw(st.integers(0, max(len(encoded) - 1, 0)))
    assert _outcome(fast, encoded[:cut], version) == _outcome(ref, encoded[:cut], version)
    if encoded:
        at = data.draw(st.integers(0, len(encoded) - 1))
        flipped = encoded[:at] + bytes([encoded[at] ^ 0xFF]) + encoded[at + 1 :]
        assert _outcome(fast, flipped, version) == _outcome(ref, flipped, version)


def test_failed_encode_raises_and_leaves_the_writer_as_the_reference_does() -> None:
    fast, ref = CODECS["FetchResponse"]
    outcomes = []
    for codec in (fast, ref):
        for bad in ("not a number", None):
            w = Writer()
            w.int32(7)
            value = {
                "responses": [{"topic": "t", "partitions": [{"partition_index": 1, "high_watermark": bad}]}]
            }
            with pytest.raises(Exception) as info:  # whatever the reference raises
                codec.write(w, codec.build(value), 12)
            outcomes.append((type(info.value), str(info.value), bytes(w.buf), len(w.chunks)))
    assert outcomes[:2] == outcomes[2:]
    assert bytes(outcomes[0][2][:4]) == b"\x00\x00\x00\x07"


# -- the inlined paths, beyond what the small generated values reach ---------------------------


def _same(name: str, value: dict[str, Any], version: int) -> bytes:
    """Both coders give the same bytes and the same decoded value, and the generated ones never hand over."""
    fast, ref = _fast(name, version), CODECS[name][1]
    encoded = ref.encode(ref.build(value), version)
    FALLBACKS.clear()
    assert fast.encode(fast.build(value), version) == encoded
    assert _outcome(fast, encoded, version) == _outcome(ref, encoded, version)
    assert FALLBACKS == []
    return encoded


NAME = "tópic-ñ-" * 20  # non-ASCII, over 127 bytes of UTF-8: a two-byte uvarint length


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_long_arrays_strings_and_records(version: int) -> None:
    """Counts and lengths of 128 and more (multi-byte uvarints in flexible versions), nulls where allowed."""
    partitions = [{"index": i, "records": bytes([i]) * (i * 3) if i % 7 else None} for i in range(150)]
    for txn in (None, NAME):
        topics = [{"name": NAME, "partition_data": partitions}] * 130
        value = {"transactional_id": txn, "acks": -1, "timeout_ms": 5, "topic_data": topics}
        encoded = _same("ProduceRequest", value, version)
        decoded = _fast("ProduceRequest", version).decode(encoded, version)
        assert decoded.transactional_id == txn and decoded.topic_data[0].name == NAME
        assert [p.records for p in decoded.topic_data[1].partition_data] == [p["records"] for p in partitions]


@pytest.mark.parametrize("n", [0, 1, 126, 127, 128, 129, 16383, 16384])
def test_lengths_and_counts_at_the_uvarint_boundaries(n: int) -> None:
    for version in (8, 9):
        partitions = [{"index": 1, "records": b"r" * n}] + [{"index": 2}] * (min(n, 300) - 1)
        topics = [{"name": "t" * n, "partition_data": partitions}]
        _same("ProduceRequest", {"transactional_id": "i" * n, "topic_data": topics}, version)
    resources = [{"resource_name": "r" * n, "configuration_keys": ["k"] * n}]
    for version in (3, 4):
        _same("DescribeConfigsRequest", {"resources": resources}, version)
    assigned = [{"topic_id": UUID(int=n), "partitions": list(range(n))}]
    _same("ConsumerGroupHeartbeatRequest", {"topic_partitions": assigned}, 0)


_ASSIGNED = [{"topic_id": UUID(int=2**128 - 1), "partitions": list(range(-5, 200))}] * 130
_RESOURCES = [{"resource_name": NAME, "configuration_keys": [NAME] * 130}, {"configuration_keys": None}]
_ABORTED = [{"producer_id": 1, "first_offset": 2}] * 130
_FETCHED = [
    {"aborted_transactions": None, "records": None},
    {"aborted_transactions": _ABORTED, "records": b"r" * 1000},
]


@pytest.mark.parametrize(
    ("name", "version", "value"),
    [
        ("ConsumerGroupHeartbeatRequest", 0, {"member_id": NAME, "subscribed_topic_names": [NAME, "", "t"] * 50,
                                              "topic_partitions": _ASSIGNED}),
        ("ConsumerGroupHeartbeatRequest", 1, {"subscribed_topic_names": None, "topic_partitions": None,
                                              "instance_id": None, "rack_id": NAME}),
        ("ConsumerGroupHeartbeatResponse", 0, {"member_epoch": 3, "assignment": None}),
        ("ConsumerGroupHeartbeatResponse", 1, {"error_message": NAME, "assignment": {"topic_partitions": _ASSIGNED}}),
        ("DescribeConfigsRequest", 3, {"resources": _RESOURCES}),
        ("DescribeConfigsRequest", 4, {"resources": _RESOURCES}),
        ("ConsumerProtocolSubscription", 3, {"topics": [NAME] * 3, "user_data": b"\x00" * 300, "rack_id": None,
                                             "owned_partitions": [{"topic": "t", "partitions": list(range(300))}]}),
        ("ConsumerProtocolSubscription", 1, {"topics": [], "user_data": None}),
        ("FetchResponse", 4, {"responses": [{"topic": "t", "partitions": _FETCHED}]}),
        ("FetchResponse", 12, {"responses": [{"topic": "t", "partitions": _FETCHED}]}),
    ],
)  # fmt: skip
def test_nulls_scalar_and_string_arrays_uuids_nullable_structs(name: str, version: int, value: Any) -> None:
    _same(name, value, version)


def test_records_are_views_of_the_input_and_bytes_are_copies() -> None:
    data = _same(
        "ProduceRequest", {"topic_data": [{"name": "t", "partition_data": [{"records": b"x" * 5000}]}]}, 9
    )
    records = _fast("ProduceRequest", 9).decode(data, 9).topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is data and bytes(records) == b"x" * 5000
    data = _same("ConsumerProtocolAssignment", {"user_data": b"u" * 200}, 1)
    user_data = _fast("ConsumerProtocolAssignment", 1).decode(data, 1).user_data
    assert type(user_data) is bytes and user_data == b"u" * 200


class FileSlice:
    """A pass-through records value, as the log hands a Fetch response (sent with sendfile)."""

    def __len__(self) -> int:
        return 300


@pytest.mark.parametrize("version", [4, 12])
def test_pass_through_records_stay_chunks_and_failed_encodes_rewind_them(version: int) -> None:
    fast, ref = _fast("FetchResponse", version), CODECS["FetchResponse"][1]
    piece = FileSlice()
    for bad in (5, "not a number"):  # the second fails after the pass-through chunk was written
        partitions = [
            {"records": piece},
            {"records": memoryview(b"m" * 400)},
            {"high_watermark": bad, "records": piece},
        ]
        value = {"responses": [{"topic": "t", "partitions": partitions}]}
        outcomes = []
        for codec in (fast, ref):
            w = Writer()
            w.int32(7)
            try:
                codec.write(w, codec.build(value), version)
                error = None
            except Exception as e:  # whatever the reference raises
                error = f"{type(e).__name__}: {e}"
            chunks = [c if isinstance(c, bytes) else c is piece for c in w.finish()]
            outcomes.append((error, chunks))
        assert outcomes[0] == outcomes[1]
        assert outcomes[0][1].count(True) == (2 if bad == 5 else 1)


_HEAD9 = (
    b"\x00" + b"\x00\x01" + b"\x00\x00\x03\xe8"
)  # ProduceRequest v9: null transactional_id, acks, timeout
_HEAD8 = b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x03\xe8"  # the same in v8 (non-compact)
_P9 = b"\x02" + b"\x00\x00\x00\x00" + b"\x04abc" + b"\x00"  # one PartitionProduceData v9, records b"abc"
_P8 = b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x03abc"
_T9 = b"\x02" + b"\x02t" + b"\x02" + b"\x00\x00\x00\x00"  # one topic "t", one partition: up to its records
_T8 = b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00"


@pytest.mark.parametrize(
    ("version", "data"),
    [
        (9, _HEAD9 + b"\x02" + b"\x00" + _P9 + b"\x00" + b"\x00"),  # null name in a non-nullable string
        (9, _HEAD9 + b"\x02" + b"\x03\xff\xfe" + _P9 + b"\x00" + b"\x00"),  # invalid UTF-8
        (9, _HEAD9 + b"\x00" + b"\x00"),  # null topic_data, not nullable
        (9, _HEAD9 + b"\x80\x80\x80\x80\x08" + b"\x02t" + _P9),  # 2^31 - 1 topics claimed, few bytes present
        (9, _HEAD9 + b"\x80\x80\x80\x80\x80\x01"),  # a uvarint longer than 5 bytes
        (9, _HEAD9 + _T9 + b"\xe9\x07abc" + b"\x00\x00\x00"),  # records longer than the bytes left
        (9, _HEAD9 + _T9 + b"\x00" + b"\x00\x00\x00"),  # null records: allowed
        (8, _HEAD8 + b"\x7f\xff\xff\xff" + b"\x00\x01t" + _P8),  # 2^31 - 1 topics claimed
        (8, _HEAD8 + b"\xff\xff\xff\xff"),  # null topic_data
        (8, _HEAD8 + b"\xff\xff\xff\xfe"),  # a count below -1
        (8, _HEAD8 + b"\x00\x00\x00\x01" + b"\xff\xff" + _P8),  # null name
        (8, _HEAD8 + b"\x00\x00\x00\x01" + b"\xff\xfe" + _P8),  # a string length below -1
        (8, _HEAD8 + _T8 + b"\xff\xff\xff\xfe"),  # a records length below -1
        (8, _HEAD8 + _T8 + b"\x00\x01\x00\x00abc"),  # records longer than the bytes left
        (8, _HEAD8 + _T8 + b"\xff\xff\xff\xff"),  # null records: allowed
    ],
)  # fmt: skip
def test_bad_input_gives_the_reference_outcome(version: int, data: bytes) -> None:
    fast, ref = _fast("ProduceRequest", version), CODECS["ProduceRequest"][1]
    FALLBACKS.clear()
    outcome = _outcome(fast, data, version)
    assert outcome == _outcome(ref, data, version)
    assert bool(FALLBACKS) == (outcome[0] == "error")


def test_every_truncation_of_long_fields_gives_the_reference_error() -> None:
    for version in (8, 9):
        partitions = [{"index": i, "records": b"r" * i} for i in range(0, 260, 20)]
        value = {"transactional_id": NAME, "topic_data": [{"name": NAME, "partition_data": partitions}] * 2}
        data = _same("ProduceRequest", value, version)
        fast, ref = _fast("ProduceRequest", version), CODECS["ProduceRequest"][1]
        for cut in range(len(data)):
            outcome = _outcome(fast, data[:cut], version)
            assert outcome[0] == "error" and outcome == _outcome(ref, data[:cut], version)
