"""Whether a data-path answer names a node, found by walking its bytes, never by decoding it.

Produce v10+ and Fetch v16+ carry KIP-951 NodeEndpoints as a top-level tagged field (present only
when a partition's leader moved), ShareFetch and ShareAcknowledge as a top-level array (mostly
empty). Decoding such an answer whole to learn that it names no node, and encoding it again,
cost the proxy more than its sockets did on catch-up consume: the record bytes were copied twice
and every partition built as objects. Here the answer's structure is walked by the 4.3.1 schema,
every string, byte array and record set skipped by its length, and the answer is rewritten only
when a node-bearing top-level field is there and not empty; otherwise the frame leaves as it came.

    if not names_nodes(key, version, frame):   # the common case: relay the frame untouched
        ...
"""

from __future__ import annotations

from functools import cache

from kcompat.proxy.node_fields import FETCH, NODE_FIELDS, PRODUCE, SHARE_ACKNOWLEDGE, SHARE_FETCH
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import APIS
from kcompat.wire.primitives import Reader
from kcompat.wire.protocol import response_header_version
from kcompat.wire.schema import F
from kcompat.wire.structs import FIXED_SIZE, field_shape

# An op: (kind, fixed size, compact, nullable, nested ops). Kinds below.
_FIXED, _STRING, _BYTES, _STRUCT, _ARRAY = range(5)
Op = tuple[int, int, bool, bool, tuple["Op", ...]]
Plan = tuple[tuple[Op, ...], bool]  # the in-order fields' ops, and whether a tagged section follows


def skimmed(api_key: int) -> bool:
    """Answers of this API whose node fields are all top-level ones: the skim can tell."""
    entries = [e for e in NODE_FIELDS if e.api_key == api_key]
    return bool(entries) and all(len(e.path) == 1 and not e.id_in_parent for e in entries)


# The data path: answers that seldom name a node (Metadata, FindCoordinator, ... always do).
SKIMMED = frozenset({PRODUCE, FETCH, SHARE_FETCH, SHARE_ACKNOWLEDGE})


def _element_op(f: F, version: int, compact: bool, nullable: bool) -> Op:
    t = f.element_type
    if f.is_struct:
        return (_STRUCT, 0, compact, nullable, _ops(f.fields, version, compact))
    if t in FIXED_SIZE:
        return (_FIXED, FIXED_SIZE[t], compact, nullable, ())
    if t == "string":
        return (_STRING, 0, compact, nullable, ())
    return (_BYTES, 0, compact, nullable, ())  # bytes and records: skipped by their length


def _op(f: F, version: int, flexible: bool) -> Op:
    compact, nullable = field_shape(f, version, flexible)
    if f.is_array:
        return (_ARRAY, 0, compact, nullable, (_element_op(f, version, compact, False),))
    return _element_op(f, version, compact, nullable)


def _in_order(fields: tuple[F, ...], version: int, flexible: bool) -> list[F]:
    return [
        f
        for f in fields
        if version in f.versions and not (flexible and f.tag is not None and version in f.tagged)
    ]


def _ops(fields: tuple[F, ...], version: int, flexible: bool) -> tuple[Op, ...]:
    """A struct's ops; its tagged section (flexible) is skipped after them, as the last op."""
    ops = tuple(_op(f, version, flexible) for f in _in_order(fields, version, flexible))
    return (*ops, (_FIXED, -1, False, False, ())) if flexible else ops  # -1: the tagged section


def _skip(r: Reader, op: Op) -> None:
    kind, size, compact, nullable, nested = op
    if kind == _FIXED:
        if size < 0:
            for _ in range(r.uvarint()):
                r.uvarint()
                r.raw(r.uvarint())
        else:
            r.raw(size)
    elif kind == _STRING:
        n = r.uvarint() - 1 if compact else r.int16()
        if n > 0:
            r.raw(n)
    elif kind == _BYTES:
        n = r.uvarint() - 1 if compact else r.int32()
        if n > 0:
            r.raw(n)
    elif kind == _STRUCT:
        if nullable and r.int8() < 0:
            return
        for sub in nested:
            _skip(r, sub)
    else:
        n = r.compact_array_length() if compact else r.array_length()
        element = nested[0]
        for _ in range(n):
            _skip(r, element)


@cache
def _plan(api_key: int, version: int) -> tuple[tuple[tuple[Op, bool], ...], frozenset[int], bool]:
    """The top-level fields' (op, whether it names nodes), the node-bearing tags, flexible."""
    spec = APIS[api_key]
    flexible = version in spec.flexible
    names = {e.path[0] for e in NODE_FIELDS if e.api_key == api_key}
    fields = _in_order(spec.response.fields, version, flexible)
    tags = frozenset(
        f.tag
        for f in spec.response.fields
        if f.name in names
        and f.tag is not None
        and version in f.versions
        and version in f.tagged
        and flexible
    )
    return tuple((_op(f, version, flexible), f.name in names) for f in fields), tags, flexible


def names_nodes(api_key: int, api_version: int, frame: bytes | bytearray | memoryview) -> bool:
    """Whether the answer frame (no size prefix) of an API in SKIMMED holds a node-bearing field
    that is not empty. DecodeError when the frame does not hold a whole answer."""
    ops, tags, flexible = _plan(api_key, api_version)
    r = Reader(frame, 4)  # past the correlation id
    if response_header_version(api_key, api_version) == 1:
        r.tagged_fields()
    found = False
    for op, nodes in ops:
        if nodes and op[0] == _ARRAY:
            start = r.pos
            n = r.compact_array_length() if op[2] else r.array_length()
            found = found or n > 0
            r.pos = start
        _skip(r, op)
    if flexible:
        for tag, data in r.tagged_fields():
            # present, it names nodes unless its compact length says null (0) or no entries (1)
            found = found or (tag in tags and bytes(data[:1]) not in (b"\x00", b"\x01"))
    if r.remaining():
        raise DecodeError(f"{r.remaining()} unexpected bytes after the body", APIS[api_key].response.name)
    return found
