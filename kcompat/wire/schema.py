"""Message schemas as data: one declaration per message covers every version.

A declaration is a tree of `F` (field) values, written the way Kafka's own message specs put
it: a field has a type, the versions it is present in, the versions in which it may be null,
and, for tagged fields, a tag and the versions in which it is tagged. Version ranges use
Kafka's notation: "3+", "0-2", "5", "none".

    PRODUCE = Api(0, "Produce", "0-11", flexible="9+",
        request=(
            F("transactional_id", "string", "3+", nullable="3+", default=None),
            F("acks", "int16"),
            F("topic_data", "[]TopicProduceData", fields=(
                F("name", "string"),
                ...

Types: int8 int16 int32 int64 uint16 uint32 float64 bool uuid string bytes records, a struct
name (one nested struct), or "[]" before any of them (an array). The codec (kcompat.wire.codec)
compiles a declaration into a decoder and an encoder per version.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kcompat.kafka_uuid import ZERO_UUID

PRIMITIVES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "float64",
        "bool",
        "uuid",
        "string",
        "bytes",
        "records",
    }
)

_NO_DEFAULT: Any = object()


@dataclass(frozen=True, slots=True)
class VersionRange:
    """Inclusive [low, high]; high None means open-ended; low > high (NONE) means never."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str | None) -> VersionRange:
        # Some 5,000 version strings are parsed as the declarations load, nearly all of them None
        # or "0+": each distinct one once (the ranges are immutable, so one instance serves all).
        parsed = _PARSED.get(text)
        if parsed is None:
            parsed = _PARSED[text] = cls._parse(text)
        return parsed

    @classmethod
    def _parse(cls, text: str | None) -> VersionRange:
        if text is None or text == "none":
            return NONE
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        v = int(text)
        return cls(v, v)

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return self.low <= version and (self.high is None or version <= self.high)

    def __str__(self) -> str:
        if self is NONE or (self.high is not None and self.low > self.high):
            return "none"
        if self.high is None:
            return f"{self.low}+"
        if self.low == self.high:
            return str(self.low)
        return f"{self.low}-{self.high}"


NONE = VersionRange(1, 0)
_PARSED: dict[str | None, VersionRange] = {}


@dataclass(frozen=True, slots=True, init=False)
class F:
    """One field of a message or struct, across all versions of the message."""

    name: str
    type: str
    versions: VersionRange
    nullable: VersionRange
    default: Any
    tag: int | None
    tagged: VersionRange
    flexible: VersionRange | None  # a per-field override (RequestHeader.client_id is never compact)
    fields: tuple[F, ...]

    def __init__(
        self,
        name: str,
        type: str,
        versions: str = "0+",
        *,
        nullable: str | None = None,
        default: Any = _NO_DEFAULT,
        tag: int | None = None,
        tagged: str | None = None,
        flexible: str | None = None,
        fields: Iterable[F] = (),
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "versions", VersionRange.parse(versions))
        object.__setattr__(self, "nullable", VersionRange.parse(nullable))
        object.__setattr__(self, "tag", tag)
        object.__setattr__(self, "tagged", VersionRange.parse(tagged))
        object.__setattr__(self, "flexible", None if flexible is None else VersionRange.parse(flexible))
        object.__setattr__(self, "fields", tuple(fields))
        object.__setattr__(self, "default", _implicit_default(type) if default is _NO_DEFAULT else default)
        base = self.element_type
        if base not in PRIMITIVES and not self.fields:
            raise ValueError(f"field {name}: struct type {base} declares no fields")

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES


def _implicit_default(type_: str) -> Any:
    """Kafka's defaults when a spec gives none: zero, false, empty."""
    if type_.startswith("[]"):
        return ()
    return _IMPLICIT_DEFAULTS.get(type_)  # a struct's default is built by the codec


_IMPLICIT_DEFAULTS: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "uint32": 0,
    "float64": 0.0,
    "bool": False,
    "uuid": ZERO_UUID,
    "string": "",
    "bytes": b"",
    "records": None,
}


@dataclass(frozen=True, slots=True)
class Message:
    """A request, response or record body: a name and its top-level fields."""

    name: str
    versions: VersionRange
    flexible: VersionRange
    fields: tuple[F, ...]


@dataclass(frozen=True, slots=True)
class Api:
    """A request/response pair under one API key, with the versions Kafka defines for it."""

    key: int
    name: str
    request: Message
    response: Message
    deprecated: VersionRange = field(default=NONE)

    @property
    def versions(self) -> VersionRange:
        return self.request.versions

    @property
    def flexible(self) -> VersionRange:
        return self.request.flexible


def api(
    key: int,
    name: str,
    versions: str,
    *,
    flexible: str,
    request: Iterable[F],
    response: Iterable[F],
    deprecated: str | None = None,
) -> Api:
    """Declare an API: its request and response share the version range and flexible versions."""
    vr, fx = VersionRange.parse(versions), VersionRange.parse(flexible)
    return Api(
        key,
        name,
        Message(name + "Request", vr, fx, tuple(request)),
        Message(name + "Response", vr, fx, tuple(response)),
        VersionRange.parse(deprecated),
    )


def message(name: str, versions: str, *, flexible: str, fields: Iterable[F]) -> Message:
    """Declare a standalone message (a record key or value, a consumer protocol blob)."""
    return Message(name, VersionRange.parse(versions), VersionRange.parse(flexible), tuple(fields))
