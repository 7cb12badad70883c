"""The typed message classes (kcompat/wire/types, written by tools/gen_messages.py): a misspelt
field raises where it is written (or built from a dict), and a dict is never encoded; every
declared message and version round-trips through them; the checked-in modules are what the
declarations generate."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcompat.wire import protocol
from kcompat.wire.codec import MessageCodec
from kcompat.wire.messages.delete_records import DELETE_RECORDS
from kcompat.wire.schema import F, Message, message
from kcompat.wire.structs import Struct
from kcompat.wire.types import MODULES
from kcompat.wire.types.api_versions import ApiVersion, ApiVersionsResponse
from kcompat.wire.types.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kcompat.wire.types.heartbeat import HeartbeatResponse

from .strategies import message_values
from .test_codec_roundtrip import CASES

ROOT = Path(__file__).resolve().parents[2]


def _structs(m: Message) -> dict[str, type[Struct]]:
    structs: dict[str, type[Struct]] = importlib.import_module(
        f"kcompat.wire.types.{MODULES[m.name]}"
    ).STRUCTS[m.name]
    return structs


def _typed(
    structs: dict[str, type[Struct]], name: str, fields: tuple[F, ...], value: dict[str, Any]
) -> Struct:
    """The strategies' plain dict as an instance of the generated class, nested structs included."""
    kwargs: dict[str, Any] = {}
    for f in fields:
        if f.name not in value:
            continue
        v = value[f.name]
        if f.is_struct and v is not None:
            if f.is_array:
                v = [_typed(structs, f.element_type, f.fields, x) for x in v]
            else:
                v = _typed(structs, f.element_type, f.fields, v)
        kwargs[f.name] = v
    return structs[name](**kwargs)


# -- a misspelt field raises ---------------------------------------------------------------------


def test_misspelt_field_raises_on_construction() -> None:
    with pytest.raises(TypeError, match="eror_code"):
        HeartbeatResponse(eror_code=27)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="low_watermak"):
        DeleteRecordsPartitionResult(partition_index=0, low_watermak=5)  # type: ignore[call-arg]


def test_misspelt_attribute_raises_on_assignment() -> None:
    r = HeartbeatResponse()
    with pytest.raises(AttributeError):
        r.eror_code = 27  # type: ignore[attr-defined]


def test_a_dict_is_not_encoded() -> None:
    """Only the typed classes are encoded: a dict (which would answer 0 for a forgotten error_code)
    is refused, at the top and nested, by the generated coder and the reference alike."""
    with pytest.raises(TypeError, match="HeartbeatResponse: cannot encode a dict"):
        protocol.encode_response(12, 4, 7, {"error_code": 27})
    typed = DeleteRecordsResponse(
        topics=[DeleteRecordsTopicResult(name="t", partitions=[{"partition_index": 0}])]
    )  # type: ignore[list-item]
    with pytest.raises(TypeError, match="DeleteRecordsPartitionResult: cannot encode a dict"):
        protocol.encode_response(21, 1, 7, typed)
    with pytest.raises(TypeError, match="DeleteRecordsPartitionResult: cannot encode a dict"):
        MessageCodec(DELETE_RECORDS.response, generated=False).encode(typed, 1)


def test_misspelt_dict_key_raises_on_build() -> None:
    with pytest.raises(TypeError, match=r"HeartbeatResponse has no field\(s\) \['eror_code'\]"):
        protocol.response_codec(12).build({"eror_code": 27})
    body = {
        "throttle_time_ms": 0,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "low_watermak": 1}]}],
    }
    with pytest.raises(TypeError, match="low_watermak"):
        protocol.response_codec(21).build(body)


def test_field_of_another_version_is_accepted() -> None:
    """Version-less: a field the encoded version lacks is left out, not an error (throttle_time_ms is v1+)."""
    v0 = protocol.encode_response(
        18, 0, 1, ApiVersionsResponse(throttle_time_ms=5, api_keys=[ApiVersion(api_key=1)])
    )
    _, back = protocol.decode_response(18, 0, b"".join(bytes(c) for c in v0)[4:])
    assert type(back) is ApiVersionsResponse
    assert back.throttle_time_ms == 0 and back.api_keys == [ApiVersion(api_key=1)]


def test_built_and_constructed_encode_alike() -> None:
    as_dict = {
        "throttle_time_ms": 3,
        "topics": [{"name": "t", "partitions": [{"partition_index": 2, "low_watermark": 9}]}],
    }
    as_typed = DeleteRecordsResponse(
        throttle_time_ms=3,
        topics=[
            DeleteRecordsTopicResult(
                name="t", partitions=[DeleteRecordsPartitionResult(partition_index=2, low_watermark=9)]
            )
        ],
    )
    built = protocol.response_codec(21).build(as_dict)
    assert built == as_typed
    for v in (0, 1, 2):
        assert protocol.encode_response(21, v, 1, built) == protocol.encode_response(21, v, 1, as_typed)


def test_stale_generated_classes_are_reported() -> None:
    """A declaration whose fields no longer match its generated class fails loudly, naming the tool."""
    changed = message(
        "HeartbeatResponse", "0-4", flexible="4+", fields=(F("error_code", "int16"), F("new_field", "int32"))
    )
    with pytest.raises(RuntimeError, match="gen_messages"):
        MessageCodec(changed)


def test_message_without_generated_module_gets_classes_of_the_same_shape() -> None:
    test_only = message("TestOnlyMessage", "0", flexible="none", fields=(F("a", "int32"), F("b", "[]string")))
    codec = MessageCodec(test_only)
    value = codec.new(a=1, b=["x"])
    assert codec.decode(codec.encode(value, 0), 0) == value
    with pytest.raises(TypeError, match="'c'"):
        codec.new(c=1)
    with pytest.raises(TypeError, match="'c'"):
        codec.build({"c": 1})


# -- every message and version round-trips through the typed classes ------------------------------

CODECS = {m.name: MessageCodec(m) for m, _ in CASES}


@pytest.mark.parametrize(("message", "version"), CASES, ids=lambda x: getattr(x, "name", str(x)))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_typed_round_trip(message: Message, version: int, data: st.DataObject) -> None:
    codec = CODECS[message.name]
    plain = data.draw(message_values(message, version))
    typed = _typed(_structs(message), message.name, message.fields, plain)
    encoded = codec.encode(typed, version)
    assert encoded == codec.encode(codec.build(plain), version)
    decoded = codec.decode(encoded, version)
    assert type(decoded) is type(typed)
    # the generated defaults are the codec's: fields the version lacks come back equal too
    assert decoded == typed


# -- the generator --------------------------------------------------------------------------------


def test_generator_check_passes() -> None:
    done = subprocess.run(
        [sys.executable, "tools/gen_messages.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_generator_check_reports_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(ROOT))
    try:
        gen = importlib.import_module("tools.gen_messages")
    finally:
        sys.path.remove(str(ROOT))
    out = tmp_path / "types"
    shutil.copytree(ROOT / "kcompat" / "wire" / "types", out)
    monkeypatch.setattr(gen, "OUT", out)
    monkeypatch.setattr(sys, "argv", ["gen_messages.py", "--check"])
    assert gen.main() == 0
    (out / "heartbeat.py").write_text((out / "heartbeat.py").read_text().replace("error_code", "eror_code"))
    (out / "gone.py").write_text("")
    assert gen.main() == 1
    printed = capsys.readouterr().out
    assert "stale: kcompat/wire/types/heartbeat.py" in printed and "types/gone.py" in printed
