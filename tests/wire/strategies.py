"""Hypothesis strategies that build a value for any declared message at any version."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kcompat.wire.schema import F, Message

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def _element(f: F, version: int) -> st.SearchStrategy[Any]:
    t = f.element_type
    if f.is_struct:
        return struct_values(f.fields, version)
    if t in _INTS:
        lo, hi = _INTS[t]
        return st.integers(lo, hi)
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "uuid":
        return st.uuids()
    if t == "string":
        return st.text(max_size=12)
    return st.binary(max_size=24)  # bytes and records


def field_values(f: F, version: int) -> st.SearchStrategy[Any]:
    base = st.lists(_element(f, version), max_size=3) if f.is_array else _element(f, version)
    if version in f.nullable:
        return st.one_of(st.none(), base)
    return base


def struct_values(fields: tuple[F, ...], version: int) -> st.SearchStrategy[dict[str, Any]]:
    present = {f.name: field_values(f, version) for f in fields if version in f.versions}
    return st.fixed_dictionaries(present)


def message_values(message: Message, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return struct_values(message.fields, version)
