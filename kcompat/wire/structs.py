"""The base of every message class: the typed ones in kcompat.wire.types and any built at run time.

A message or struct is a class with one slot per field of its declaration (every field of every
version: the classes are version-less; a version that lacks a field leaves its default). The
codec decodes into these classes and encodes from them; constructing one with a field its
declaration lacks is a TypeError, so a misspelt name fails where it is written.

The typed classes are plain slotted classes with a written-out __init__ rather than dataclasses:
the dataclass decorator costs about 0.9 ms per class at import (it compiles __init__, __repr__
and __eq__ at run time), ~500 classes in all, where a plain class costs about 10 us.

Also the small facts about fields that the reference codec (codec.py) and the generated coders
(codegen.py) share: the fixed widths, a field's shape in a version.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from kcompat.wire.primitives import Reader, Sized, Writer
from kcompat.wire.schema import F

# What a `records` field holds: a decoded view of the request buffer (zero copy), or on the way
# out bytes, a view, or a pass-through file slice that the Writer keeps in place for sendfile.
Records = bytes | bytearray | memoryview | Sized

# The default of a list or struct parameter: each instance gets its own fresh value.
NEW: Any = object()

UNKNOWN_TAGS = "_unknown_tags"

Decoder = Callable[[Reader], Any]
Encoder = Callable[[Writer, Any], None]

FIXED_SIZE = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint16": 2,
    "uint32": 4,
    "float64": 8,
    "bool": 1,
    "uuid": 16,
}


class Struct:
    """Fields in __slots__ (the subclass's); tagged fields of unknown tags, when a decoded message
    had any, in _unknown_tags, so that re-encoding gives back the same bytes. Constructors and
    decoders set _unknown_tags (None when there are none): the encoder reads it on every struct,
    and reading an unset slot would cost an exception each time."""

    __slots__ = (UNKNOWN_TAGS,)
    __hash__ = None  # type: ignore[assignment]  # mutable

    _unknown_tags: list[tuple[int, bytes]] | None

    _key: Callable[[Any], Any]  # the fields' values as a tuple, for __eq__ (per class, C speed)

    def __init_subclass__(cls) -> None:
        names = cls.__dict__.get("__slots__", ())
        key: Callable[[Any], Any] = attrgetter(*names) if names else (lambda o: ())
        cls._key = staticmethod(key)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        key = self._key
        return bool(key(self) == key(other))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
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

        return {n: plain(getattr(self, n)) for n in self.__slots__}


class Encoded:
    """A struct already encoded at one version, standing in for it in a message encoded later at
    that same version: the encoder copies the bytes instead of walking the fields again. For
    answers whose parts change rarely and are asked for often (Metadata's topics at thousands of
    partitions): see MessageCodec.pre_encode."""

    __slots__ = ("cls", "data", "version")

    def __init__(self, cls: type[Struct], version: int, data: bytes) -> None:
        self.cls = cls
        self.version = version
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"Encoded({self.cls.__name__} v{self.version}, {len(self.data)} bytes)"


def splice(w: Writer, value: Encoded, cls: type[Struct], version: int) -> None:
    """Write an Encoded where a `cls` of `version` belongs; one of another struct or version is a
    TypeError, never bytes in the wrong shape."""
    if value.cls is not cls or value.version != version:
        raise TypeError(
            f"{cls.__name__} v{version}: cannot use {value.cls.__name__} encoded at v{value.version}"
        )
    w.buf += value.data


def field_names(cls: type[Struct]) -> tuple[str, ...]:
    names: tuple[str, ...] = cls.__slots__
    return names


def field_shape(f: F, version: int, flexible: bool) -> tuple[bool, bool]:
    """(compact, nullable): whether field f uses the compact encodings, and may be null, in this version."""
    return (flexible if f.flexible is None else version in f.flexible), version in f.nullable
