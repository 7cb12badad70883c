"""Primitive encodings pinned by golden bytes, and the reader's bounds checks."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcompat.wire import protocol
from kcompat.wire.errors import DecodeError
from kcompat.wire.primitives import Reader, Writer, encode_uvarint, encode_varint, encode_varlong


@pytest.mark.parametrize(
    ("value", "golden"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (2**31 - 1, "ffffffff07")],
)
def test_unsigned_varint(value: int, golden: str) -> None:
    assert encode_uvarint(value).hex() == golden
    assert Reader(bytes.fromhex(golden)).uvarint() == value


@pytest.mark.parametrize(
    ("value", "golden"),
    [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")],
)
def test_zigzag_varint(value: int, golden: str) -> None:
    assert encode_varint(value).hex() == golden
    assert Reader(bytes.fromhex(golden)).varint() == value


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(v: int) -> None:
    assert Reader(encode_varlong(v)).varlong() == v


def test_strings_bytes_and_nulls() -> None:
    w = Writer()
    w.string("ab")
    w.string(None)
    w.compact_string("ab")
    w.compact_string(None)
    w.bytes_(b"\x01")
    w.compact_bytes(None)
    w.uuid(uuid.UUID(int=1))
    assert w.getvalue().hex() == "00026162ffff03616200000000010100" + "00" * 15 + "01"
    r = Reader(w.getvalue())
    assert [r.string(), r.string(), r.compact_string(), r.compact_string()] == ["ab", None, "ab", None]
    assert bytes(r.bytes_() or b"") == b"\x01" and r.compact_bytes() is None and r.uuid() == uuid.UUID(int=1)
    assert r.remaining() == 0


@pytest.mark.parametrize(
    ("data", "call"),
    [
        ("00ff", "string"),  # length 255, 0 bytes present
        ("7fffffff", "bytes_"),  # 2 GiB claimed
        ("ffffff7f", "array_length"),  # 2 billion elements in 0 bytes
        ("fffffffe", "array_length"),  # -2
        ("8080808080", "uvarint"),  # longer than 5 bytes
        ("0003c328", "string"),  # invalid UTF-8
        ("0a", "tagged_fields"),  # 10 tagged fields in 0 bytes
        ("020100", "tagged_fields"),  # two fields, tag 1 then tag 0: out of order
    ],
)
def test_lengths_are_checked_before_allocation(data: str, call: str) -> None:
    with pytest.raises(DecodeError):
        getattr(Reader(bytes.fromhex(data)), call)()


def test_api_versions_response_header_is_v0_even_when_flexible() -> None:
    body = protocol.response_codec(18).build(
        {"api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]}
    )
    chunks = protocol.encode_response(18, 3, 7, body)
    frame = b"".join(c for c in chunks if isinstance(c, bytes))
    # size | correlation id (no tagged fields: header v0) | error 0 | compact array of 1 | key 18 0-4 | tags | throttle | tags
    assert frame.hex() == "0000001300000007000002001200000004000000000000"


def test_request_header_v2_keeps_int16_client_id() -> None:
    frame = protocol.encode_request(
        18, 3, 1, {"client_software_name": "a", "client_software_version": "1"}, "cli"
    )
    # size | key 18 | v3 | correlation 1 | client_id "cli" with int16 length | header tags | body
    assert frame.hex() == "0000001300120003000000010003636c69000261023100"
