"""Compile schema declarations into a decoder and an encoder per version.

A declaration (kcompat.wire.schema) is data; this module turns (message, version) into two
closures over precomputed field steps, cached on first use:

    decode(reader) -> Struct      every field of that version read in order; fields the version
                                  lacks get their defaults; in flexible versions the tagged-field
                                  section is read, known tags decoded, unknown ones kept as raw
                                  bytes so that re-encoding gives back the same bytes
    encode(writer, value)         value is an instance of the message's class (or an Encoded
                                  stand-in, see pre_encode); anything else is a TypeError

Values are instances of the typed classes generated from the declarations into kcompat.wire.types
(tools/gen_messages.py): one slotted class per message and struct name, version-less, with
snake_case attributes. A message with no generated module (one declared only in a test) gets
classes of the same shape built here. `bytes` fields decode to bytes; `records` fields decode to
a memoryview of the request buffer (zero copy) and encode from bytes, memoryviews or pass-through
objects (file slices) that the Writer keeps in place for sendfile.

Nested dicts are not encoded: MessageCodec.build makes the typed message from them, for tests, tools
and the command-line client, which write their requests as literals (a key the declaration lacks,
in any version, is a TypeError naming it; missing keys take defaults).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from kcompat.wire.codegen import generate
from kcompat.wire.errors import DecodeError
from kcompat.wire.primitives import Reader, Writer
from kcompat.wire.schema import F, Message
from kcompat.wire.structs import FIXED_SIZE as _FIXED_SIZE
from kcompat.wire.structs import UNKNOWN_TAGS, Decoder, Encoded, Encoder, Struct, field_names, splice
from kcompat.wire.structs import field_shape as _shape
from kcompat.wire.types import MODULES

Factories = dict[str, Callable[[], Any]]
Step = tuple[str, Decoder, Encoder, Any]  # field name, reader, writer, default (an in-order field)
Tagged = tuple[str, Decoder, Encoder, Callable[[], Any]]  # field name, reader, writer, default factory

__all__ = ["UNKNOWN_TAGS", "Encoded", "MessageCodec", "Struct"]

S = TypeVar("S", bound=Struct)


def _typed_structs(message: Message) -> dict[str, type[Struct]] | None:
    """The generated classes of a message by struct name; None for a message with no module."""
    module = MODULES.get(message.name)
    if module is None:
        return None
    structs: dict[str, dict[str, type[Struct]]] = importlib.import_module(
        f"kcompat.wire.types.{module}"
    ).STRUCTS
    return structs.get(message.name)


def value_tags(value: Any) -> dict[str, Any]:
    """{UNKNOWN_TAGS: ...} of a decoded instance that had unknown tags, else {}."""
    tags = getattr(value, UNKNOWN_TAGS, None)
    return {} if tags is None else {UNKNOWN_TAGS: tags}


def _runtime_class(name: str, names: tuple[str, ...], factories: Factories) -> type[Struct]:
    """A class of the generated classes' shape, for a message with no generated module."""

    def __init__(self: Struct, **values: Any) -> None:
        self._unknown_tags = None
        for fname, make in factories.items():
            setattr(self, fname, values.pop(fname) if fname in values else make())
        if values:
            raise TypeError(f"{name} has no field(s) {sorted(values)}")

    return type(name, (Struct,), {"__slots__": names, "__init__": __init__})


def _refuser(cls: type[Struct]) -> Callable[[Any], Any]:
    """What an encoder does with a value that is not an instance of its class: refuse it."""
    name = cls.__name__

    def refuse(value: Any) -> Any:
        if isinstance(value, cls):  # a subclass
            return value
        raise TypeError(f"{name}: cannot encode a {type(value).__name__}, only a {name}")

    return refuse


class MessageCodec:
    """The classes and per-version coders of one message declaration."""

    def __init__(self, message: Message, *, generated: bool = True) -> None:
        self.message = message
        self.generated = generated
        self._typed = _typed_structs(message)
        self.classes: dict[str, type[Struct]] = {}
        self.factories: dict[type[Struct], Factories] = {}
        self._nested: dict[type[Struct], dict[str, tuple[type[Struct], bool]]] = {}  # struct fields
        self.cls = self._class_for(message.name, message.fields)
        self._compiled: dict[tuple[str, int], tuple[Decoder, Encoder, int]] = {}

    # -- classes ------------------------------------------------------------------------------
    def _class_for(self, name: str, fields: tuple[F, ...]) -> type[Struct]:
        existing = self.classes.get(name)
        if existing is not None:
            return existing
        factories: Factories = {}
        if self._typed is None:
            cls = _runtime_class(name, tuple(f.name for f in fields), factories)
        else:
            typed = self._typed.get(name)
            if typed is None or field_names(typed) != tuple(f.name for f in fields):
                raise RuntimeError(
                    f"kcompat.wire.types is out of date for {self.message.name}.{name}: run tools/gen_messages.py"
                )
            cls = typed
        self.classes[name] = cls
        self.factories[cls] = factories
        for f in fields:
            factories[f.name] = self._factory(f)
        self._nested[cls] = {
            f.name: (self.classes[f.element_type], f.is_array) for f in fields if f.is_struct
        }
        return cls

    def _factory(self, f: F) -> Callable[[], Any]:
        if f.is_struct and not f.is_array:
            return self._class_for(f.element_type, f.fields)
        if f.is_struct:
            self._class_for(f.element_type, f.fields)
        default = f.default
        if f.is_array:
            if default is None:
                return lambda: None
            return list
        return lambda: default

    # -- public -------------------------------------------------------------------------------
    def new(self, **values: Any) -> Any:
        return self.cls(**values)

    def build(self, values: Mapping[str, Any]) -> Any:
        """The message made from nested mappings (lists of them for arrays of structs), for tests,
        tools and the command-line client; instances among them are kept. A key the declaration
        lacks is a TypeError naming it; missing keys take their defaults."""
        return self._build(self.cls, values)

    def _build(self, cls: type[Struct], value: Any) -> Any:
        if isinstance(value, cls) or type(value) is Encoded:
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"{cls.__name__}: cannot build one from a {type(value).__name__}")
        known = self.factories[cls]
        extra = sorted(k for k in value if k not in known and k != UNKNOWN_TAGS)
        if extra:
            raise TypeError(f"{cls.__name__} has no field(s) {extra}")
        nested = self._nested[cls]
        fields = {}
        for k, v in value.items():
            if k == UNKNOWN_TAGS:
                continue
            sub = nested.get(k)
            if sub is not None and v is not None:
                v = [self._build(sub[0], x) for x in v] if sub[1] else self._build(sub[0], v)
            fields[k] = v
        o = cls(**fields)
        if UNKNOWN_TAGS in value:
            setattr(o, UNKNOWN_TAGS, value[UNKNOWN_TAGS])
        return o

    def decode(self, data: bytes | bytearray | memoryview | Reader, version: int) -> Any:
        """Decode one message body of `version`; a trailing remainder is an error for whole buffers."""
        r = data if isinstance(data, Reader) else Reader(data)
        value = self.decoder(version)(r)
        if not isinstance(data, Reader) and r.remaining():
            raise DecodeError(f"{r.remaining()} unexpected bytes after the message", self.message.name)
        return value

    def encode(self, value: Any, version: int) -> bytes:
        w = Writer()
        self.encoder(version)(w, value)
        return w.getvalue()

    def write(self, w: Writer, value: Any, version: int) -> None:
        self.encoder(version)(w, value)

    def pre_encode(self, value: S, version: int) -> S:
        """value (this message or one of its structs) encoded now at `version`, to put in its place
        in a message encoded later at that version: typed as the struct it stands for, so that
        messages stay typed; the encoder copies its bytes (an Encoded, see structs.py)."""
        cls = type(value)
        self._compile(version)  # compiles every struct the version holds
        key = (self.message.name if cls is self.cls else cls.__name__, version)
        got = self._compiled.get(key)
        if got is None or self.classes.get(cls.__name__) is not cls:
            raise TypeError(f"{self.message.name} v{version} holds no {cls.__name__}")
        w = Writer()
        got[1](w, value)
        return cast(S, Encoded(cls, version, w.getvalue()))

    def decoder(self, version: int) -> Decoder:
        return self._compile(version)[0]

    def encoder(self, version: int) -> Encoder:
        return self._compile(version)[1]

    def _compile(self, version: int) -> tuple[Decoder, Encoder, int]:
        key = (self.message.name, version)
        got = self._compiled.get(key)
        if got is None:
            if version not in self.message.versions:
                raise KeyError(
                    f"{self.message.name} has no version {version} (declared {self.message.versions})"
                )
            got = self._struct(self.cls, self.message.fields, version)
            self._compiled[key] = got
        return got

    # -- compiling ----------------------------------------------------------------------------
    def _struct(self, cls: type[Struct], fields: tuple[F, ...], version: int) -> tuple[Decoder, Encoder, int]:
        flexible = version in self.message.flexible
        factories = self.factories[cls]
        coerce = _refuser(cls)
        steps, tagged, absent, min_size = self._plan(fields, factories, version, flexible)
        read_tagged, write_tagged = _tagged_coders(cls.__name__, tagged)
        decode, encode = _struct_coders(
            cls, version, flexible, steps, absent, read_tagged, write_tagged, coerce
        )
        if not self.generated:
            return decode, encode, min_size
        fast_decode, fast_encode = generate(
            cls,
            fields,
            version,
            flexible,
            steps,
            absent,
            tagged,
            read_tagged,
            write_tagged,
            decode,
            encode,
            coerce,
            lambda f: self._sub(f, version),
        )
        return fast_decode, fast_encode, min_size

    def _plan(
        self, fields: tuple[F, ...], factories: Factories, version: int, flexible: bool
    ) -> tuple[list[Step], dict[int, Tagged], list[tuple[str, Callable[[], Any]]], int]:
        """Sort a version's fields into in-order steps, tagged fields and absent ones (defaults only)."""
        steps: list[Step] = []
        tagged: dict[int, Tagged] = {}
        absent: list[tuple[str, Callable[[], Any]]] = []
        min_size = 1 if flexible else 0
        for f in fields:
            make = factories[f.name]
            if version not in f.versions:
                absent.append((f.name, make))
                continue
            read, write, size = self._field(f, version, flexible)
            if flexible and f.tag is not None and version in f.tagged:
                tagged[f.tag] = (f.name, read, write, make)
                absent.append((f.name, make))
            else:
                steps.append((f.name, read, write, make()))
                min_size += size
        return steps, tagged, absent, min_size

    def _field(self, f: F, version: int, flexible: bool) -> tuple[Decoder, Encoder, int]:
        compact, nullable = _shape(f, version, flexible)
        label = f.name
        if f.is_array:
            elem_read, elem_write, elem_size = self._element(f, version, compact, nullable=False)
            item_size = max(elem_size, 1)
            if compact:

                def read_array(r: Reader) -> Any:
                    n = r.compact_array_length(item_size)
                    if n < 0:
                        if not nullable:
                            raise DecodeError("null array in a non-nullable field")
                        return None
                    return [elem_read(r) for _ in range(n)]

                def write_array(w: Writer, v: Any) -> None:
                    if v is None:
                        _null_ok(nullable, label)
                        w.compact_array_length(None)
                        return
                    w.compact_array_length(len(v))
                    for item in v:
                        elem_write(w, item)

                return read_array, write_array, 1

            def read_array32(r: Reader) -> Any:
                n = r.array_length(item_size)
                if n < 0:
                    if not nullable:
                        raise DecodeError("null array in a non-nullable field")
                    return None
                return [elem_read(r) for _ in range(n)]

            def write_array32(w: Writer, v: Any) -> None:
                if v is None:
                    _null_ok(nullable, label)
                    w.array_length(None)
                    return
                w.array_length(len(v))
                for item in v:
                    elem_write(w, item)

            return read_array32, write_array32, 4
        return self._element(f, version, compact, nullable)

    def _sub(self, f: F, version: int) -> tuple[Decoder, Encoder, int]:
        """The coders of struct field f's type, compiled once per version for every field of that type."""
        key = (f.element_type, version)
        got = self._compiled.get(key)
        if got is None:
            got = self._struct(self._class_for(f.element_type, f.fields), f.fields, version)
            self._compiled[key] = got
        return got

    def _element(self, f: F, version: int, compact: bool, nullable: bool) -> tuple[Decoder, Encoder, int]:
        t = f.element_type
        if f.is_struct:
            sread, swrite, ssize = self._sub(f, version)
            if not nullable:
                return sread, swrite, ssize
            return _optional_struct(sread, swrite)
        if t in _FIXED_SIZE:
            reader_name = {"bool": "boolean"}.get(t, t)
            rd: Callable[[Reader], Any] = getattr(Reader, reader_name)
            wr: Callable[[Writer, Any], None] = getattr(Writer, reader_name)
            return rd, wr, _FIXED_SIZE[t]
        if t == "string":
            return _string(f.name, compact, nullable)
        if t in ("bytes", "records"):
            return _bytes(f.name, t == "bytes", compact, nullable)
        raise AssertionError(f"unknown type {t}")


def _tagged_coders(
    name: str, tagged: dict[int, Tagged]
) -> tuple[Callable[[Reader, Any], None], Callable[[Writer, Any], None]]:
    """Reader and writer of a struct's tagged-field section (flexible versions)."""

    def read_tagged(r: Reader, o: Any) -> None:
        try:
            section = r.tagged_fields()
        except DecodeError as e:
            raise e.within(f"{name}.tagged_fields") from None
        unknown = []
        for tag, data in section:
            known = tagged.get(tag)
            if known is None:
                unknown.append((tag, bytes(data)))
                continue
            sub = Reader(data)
            try:
                setattr(o, known[0], known[1](sub))
                if sub.remaining():
                    raise DecodeError(f"{sub.remaining()} bytes left over in tagged field {tag}")
            except DecodeError as e:
                raise e.within(known[0]) from None
        if unknown:
            setattr(o, UNKNOWN_TAGS, unknown)

    def write_tagged(w: Writer, value: Any) -> None:
        out: list[tuple[int, bytes]] = list(value_tags(value).get(UNKNOWN_TAGS) or ())
        for tag, (fname, _, write, make) in tagged.items():
            v = getattr(value, fname)
            if v == make():  # Kafka writes a tagged field only when it differs from its default
                continue
            sub = Writer()
            write(sub, v)
            out.append((tag, sub.getvalue()))
        w.tagged_fields(out)

    return read_tagged, write_tagged


def _struct_coders(
    cls: type[Struct],
    version: int,
    flexible: bool,
    steps: list[Step],
    absent: list[tuple[str, Callable[[], Any]]],
    read_tagged: Callable[[Reader, Any], None],
    write_tagged: Callable[[Writer, Any], None],
    coerce: Callable[[Any], Any],
) -> tuple[Decoder, Encoder]:
    """The interpreted decoder and encoder of one struct version (the generated ones fall back to these)."""
    name = cls.__name__
    new = object.__new__
    step_reads = [(n, rd) for n, rd, _, _ in steps]
    step_writes = [(n, wr, dflt) for n, _, wr, dflt in steps]

    def decode(r: Reader) -> Any:
        o = new(cls)
        o._unknown_tags = None
        for fname, make in absent:
            setattr(o, fname, make())
        for fname, read in step_reads:
            try:
                setattr(o, fname, read(r))
            except DecodeError as e:
                raise e.within(fname) from None
        if flexible:
            read_tagged(r, o)
        return o

    def encode(w: Writer, value: Any) -> None:
        if type(value) is not cls:
            if type(value) is Encoded:
                splice(w, value, cls, version)
                return
            value = coerce(value)
        for fname, write, _ in step_writes:
            v = getattr(value, fname)
            try:
                write(w, v)
            except (TypeError, ValueError, OverflowError, AttributeError) as e:
                raise type(e)(f"{name}.{fname}: {e}") from None
        if flexible:
            write_tagged(w, value)

    return decode, encode


def _optional_struct(sread: Decoder, swrite: Encoder) -> tuple[Decoder, Encoder, int]:
    """A nullable struct field: an int8 presence marker (-1 for null) before the struct."""

    def read_opt(r: Reader) -> Any:
        return None if r.int8() < 0 else sread(r)

    def write_opt(w: Writer, v: Any) -> None:
        if v is None:
            w.int8(-1)
        else:
            w.int8(1)
            swrite(w, v)

    return read_opt, write_opt, 1


def _string(label: str, compact: bool, nullable: bool) -> tuple[Decoder, Encoder, int]:
    srd = Reader.compact_string if compact else Reader.string
    swr = Writer.compact_string if compact else Writer.string

    def read_string(r: Reader) -> Any:
        v = srd(r)
        if v is None and not nullable:
            raise DecodeError("null string in a non-nullable field")
        return v

    def write_string(w: Writer, v: Any) -> None:
        if v is None:
            _null_ok(nullable, label)
        swr(w, v)

    return read_string, write_string, 1 if compact else 2


def _bytes(label: str, as_bytes: bool, compact: bool, nullable: bool) -> tuple[Decoder, Encoder, int]:
    """A bytes field (decoded to bytes) or a records field (decoded to a zero-copy memoryview)."""
    brd = Reader.compact_bytes if compact else Reader.bytes_
    bwr = Writer.compact_bytes if compact else Writer.bytes_

    def read_bytes(r: Reader) -> Any:
        v = brd(r)
        if v is None:
            if not nullable:
                raise DecodeError("null bytes in a non-nullable field")
            return None
        return bytes(v) if as_bytes else v

    def write_bytes(w: Writer, v: Any) -> None:
        if v is None:
            _null_ok(nullable, label)
        bwr(w, v)

    return read_bytes, write_bytes, 1 if compact else 4


def _null_ok(nullable: bool, name: str) -> None:
    if not nullable:
        raise ValueError(f"{name} is not nullable in this version")
