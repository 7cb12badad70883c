"""Large Fetch answers relayed as their bytes arrive (cut-through), never held whole.

A Fetch answer's size prefix comes first, so a rewrite that changed its length would need the
whole answer in hand. Its only node-naming field, KIP-951 NodeEndpoints (v16+), is a top-level
tagged field: it comes last, after every record set. So the answer is walked as it streams (the
4.3.1 schema, as skim.py walks a whole frame; record sets passed on by their length, unseen), every
byte before the top-level tagged section is sent on at once, and only that section (a few dozen
bytes) is held. It is rewritten to the very same length: the proxy streams only when every known
upstream endpoint's replacement is no longer than it (endpoints_fit), and a shorter one is padded
with unknown tagged fields, which Kafka's generated readers and librdkafka skip. A node first
seen in that answer whose replacement does not fit has its NodeEndpoints dropped (padded the same
way): the client then refreshes its metadata, as it does for NOT_LEADER_OR_FOLLOWER without them.

The bytes fed are the reader's pieces (relay_reader.py), never written again: they go to the
client's transport as they are, without a copy. Memory: a piece and what the client's transport
holds (proxy.buffer.bytes, then the upstream is not read), whatever the answer's size.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator, Sequence

from kcompat.proxy.node_fields import FETCH
from kcompat.proxy.node_map import NodeMap
from kcompat.proxy.rewrite import Endpoint, Learn, rewrite_nodes
from kcompat.proxy.skim import _ARRAY, _BYTES, _FIXED, _STRING, _STRUCT, Op, _plan
from kcompat.wire.errors import DecodeError
from kcompat.wire.primitives import Reader, encode_uvarint
from kcompat.wire.protocol import decode_response, encode_response, response_header_version

FLUSH = 128 << 10  # small pieces are gathered into writes of at least this
TAIL_MAX = 1 << 20  # a top-level tagged section larger than this is not an upstream's answer
PAD_TAG = 100  # the first tag of the padding: above every tag a 4.3.1 Fetch answer defines
_SIZE = struct.Struct(">i")
# A Fetch v16+ answer with no partitions: the head the held tail is decoded and encoded behind.
_EMPTY_HEAD = _SIZE.pack(0) + b"\x00" + _SIZE.pack(0) + b"\x00\x00" + _SIZE.pack(0) + b"\x01"

Walk = Generator[int, bytes | None, None]  # yields n > 0: send n bytes; n < 0: -n bytes pass unseen
Write = Callable[[Sequence[bytes | bytearray | memoryview]], None]  # a transport's writelines


def streams(api_key: int, api_version: int) -> bool:
    """Answers relayed by the stream: Fetch, whose node fields are top-level tagged ones."""
    return api_key == FETCH


def open_stream(
    api_key: int,
    api_version: int,
    correlation_id: int,
    size: int,
    write: Write,
    nodes: NodeMap,
) -> AnswerStream | None:
    """A stream for an answer when its API streams and every known node's endpoint fits."""
    if not streams(api_key, api_version):
        return None
    if _plan(api_key, api_version)[1] and not endpoints_fit(
        {i: nodes.address(i) or ("", 0) for i in nodes.node_ids()}, nodes.endpoint
    ):
        return None
    return AnswerStream(api_key, api_version, correlation_id, size, write, nodes.endpoint, nodes.learn)


def _uvarint() -> Generator[int, bytes | None, int]:
    result = shift = 0
    while True:
        b = (yield 1)[0]  # type: ignore[index]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result
        shift += 7
        if shift > 28:
            raise DecodeError("varint longer than 5 bytes")


def _int(n: int) -> Generator[int, bytes | None, int]:
    return int.from_bytes((yield n) or b"", "big", signed=True)


def _walk_op(op: Op) -> Generator[int, bytes | None, None]:
    kind, size, compact, nullable, nested = op
    if kind == _FIXED:
        if size >= 0:
            yield -size
            return
        for _ in range((yield from _uvarint())):  # a tagged section
            yield from _uvarint()
            if n := (yield from _uvarint()):
                yield -n
    elif kind in (_STRING, _BYTES):
        if compact:
            n = (yield from _uvarint()) - 1
        else:
            n = yield from _int(2 if kind == _STRING else 4)
        if n > 0:
            yield -n
    elif kind == _STRUCT:
        if nullable and (yield from _int(1)) < 0:
            return
        for sub in nested:
            yield from _walk_op(sub)
    elif kind == _ARRAY:
        count = (yield from _uvarint()) - 1 if compact else (yield from _int(4))
        for _ in range(max(count, 0)):
            yield from _walk_op(nested[0])


def walk(api_key: int, api_version: int) -> Walk:
    """The answer's bytes up to its top-level tagged section (after the correlation id)."""
    ops, _, _ = _plan(api_key, api_version)
    if response_header_version(api_key, api_version) == 1:
        yield from _walk_op((_FIXED, -1, False, False, ()))
    for op, _nodes in ops:
        yield from _walk_op(op)


class AnswerStream:
    """One answer frame of `size` bytes passed on to `write` as it arrives; `feed` it the bytes
    (kept as they are until written: their memory must not be written again), `done` once all
    are in."""

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        size: int,
        write: Write,
        endpoint: Endpoint,
        learn: Learn,
    ) -> None:
        self.api_key, self.api_version = api_key, api_version
        self.correlation_id = correlation_id
        self.size = size
        self._write = write
        self._out: list[bytes | bytearray | memoryview] = []  # to send, once FLUSH bytes or the last
        self._pending = 0  # the bytes in _out
        self._endpoint, self._learn = endpoint, learn
        self._walk: Walk | None = walk(api_key, api_version)
        self._want = 4  # the correlation id first: checked before the size prefix goes out
        self._part = bytearray()  # a structural read split across feeds
        self._tail: bytearray | None = None  # the top-level tagged section, held
        self._got = 0
        self._started = False  # the size prefix is out
        self.dropped = False  # NodeEndpoints did not fit and were dropped
        self.finished: Callable[[], None] = lambda: None  # called once the last byte went out

    def feed(self, data: memoryview) -> None:
        """DecodeError: the answer does not follow its schema, or names another correlation id."""
        start = 0 if self._started else -1  # -1: the prefix goes out with the correlation id
        pos, end = 0, len(data)
        self._got += end
        while pos < end and self._tail is None:
            want = self._want
            if want < 0:
                step = min(-want, end - pos)
                pos += step
                self._want += step
                if self._want:
                    continue
                reply: bytes | None = None
            else:
                step = min(want - len(self._part), end - pos)
                self._part += data[pos : pos + step]
                pos += step
                if len(self._part) < want:
                    continue
                reply, self._part = bytes(self._part), bytearray()
            if start < 0:  # the correlation id, complete
                if _SIZE.unpack(reply or b"")[0] != self.correlation_id:
                    raise DecodeError("an answer to another correlation id")
                self._put(_SIZE.pack(self.size) + (reply or b""))
                self._started = True
                start = pos
                self._want = self._next(None)
                continue
            self._want = self._next(reply)
        if start < 0:
            return  # the correlation id is not all in yet
        if self._tail is not None:
            if pos > start:
                self._put(data[start:pos])
            self._tail += data[pos:]
            if len(self._tail) > TAIL_MAX:
                raise DecodeError("a top-level tagged section over 1 MiB")
        elif end > start:
            self._put(data[start:end] if start else data)
        if self._pending >= FLUSH:
            self._send()

    def _put(self, chunk: bytes | memoryview) -> None:
        self._out.append(chunk)
        self._pending += len(chunk)

    def _send(self) -> None:
        self._write(self._out)
        self._out, self._pending = [], 0

    def _next(self, reply: bytes | None) -> int:
        assert self._walk is not None
        try:
            return self._walk.send(reply)
        except StopIteration:
            self._walk = None
            self._tail = bytearray()
            return 0

    def done(self) -> None:
        """The last byte is in: the tagged section goes out, rewritten to its length."""
        if self._got != self.size or self._tail is None:
            raise DecodeError("an answer that ends inside its body")
        if self._tail and _plan(self.api_key, self.api_version)[1]:  # NodeEndpoints may be in it
            tail = bytes(self._tail)
            new = rewrite_tail(self.api_version, tail, self._endpoint, self._learn)
            fitted = fit(tail, new)
            if fitted is None:
                self.dropped = True
                fitted = fit(tail, without_nodes(tail))  # frees at least three bytes: fits
                if fitted is None:
                    raise DecodeError("a top-level tagged section that cannot be rewritten in place")
            self._put(fitted)
        elif self._tail:
            self._put(bytes(self._tail))
        self._send()
        self.finished()


def rewrite_tail(api_version: int, tail: bytes, endpoint: Endpoint, learn: Learn) -> bytes:
    """A Fetch answer's top-level tagged section with its NodeEndpoints rewritten (any length)."""
    _, body = decode_response(FETCH, api_version, _EMPTY_HEAD + tail)
    rewrite_nodes(FETCH, body, endpoint, learn)
    chunks = encode_response(FETCH, api_version, 0, body)  # no record sets: bytes only
    encoded = b"".join(c for c in chunks if isinstance(c, (bytes, bytearray, memoryview)))
    return encoded[4 + len(_EMPTY_HEAD) :]


def _fields(tail: bytes) -> list[tuple[int, bytes]]:
    return [(tag, bytes(data)) for tag, data in Reader(tail).tagged_fields()]


def _section(fields: list[tuple[int, bytes]]) -> bytes:
    out = bytearray(encode_uvarint(len(fields)))
    for tag, data in fields:
        out += encode_uvarint(tag) + encode_uvarint(len(data)) + data
    return bytes(out)


def padding(spare: int) -> list[tuple[int, bytes]] | None:
    """Unknown tagged fields (tag, data) taking `spare` bytes; None for 1 (no field is that small)
    or a negative count."""
    if spare == 1 or spare < 0:
        return None
    out: list[tuple[int, bytes]] = []
    while spare:
        take = spare if spare <= 129 else (129 if spare - 129 != 1 else 127)
        out.append((PAD_TAG + len(out), bytes(take - 2)))  # a one-byte tag and a one-byte size
        spare -= take
    return out


def fit(old: bytes, new: bytes) -> bytes | None:
    """`new` (a tagged section) padded to the length of `old`; None when longer or one byte short."""
    if len(new) == len(old):
        return new
    fields = _fields(new)
    pads = padding(len(old) - len(_section(fields)))
    if pads is None or len(fields) + len(pads) > 127:
        return None
    out = _section(fields + pads)
    return out if len(out) == len(old) else None


def without_nodes(tail: bytes) -> bytes:
    """The section without its NodeEndpoints (tag 0 of Fetch v16+)."""
    return _section([(tag, data) for tag, data in _fields(tail) if tag != 0])


def _string_size(s: str) -> int:
    n = len(s.encode())
    return len(encode_uvarint(n + 1)) + n


def endpoints_fit(addresses: dict[int, tuple[str, int]], endpoint: Endpoint) -> bool:
    """Whether every known upstream node's endpoint can be replaced in the same bytes: the same
    size, or at least two bytes shorter (room for a padding field)."""
    for node_id, (host, _) in addresses.items():
        spare = _string_size(host) - _string_size(endpoint(node_id)[0])
        if spare < 0 or spare == 1:
            return False
    return True
