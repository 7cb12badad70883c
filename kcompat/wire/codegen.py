"""Generated decoders and encoders: Python source per (struct, version), exec'd once, for speed.

codec.py builds the reference closures and asks generate() for the fast pair (see the comment below).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from kcompat.wire.primitives import Reader, Writer, encode_uvarint
from kcompat.wire.schema import F
from kcompat.wire.structs import FIXED_SIZE as _FIXED_SIZE
from kcompat.wire.structs import Decoder, Encoded, Encoder, Struct, splice
from kcompat.wire.structs import field_shape as _shape

# -- generated coders ---------------------------------------------------------------------------
#
# The closures of codec.py are the reference. For speed, each (struct, version) also gets a decoder and
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

_STRUCT_CODES = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "?",
}


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
    """Source lines that read or write one field inline, for generate.

    Reading lines use the decoder's locals buf, end, pos (kept current) and r (synced around calls
    to other decoders); writing lines take the value from a local and append to w.buf. Both may use
    n, e, b and x as scratch. None means "not handled here": the caller uses the reference closure.
    """

    def __init__(
        self,
        ns: dict[str, Any],
        version: int,
        flexible: bool,
        sub: Callable[[F], tuple[Decoder, Encoder, int]],
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
            elements = [
                f"{target} = list(unpack_from(f'>{{n}}{_STRUCT_CODES[t]}', buf, pos))",
                f"pos += n * {size}",
            ]
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
            return [
                "if pos >= end: raise FB",
                "if buf[pos] > 127:",
                f"    {target} = None",
                "    pos += 1",
                "else:",
                "    r.pos = pos + 1",
                f"    {target} = {dec}(r)",
                "    pos = r.pos",
            ]
        if t == "uuid":
            return [
                "if pos + 16 > end: raise FB",
                f"{target} = UUID(bytes=bytes(buf[pos:pos + 16]))",
                "pos += 16",
            ]
        value = {
            "string": "str(buf[pos:e], 'utf-8')",
            "bytes": "bytes(buf[pos:e])",
            "records": "buf[pos:e]",
        }.get(t)
        if value is None:
            return None  # fixed widths: read in runs by generate
        body = ["e = pos + n", "if n < 0 or e > end: raise FB", f"{target} = {value}", "pos = e"]
        return self._read_length(compact, 2 if t == "string" else 4) + self._or_null(nullable, target, body)

    @staticmethod
    def _read_length(compact: bool, width: int) -> list[str]:
        """Lines leaving a length or count in n (-1 for null, as the reference reads it)."""
        if compact:
            return [
                "if pos < end and (n := buf[pos]) < 0x80:",
                "    pos += 1",
                "else:",
                "    r.pos = pos",
                "    n = r.uvarint()",
                "    pos = r.pos",
                "n -= 1",
            ]
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
            return [
                f"if {var} is None: w.buf.append(255)",
                "else:",
                "    w.buf.append(1)",
                f"    {enc}(w, {var})",
            ]
        if t == "uuid":
            return [f"w.buf += {var}.bytes"]
        if t == "string":
            body = [f"b = {var}.encode()", "n = len(b)", *self._write_length(compact, 2), "w.buf += b"]
            return self._or_write_null(nullable, compact, 2, var, body)
        if t in ("bytes", "records"):
            # the Writer's rule: buffers are copied into w.buf, anything else (a file slice) becomes a chunk
            body = [
                f"n = len({var})",
                *self._write_length(compact, 4),
                f"if isinstance({var}, BUFFERS): w.buf += {var}",
                f"else: payload(w, {var})",
            ]
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


def _tagged_checks(
    ns: dict[str, Any], tagged: dict[int, tuple[str, Decoder, Encoder, Callable[[], Any]]]
) -> list[str]:
    """The tests of whether a struct has tagged fields to write (unknown tags, or a field that
    differs from its default): none, and one byte is written."""
    attr_checks = ["value._unknown_tags"]
    for tag, (fname, _, _, make) in tagged.items():
        ns[f"T{tag}"] = default = make()  # only compared with, never handed out
        if isinstance(default, Struct):
            # A struct compared by its fields' values in C (Struct.__eq__ is a Python call, and
            # this test runs on every answer): its own class only; anything else is checked
            # the reference's way, by write_tagged.
            ns[f"TC{tag}"], ns[f"TK{tag}"], ns[f"TV{tag}"] = (
                type(default),
                default._key,
                default._key(default),
            )
            attr_checks.append(f"(type(v := value.{fname}) is not TC{tag} or TK{tag}(v) != TV{tag})")
        else:
            attr_checks.append(f"value.{fname} != T{tag}")
    return attr_checks


def generate(
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
        "new": object.__new__,
        "cls": cls,
        "read_tagged": read_tagged,
        "write_tagged": write_tagged,
        "ref_decode": reference_decode,
        "ref_encode": reference_encode,
        "rewind": _rewind,
        "coerce": coerce,
        "Encoded": Encoded,
        "splice": splice,
        "getattr": getattr,
        "type": type,
        "isinstance": isinstance,
        "len": len,
        "list": list,
        "range": range,
        "str": str,
        "bytes": bytes,
        "FB": _Fallback,
        "uvarint": encode_uvarint,
        "UUID": uuid.UUID,
        "BUFFERS": (bytes, bytearray, memoryview),
        "payload": Writer._payload,
        "unpack_from": struct.unpack_from,
        "pack": struct.pack,
        "read_i16": struct.Struct(">h").unpack_from,
        "read_i32": struct.Struct(">i").unpack_from,
        "put_i16": struct.Struct(">h").pack,
        "put_i32": struct.Struct(">i").pack,
    }
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

    dec = [
        "def decode(r):",
        "    pos = start = r.pos",
        "    try:",
        "        buf = r.buf",
        "        end = r.end",
        "        o = new(cls)",
        "        o._unknown_tags = None",
    ]
    for j, (fname, make) in enumerate(absent):
        f = by_name[fname]
        if f.is_array or f.is_struct:
            ns[f"M{j}"] = make
            dec.append(f"        o.{fname} = M{j}()")
        else:
            ns[f"K{j}"] = make()
            dec.append(f"        o.{fname} = K{j}")
    # The encoder reads an instance's attributes; any other value is refused (coerce raises),
    # outside the try, as the reference does.
    by_attr: list[str] = []
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
            by_attr += [f"v = value.{fname}", *write]
            continue
        s = struct.Struct(fmt)
        ns[f"S{g}"], ns[f"P{g}"] = s.unpack_from, s.pack
        targets = ", ".join(f"o.{fname}" for fname, _ in members)
        unpack = f"{targets}{',' if len(members) == 1 else ''} = S{g}(buf, pos)"
        dec += _indent([f"if pos + {s.size} > end: raise FB", unpack, f"pos += {s.size}"], 8)
        by_attr.append(f"w.buf += P{g}({', '.join(f'value.{fname}' for fname, _ in members)})")
    if flexible:
        dec += [
            "        if pos < end and buf[pos] == 0:",
            "            r.pos = pos + 1",
            "        else:",
            "            r.pos = pos",
            "            read_tagged(r, o)",
        ]
        by_attr += [
            f"if {' or '.join(_tagged_checks(ns, tagged))}:",
            "    write_tagged(w, value)",
            "else:",
            "    w.buf.append(0)",
        ]
    else:
        dec.append("        r.pos = pos")
    dec += [
        "        return o",
        "    except Exception:",
        "        r.pos = start",
        "        return ref_decode(r)",
    ]
    enc = [
        "def encode(w, value):",
        "    n0 = len(w.buf)",
        "    c0 = len(w.chunks)",
        "    if type(value) is not cls:",
        "        if type(value) is Encoded:",
        f"            splice(w, value, cls, {version})",
        "            return",
        "        value = coerce(value)",
        "    try:",
        *_indent(by_attr or ["pass"], 8),
        "    except Exception:",
        "        rewind(w, n0, c0)",
        "        ref_encode(w, value)",
    ]
    source = "\n".join(dec) + "\n\n" + "\n".join(enc) + "\n"
    exec(compile(source, f"<kcompat.wire.codec {cls.__name__} v{version}>", "exec"), ns)
    return ns["decode"], ns["encode"]
