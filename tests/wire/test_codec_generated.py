"""The generated coders (kcompat.wire.codec._generate) agree with the reference closures: same
values decoded, same bytes encoded, the same DecodeError (message and field path) for truncated or
corrupted input, for every declared message and version."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcompat.wire.codec import MessageCodec
from kcompat.wire.errors import DecodeError
from kcompat.wire.primitives import Writer
from kcompat.wire.schema import Message

from .strategies import message_values
from .test_conformance import MESSAGES

CASES = [
    (m, v)
    for m in MESSAGES
    for v in range(m.versions.low, (m.versions.high if m.versions.high is not None else m.versions.low) + 1)
]
CODECS = {m.name: (MessageCodec(m), MessageCodec(m, generated=False)) for m in MESSAGES}


def _outcome(codec: MessageCodec, data: bytes, version: int) -> Any:
    try:
        return ("ok", codec.decode(data, version).to_dict())
    except DecodeError as e:
        return ("error", str(e))


def test_generated_is_in_use() -> None:
    fast, ref = CODECS["FetchRequest"]
    assert fast.decoder(12).__code__.co_filename.startswith("<kcompat.wire.codec")
    assert not ref.decoder(12).__code__.co_filename.startswith("<kcompat.wire.codec")


@pytest.mark.parametrize(("message", "version"), CASES, ids=[f"{m.name}-v{v}" for m, v in CASES])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_generated_matches_reference(message: Message, version: int, data: st.DataObject) -> None:
    fast, ref = CODECS[message.name]
    value = data.draw(message_values(message, version))
    encoded = ref.encode(value, version)
    assert fast.encode(value, version) == encoded
    assert _outcome(fast, encoded, version) == _outcome(ref, encoded, version)
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
            value = {"responses": [{"topic": "t", "partitions": [{"partition_index": 1, "high_watermark": bad}]}]}
            with pytest.raises(Exception) as info:  # whatever the reference raises
                codec.write(w, value, 12)
            outcomes.append((type(info.value), str(info.value), bytes(w.buf), len(w.chunks)))
    assert outcomes[:2] == outcomes[2:]
    assert bytes(outcomes[0][2][:4]) == b"\x00\x00\x00\x07"
