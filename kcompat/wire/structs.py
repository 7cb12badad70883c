"""Decoded values and the small facts about fields that the reference codec (codec.py) and the
generated coders (codegen.py) share: Struct, the fixed widths, a field's shape in a version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcompat.wire.primitives import Reader, Writer
from kcompat.wire.schema import F

Decoder = Callable[[Reader], Any]
Encoder = Callable[[Writer, Any], None]

FIXED_SIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4, "float64": 8, "bool": 1, "uuid": 16}
UNKNOWN_TAGS = "_unknown_tags"
MISSING: Any = object()  # a key absent from a dict being encoded


class Struct:
    """A decoded (or to-be-encoded) message or struct: attributes named after the schema's fields."""

    _field_names: tuple[str, ...] = ()
    _factories: dict[str, Callable[[], Any]] = {}

    def __init__(self, **values: Any) -> None:
        d = self.__dict__
        for name, make in self._factories.items():
            d[name] = values.pop(name) if name in values else make()
        if values:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(values)}")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k != UNKNOWN_TAGS)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts and lists, for logs and tests."""

        def plain(v: Any) -> Any:
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [plain(x) for x in v]
            if isinstance(v, memoryview):
                return bytes(v)
            return v

        return {k: plain(v) for k, v in self.__dict__.items() if k != UNKNOWN_TAGS}


def field_shape(f: F, version: int, flexible: bool) -> tuple[bool, bool]:
    """(compact, nullable): whether field f uses the compact encodings, and may be null, in this version."""
    return (flexible if f.flexible is None else version in f.flexible), version in f.nullable
