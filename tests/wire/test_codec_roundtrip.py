"""Every declared message and version: encode, decode, re-encode; garbage and truncation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcompat.wire.codec import MessageCodec, Struct
from kcompat.wire.errors import DecodeError

from .schema_reference import MESSAGES
from .strategies import message_values

CASES = [
    (m, v)
    for m in MESSAGES
    for v in range(m.versions.low, (m.versions.high if m.versions.high is not None else m.versions.low) + 1)
]
CODECS = {m.name: MessageCodec(m) for m in MESSAGES}


def _plain(v: Any) -> Any:
    if isinstance(v, Struct):
        return _plain(v.to_dict())
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, memoryview | bytearray):
        return bytes(v)
    return v


def _contains(decoded: Any, given_value: Any) -> None:
    """Every field the test supplied comes back as supplied (decoded also holds defaults)."""
    if isinstance(given_value, dict):
        for k, v in given_value.items():
            _contains(decoded[k], v)
    elif isinstance(given_value, list):
        assert len(decoded) == len(given_value)
        for d, g in zip(decoded, given_value, strict=True):
            _contains(d, g)
    else:
        assert decoded == given_value


def test_every_message_version_is_covered() -> None:
    assert len(CASES) > 500


@pytest.mark.parametrize(("message", "version"), CASES, ids=lambda x: getattr(x, "name", str(x)))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(message: Any, version: int, data: st.DataObject) -> None:
    codec = CODECS[message.name]
    value = data.draw(message_values(message, version))
    encoded = codec.encode(codec.build(value), version)
    decoded = codec.decode(encoded, version)
    _contains(_plain(decoded), _plain(value))
    assert codec.encode(decoded, version) == encoded


@pytest.mark.parametrize(("message", "version"), CASES[::3], ids=lambda x: getattr(x, "name", str(x)))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_truncation_and_garbage_raise_only_decode_error(
    message: Any, version: int, data: st.DataObject
) -> None:
    codec = CODECS[message.name]
    encoded = codec.encode(codec.build(data.draw(message_values(message, version))), version)
    cut = data.draw(st.integers(0, max(len(encoded) - 1, 0)))
    if cut < len(encoded):
        with pytest.raises(DecodeError):
            codec.decode(encoded[:cut], version)
    garbage = data.draw(st.binary(max_size=64))
    mutated = bytearray(encoded)
    if mutated:
        i = data.draw(st.integers(0, len(mutated) - 1))
        mutated[i] ^= data.draw(st.integers(1, 255))
    for blob in (garbage, bytes(mutated)):
        try:
            codec.decode(blob, version)
        except DecodeError as e:
            assert str(e)  # names the field, or says what ran out
