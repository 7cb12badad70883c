"""Compile schema declarations into a decoder and an encoder per version.

A declaration (kcompat.wire.schema) is data; this module turns (message, version) into two
closures over precomputed field steps, cached on first use:

    decode(reader) -> Struct      every field of that version read in order; fields the version
                                  lacks get their defaults; in flexible versions the tagged-field
                                  section is read, known tags decoded, unknown ones kept as raw
                                  bytes so that re-encoding gives back the same bytes
    encode(writer, value)         value is an instance of the message's class, or a plain dict
                                  (missing keys take defaults; a key the declaration lacks, in
                                  any version, is a TypeError naming it)

Values are instances of the typed classes generated from the declarations into kcompat.wire.types
(tools/gen_messages.py): one slotted class per message and struct name, version-less, with
snake_case attributes. A message with no generated module (one declared only in a test) gets
classes of the same shape built here. `bytes` fields decode to bytes; `records` fields decode to
a memoryview of the request buffer (zero copy) and encode from bytes, memoryviews or pass-through
objects (file slices) that the Writer keeps in place for sendfile.
"""

from __future__ import annotations

import importlib
import struct
import uuid
from collections.abc import Callable
from typing import Any

from kcompat.wire.errors import DecodeError
from kcompat.wire.primitives import Reader, Writer, encode_uvarint
from kcompat.wire.schema import F, Message
from kcompat.wire.structs import UNKNOWN_TAGS, Struct, field_names
from kcompat.wire.types import MODULES

Decoder = Callable[[Reader], Any]
Encoder = Callable[[Writer, Any], None]

_FIXED_SIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4, "float64": 8, "bool": 1, "uuid": 16}
Factories = dict[str, Callable[[], Any]]
_MISSING: Any = object()

__all__ = ["UNKNOWN_TAGS", "MessageCodec", "Struct"]


def _typed_structs(message: Message) -> dict[str, type[Struct]] | None:
    """The generated classes of a message by struct name; None for a message with no module."""
    module = MODULES.get(message.name)
    if module is None:
        return None
    structs: dict[str, dict[str, type[Struct]]] = importlib.import_module(f"kcompat.wire.types.{module}").STRUCTS
    return structs.get(message.name)


def value_tags(value: Any) -> dict[str, Any]:
    """{UNKNOWN_TAGS: ...} of a decoded instance that had unknown tags, else {}."""
    tags = getattr(value, UNKNOWN_TAGS, None)
    return {} if tags is None else {UNKNOWN_TAGS: tags}


def _runtime_class(name: str, names: tuple[str, ...], factories: Factories) -> type[Struct]:
    """A class of the generated classes' shape, for a message with no generated module."""

    def __init__(self: Struct, **values: Any) -> None:
        for fname, make in factories.items():
            setattr(self, fname, values.pop(fname) if fname in values else make())
        if values:
            raise TypeError(f"{name} has no field(s) {sorted(values)}")

    return type(name, (Struct,), {"__slots__": names, "__init__": __init__})


def _coercer(cls: type[Struct], factories: Factories) -> Callable[[Any], Any]:
    """What an encoder does with a value that is not an instance of its class: a dict (or another
    struct, or an object with attributes) becomes one, and a field the declaration lacks raises."""
    name = cls.__name__
    known = factories.keys()

    def coerce(value: Any) -> Any:
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            items = value
        elif isinstance(value, Struct):
            items = {n: getattr(value, n) for n in field_names(type(value))}
            if (tags := getattr(value, UNKNOWN_TAGS, None)) is not None:
                items[UNKNOWN_TAGS] = tags
        elif hasattr(value, "__dict__"):
            items = vars(value)
        else:
            raise TypeError(f"{name}: cannot encode a {type(value).__name__}")
        if not items.keys() <= known:
            extra = sorted(k for k in items if k not in known and k != UNKNOWN_TAGS)
            if extra:
                raise TypeError(f"{name} has no field(s) {extra}")
            items = dict(items)
            o = cls(**{k: v for k, v in items.items() if k != UNKNOWN_TAGS})
            setattr(o, UNKNOWN_TAGS, items[UNKNOWN_TAGS])
            return o
        return cls(**items)

    return coerce


class MessageCodec:
    """The classes and per-version coders of one message declaration."""

    def __init__(self, message: Message, *, generated: bool = True) -> None:
        self.message = message
        self.generated = generated
        self._typed = _typed_structs(message)
        self.classes: dict[str, type[Struct]] = {}
        self.factories: dict[type[Struct], Factories] = {}
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
        return cls

    def _factory(self, f: F) -> Callable[[], Any]:
        if f.is_struct and not f.is_array:
            sub = self._class_for(f.element_type, f.fields)
            return sub
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

    def decoder(self, version: int) -> Decoder:
        return self._compile(version)[0]

    def encoder(self, version: int) -> Encoder:
        return self._compile(version)[1]

    def _compile(self, version: int) -> tuple[Decoder, Encoder, int]:
        key = (self.message.name, version)
        got = self._compiled.get(key)
        if got is None:
            if version not in self.message.versions:
                raise KeyError(f"{self.message.name} has no version {version} (declared {self.message.versions})")
            got = self._struct(self.cls, self.message.fields, version)
            self._compiled[key] = got
        return got

    # -- compiling ----------------------------------------------------------------------------
    def _struct(self, cls: type[Struct], fields: tuple[F, ...], version: int) -> tuple[Decoder, Encoder, int]:
        flexible = version in self.message.flexible
        steps: list[tuple[str, Decoder, Encoder, Any]] = []
        tagged: dict[int, tuple[str, Decoder, Encoder, Callable[[], Any]]] = {}
        absent: list[tuple[str, Callable[[], Any]]] = []
        min_size = 1 if flexible else 0
        factories = self.factories[cls]
        coerce = _coercer(cls, factories)
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
        name = cls.__name__
        new = object.__new__
        step_reads = [(n, rd) for n, rd, _, _ in steps]
        step_writes = [(n, wr, dflt) for n, _, wr, dflt in steps]

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
            is_dict = isinstance(value, dict)  # the generated coder's dict path
            out: list[tuple[int, bytes]] = list((value if is_dict else value_tags(value)).get(UNKNOWN_TAGS) or ())
            for tag, (fname, _, write, make) in tagged.items():
                v = value.get(fname, _MISSING) if is_dict else getattr(value, fname)
                if v is _MISSING or v == make():  # Kafka writes a tagged field only when it differs from its default
                    continue
                sub = Writer()
                write(sub, v)
                out.append((tag, sub.getvalue()))
            w.tagged_fields(out)

        def decode(r: Reader) -> Any:
            o = new(cls)
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
                value = coerce(value)
            for fname, write, _ in step_writes:
                v = getattr(value, fname)
                try:
                    write(w, v)
                except (TypeError, ValueError, OverflowError, AttributeError) as e:
                    raise type(e)(f"{name}.{fname}: {e}") from None
            if flexible:
                write_tagged(w, value)

        if not self.generated:
            return decode, encode, min_size
        fast_decode, fast_encode = _generate(
            cls, fields, version, flexible, steps, absent, tagged, read_tagged, write_tagged, decode, encode,
            coerce, lambda f: self._sub(f, version),
        )
        return fast_decode, fast_encode, min_size

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
        label = f.name
        if f.is_struct:
            sread, swrite, ssize = self._sub(f, version)
            if not nullable:
                return sread, swrite, ssize

            def read_opt(r: Reader) -> Any:
                return None if r.int8() < 0 else sread(r)

            def write_opt(w: Writer, v: Any) -> None:
                if v is None:
                    w.int8(-1)
                else:
                    w.int8(1)
                    swrite(w, v)

            return read_opt, write_opt, 1
        if t in _FIXED_SIZE:
            reader_name = {"bool": "boolean"}.get(t, t)
            rd: Callable[[Reader], Any] = getattr(Reader, reader_name)
            wr: Callable[[Writer, Any], None] = getattr(Writer, reader_name)
            return rd, wr, _FIXED_SIZE[t]
        if t == "string":
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
        if t in ("bytes", "records"):
            brd = Reader.compact_bytes if compact else Reader.bytes_
            bwr = Writer.compact_bytes if compact else Writer.bytes_
            as_bytes = t == "bytes"

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
        raise AssertionError(f"unknown type {t}")


def _shape(f: F, version: int, flexible: bool) -> tuple[bool, bool]:
    """(compact, nullable): whether field f uses the compact encodings, and may be null, in this version."""
    return (flexible if f.flexible is None else version in f.flexible), version in f.nullable


def _null_ok(nullable: bool, name: str) -> None:
    if not nullable:
        raise ValueError(f"{name} is not nullable in this version")



# -- generated coders ---------------------------------------------------------------------------
#
# The closures above are the reference. For speed, each (struct, version) also gets a decoder and
# an encoder generated as Python source and exec'd, with the read position kept in a local:
#   - consecutive fixed-width fields are read or written with one struct.Struct; uuids inline;
#   - strings, bytes and records read their length inline (one-byte uvarints and int16/int32
#     without a call, longer uvarints through Reader.uvarint), check it against the bytes left and
#     slice: records stay views of the input buffer, bytes are copied, strings decoded; on the
#     way out the Writer's own rule is kept, so pass-through chunks (file slices) stay chunks;
#   - nested structs, nullable structs and arrays of structs call the element's generated coder
#     directly; arrays of fixed-width values are one struct call, arrays of strings a loop;
#   - an empty tagged-field section (the usual case) costs one byte test.
# Only the happy path is generated: anything unusual (a null where none is allowed, a negative or
# too large length, bad UTF-8, a wrong type, an array type not handled here) raises, the generated
# code rewinds and runs the reference, so results and errors are always the reference's
# (tests/wire/test_codec_generated.py checks both agree). An array's count is checked against the
# bytes left before any element is read, as the reference does, so a huge claimed count costs nothing.

_STRUCT_CODES = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I",
                 "float64": "d", "bool": "?"}  # fmt: skip


class _Fallback(Exception):
    """Raised by generated code for whatever it leaves to the reference."""


def _rewind(w: Writer, n0: int, c0: int) -> None:
    """Undo what an encoder wrote after the writer held n0 buffered bytes and c0 chunks."""
    if len(w.chunks) > c0:
        first = w.chunks[c0]
        w.buf = bytearray(first[:n0]) if n0 else bytearray()  # type: ignore[index]
        del w.chunks[c0:]
    else:
        del w.buf[n0:]


def _indent(lines: list[str], by: int = 4) -> list[str]:
    return [" " * by + line for line in lines]


class _Inline:
    """Source lines that read or write one field inline, for _generate.

    Reading lines use the decoder's locals buf, end, pos (kept current) and r (synced around calls
    to other decoders); writing lines take the value from a local and append to w.buf. Both may use
    n, e, b and x as scratch. None means "not handled here": the caller uses the reference closure.
    """

    def __init__(
        self, ns: dict[str, Any], version: int, flexible: bool, sub: Callable[[F], tuple[Decoder, Encoder, int]]
    ) -> None:
        self.ns = ns
        self.version = version
        self.flexible = flexible
        self.sub = sub

    def _name(self, value: Any) -> str:
        name = f"X{len(self.ns)}"
        self.ns[name] = value
        return name

    # -- reading --------------------------------------------------------------------------------
    def read(self, f: F, target: str) -> list[str] | None:
        compact, nullable = _shape(f, self.version, self.flexible)
        if not f.is_array:
            return self._read_one(f, compact, nullable, target)
        t = f.element_type
        if f.is_struct:
            dec, _, size = self.sub(f)
            size = max(size, 1)
            elements = ["r.pos = pos", f"{target} = [{self._name(dec)}(r) for _ in range(n)]", "pos = r.pos"]
        elif t in _STRUCT_CODES:
            size = _FIXED_SIZE[t]
            elements = [f"{target} = list(unpack_from(f'>{{n}}{_STRUCT_CODES[t]}', buf, pos))", f"pos += n * {size}"]
        elif t == "string":
            each = self._read_one(f, compact, False, "x")
            assert each is not None
            size = 1 if compact else 2
            elements = ["a = []", "for _ in range(n):", *_indent(each), "    a.append(x)", f"{target} = a"]
        else:
            return None
        # the reference's check: the count against the bytes left, before anything is read or allocated
        body = [f"if n < 0 or n * {size} > end - pos: raise FB", *elements]
        return self._read_length(compact, 4) + self._or_null(nullable, target, body)

    def _read_one(self, f: F, compact: bool, nullable: bool, target: str) -> list[str] | None:
        t = f.element_type
        if f.is_struct:
            dec = self._name(self.sub(f)[0])
            if not nullable:
                return ["r.pos = pos", f"{target} = {dec}(r)", "pos = r.pos"]
            return ["if pos >= end: raise FB", "if buf[pos] > 127:", f"    {target} = None", "    pos += 1", "else:",
                    "    r.pos = pos + 1", f"    {target} = {dec}(r)", "    pos = r.pos"]  # fmt: skip
        if t == "uuid":
            return ["if pos + 16 > end: raise FB", f"{target} = UUID(bytes=bytes(buf[pos:pos + 16]))", "pos += 16"]
        value = {"string": "str(buf[pos:e], 'utf-8')", "bytes": "bytes(buf[pos:e])", "records": "buf[pos:e]"}.get(t)
        if value is None:
            return None  # fixed widths: read in runs by _generate
        body = ["e = pos + n", "if n < 0 or e > end: raise FB", f"{target} = {value}", "pos = e"]
        return self._read_length(compact, 2 if t == "string" else 4) + self._or_null(nullable, target, body)

    @staticmethod
    def _read_length(compact: bool, width: int) -> list[str]:
        """Lines leaving a length or count in n (-1 for null, as the reference reads it)."""
        if compact:
            return ["if pos < end and (n := buf[pos]) < 0x80:", "    pos += 1", "else:",
                    "    r.pos = pos", "    n = r.uvarint()", "    pos = r.pos", "n -= 1"]  # fmt: skip
        return [f"if pos + {width} > end: raise FB", f"(n,) = read_i{width * 8}(buf, pos)", f"pos += {width}"]

    @staticmethod
    def _or_null(nullable: bool, target: str, body: list[str]) -> list[str]:
        """body for a length n other than -1; n == -1 is None where allowed, else body's n < 0 test
        sends it to the reference."""
        if not nullable:
            return body
        return ["if n == -1:", f"    {target} = None", "else:", *_indent(body)]

    # -- writing --------------------------------------------------------------------------------
    def write(self, f: F, var: str) -> list[str] | None:
        compact, nullable = _shape(f, self.version, self.flexible)
        if not f.is_array:
            return self._write_one(f, compact, nullable, var)
        t = f.element_type
        if f.is_struct:
            each = [f"for x in {var}: {self._name(self.sub(f)[1])}(w, x)"]
        elif t in _STRUCT_CODES:
            each = [f"w.buf += pack(f'>{{n}}{_STRUCT_CODES[t]}', *{var})"]
        elif t == "string":
            one = self._write_one(f, compact, False, "x")
            assert one is not None
            each = [f"for x in {var}:", *_indent(one)]
        else:
            return None
        body = [f"n = len({var})", *self._write_length(compact, 4), *each]
        return self._or_write_null(nullable, compact, 4, var, body)

    def _write_one(self, f: F, compact: bool, nullable: bool, var: str) -> list[str] | None:
        t = f.element_type
        if f.is_struct:
            enc = self._name(self.sub(f)[1])
            if not nullable:
                return [f"{enc}(w, {var})"]
            return [f"if {var} is None: w.buf.append(255)", "else:", "    w.buf.append(1)", f"    {enc}(w, {var})"]
        if t == "uuid":
            return [f"w.buf += {var}.bytes"]
        if t == "string":
            body = [f"b = {var}.encode()", "n = len(b)", *self._write_length(compact, 2), "w.buf += b"]
            return self._or_write_null(nullable, compact, 2, var, body)
        if t in ("bytes", "records"):
            # the Writer's rule: buffers are copied into w.buf, anything else (a file slice) becomes a chunk
            body = [f"n = len({var})", *self._write_length(compact, 4),
                    f"if isinstance({var}, BUFFERS): w.buf += {var}", f"else: payload(w, {var})"]  # fmt: skip
            return self._or_write_null(nullable, compact, 4, var, body)
        return None

    @staticmethod
    def _write_length(compact: bool, width: int) -> list[str]:
        if compact:
            return ["if n < 127: w.buf.append(n + 1)", "else: w.buf += uvarint(n + 1)"]
        return [f"w.buf += put_i{width * 8}(n)"]

    @staticmethod
    def _or_write_null(nullable: bool, compact: bool, width: int, var: str, body: list[str]) -> list[str]:
        """body, behind a test for None where the field may be null (elsewhere body fails on None and
        the reference reports it)."""
        if not nullable:
            return body
        null = "w.buf.append(0)" if compact else f"w.buf += put_i{width * 8}(-1)"
        return [f"if {var} is None: {null}", "else:", *_indent(body)]


def _generate(
    cls: type[Struct],
    fields: tuple[F, ...],
    version: int,
    flexible: bool,
    steps: list[tuple[str, Decoder, Encoder, Any]],
    absent: list[tuple[str, Callable[[], Any]]],
    tagged: dict[int, tuple[str, Decoder, Encoder, Callable[[], Any]]],
    read_tagged: Callable[[Reader, Any], None],
    write_tagged: Callable[[Writer, Any], None],
    reference_decode: Decoder,
    reference_encode: Encoder,
    coerce: Callable[[Any], Any],
    sub: Callable[[F], tuple[Decoder, Encoder, int]],
) -> tuple[Decoder, Encoder]:
    by_name = {f.name: f for f in fields}
    ns: dict[str, Any] = {
        "new": object.__new__, "cls": cls, "read_tagged": read_tagged, "write_tagged": write_tagged,
        "ref_decode": reference_decode, "ref_encode": reference_encode, "rewind": _rewind, "coerce": coerce,
        "UNKNOWN_TAGS": UNKNOWN_TAGS, "MISSING": _MISSING, "getattr": getattr, "type": type, "isinstance": isinstance, "len": len,
        "list": list, "range": range, "str": str, "bytes": bytes, "FB": _Fallback,
        "uvarint": encode_uvarint, "UUID": uuid.UUID, "BUFFERS": (bytes, bytearray, memoryview),
        "payload": Writer._payload, "unpack_from": struct.unpack_from, "pack": struct.pack,
        "read_i16": struct.Struct(">h").unpack_from, "read_i32": struct.Struct(">i").unpack_from,
        "put_i16": struct.Struct(">h").pack, "put_i32": struct.Struct(">i").pack,
    }  # fmt: skip
    inline = _Inline(ns, version, flexible, sub)
    # Runs of fixed-width fields become one struct each: (format, [(field, index in steps)]); any
    # other field is a group of its own with format None.
    groups: list[tuple[str | None, list[tuple[str, int]]]] = []
    for i, (fname, _, _, _) in enumerate(steps):
        f = by_name[fname]
        code = None if f.is_array else _STRUCT_CODES.get(f.element_type)
        last = groups[-1][0] if groups else None
        if code is not None and last is not None:
            groups[-1] = (last + code, [*groups[-1][1], (fname, i)])
        elif code is not None:
            groups.append((">" + code, [(fname, i)]))
        else:
            groups.append((None, [(fname, i)]))

    dec = ["def decode(r):", "    pos = start = r.pos", "    try:", "        buf = r.buf", "        end = r.end",
           "        o = new(cls)"]  # fmt: skip
    for j, (fname, make) in enumerate(absent):
        f = by_name[fname]
        if f.is_array or f.is_struct:
            ns[f"M{j}"] = make
            dec.append(f"        o.{fname} = M{j}()")
        else:
            ns[f"K{j}"] = make()
            dec.append(f"        o.{fname} = K{j}")
    # Two encoder bodies: one reading an instance's attributes, one reading a dict the way the
    # handlers not yet typed build their answers (missing keys take defaults). A dict with a key the
    # declaration lacks, or any other value, is made an instance first (coerce raises naming the
    # field), outside the try, as the reference does.
    by_attr: list[str] = []
    by_key: list[str] = []
    for g, (fmt, members) in enumerate(groups):
        if fmt is None:
            ((fname, i),) = members
            read = inline.read(by_name[fname], f"o.{fname}")
            if read is None:
                ns[f"R{i}"] = steps[i][1]
                read = ["r.pos = pos", f"o.{fname} = R{i}(r)", "pos = r.pos"]
            dec += _indent(read, 8)
            write = inline.write(by_name[fname], "v")
            if write is None:
                ns[f"W{i}"] = steps[i][2]
                write = [f"W{i}(w, v)"]
            ns[f"D{i}"] = steps[i][3]
            by_attr += [f"v = value.{fname}", *write]
            by_key += [f"v = get({fname!r}, D{i})", *write]
            continue
        s = struct.Struct(fmt)
        ns[f"S{g}"], ns[f"P{g}"] = s.unpack_from, s.pack
        targets = ", ".join(f"o.{fname}" for fname, _ in members)
        unpack = f"{targets}{',' if len(members) == 1 else ''} = S{g}(buf, pos)"
        dec += _indent([f"if pos + {s.size} > end: raise FB", unpack, f"pos += {s.size}"], 8)
        for _, i in members:
            ns[f"D{i}"] = steps[i][3]
        by_attr.append(f"w.buf += P{g}({', '.join(f'value.{fname}' for fname, _ in members)})")
        by_key.append(f"w.buf += P{g}({', '.join(f'get({fname!r}, D{i})' for fname, i in members)})")
    if flexible:
        dec += ["        if pos < end and buf[pos] == 0:", "            r.pos = pos + 1", "        else:",
                "            r.pos = pos", "            read_tagged(r, o)"]  # fmt: skip
        attr_checks = ["getattr(value, UNKNOWN_TAGS, None)"]
        key_checks = []
        for tag, (fname, _, _, make) in tagged.items():
            ns[f"T{tag}"] = make()  # only compared with, never handed out
            attr_checks.append(f"value.{fname} != T{tag}")
            key_checks.append(f"((v := get({fname!r}, MISSING)) is not MISSING and v != T{tag})")
        for body, checks in ((by_attr, attr_checks), (by_key, key_checks)):
            if checks:
                body += [f"if {' or '.join(checks)}:", "    write_tagged(w, value)", "else:", "    w.buf.append(0)"]
            else:
                body.append("w.buf.append(0)")
    else:
        dec.append("        r.pos = pos")
    dec += ["        return o", "    except Exception:", "        r.pos = start", "        return ref_decode(r)"]
    ns["KNOWN"] = frozenset(by_name)
    enc = ["def encode(w, value):", "    n0 = len(w.buf)", "    c0 = len(w.chunks)",
           "    if type(value) is dict and value.keys() <= KNOWN:", "        get = value.get", "        try:",
           *_indent(by_key or ["pass"], 12), "        except Exception:", "            rewind(w, n0, c0)",
           "            ref_encode(w, value)", "        return",
           "    if type(value) is not cls:", "        value = coerce(value)", "    try:",
           *_indent(by_attr or ["pass"], 8), "    except Exception:", "        rewind(w, n0, c0)",
           "        ref_encode(w, value)"]  # fmt: skip
    source = "\n".join(dec) + "\n\n" + "\n".join(enc) + "\n"
    exec(compile(source, f"<kcompat.wire.codec {cls.__name__} v{version}>", "exec"), ns)
    return ns["decode"], ns["encode"]
