"""The common Produce, decoded and answered without the generic codec: the hot path of a broker
that takes many small requests (issue 31).

    common request  = Produce v3-v12: topics by name, no tagged fields, no null records, one-byte
                      compact lengths and counts (v9+), nothing after the body
    common answer   = one topic, one partition, error NONE, no record errors or leader hint

`decode_produce` reads such a frame with a few struct reads into the typed classes the codec
makes (each partition's records a memoryview of the frame, never copied); `encode_produce_answer`
packs such an answer with one struct per (version, topic), made once. Each answers None for any
other shape, and the caller takes the generic codec, which stays the reference:
tests/wire/test_produce_path.py gives both the same frames and answers and compares the results.
"""

from __future__ import annotations

import struct

from kcompat.wire.protocol import Chunk, Request
from kcompat.wire.types.headers import RequestHeader
from kcompat.wire.types.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData

PRODUCE_KEY = 0
FIRST, LAST = 3, 12  # v13 names topics by id: the generic codec's
FLEXIBLE = 9
LOG_START = 5  # the answer's log_start_offset
RECORD_ERRORS = 8  # the answer's record_errors and error_message

_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_INDEX_SIZE = struct.Struct(">ii")  # partition index, records size (v3-v8)
_new = object.__new__
_ZERO_ID = TopicProduceData().topic_id


class _Uncommon(Exception):
    """Not the common shape (or not valid at all): the generic codec decodes it, or says why not."""


def decode_produce(frame: memoryview) -> Request[ProduceRequest] | None:
    """The frame's request when it is a Produce of the common shape; else None."""
    if len(frame) < 10 or frame[1] != PRODUCE_KEY or frame[0] != 0:
        return None
    key, version, correlation, n = _HEADER.unpack_from(frame, 0)
    if not FIRST <= version <= LAST:
        return None
    try:
        client, pos = _string(frame, 10, n)
        body = _flexible(frame, pos) if version >= FLEXIBLE else _classic(frame, pos)
    except (_Uncommon, struct.error, UnicodeDecodeError, IndexError):
        return None
    h = _new(RequestHeader)
    h.request_api_key, h.request_api_version, h.correlation_id, h.client_id = (
        key,
        version,
        correlation,
        client,
    )
    h._unknown_tags = None
    return Request(key, version, correlation, client, h, body)


def _string(frame: memoryview, pos: int, n: int) -> tuple[str | None, int]:
    """A string of `n` bytes at `pos` (None for -1) and the position after it."""
    if n == -1:
        return None, pos
    if n < 0 or pos + n > len(frame):
        raise _Uncommon
    return str(frame[pos : pos + n], "utf-8"), pos + n


def _short(frame: memoryview, pos: int) -> int:
    """A compact length or count (stored + 1) of one varint byte; a longer one is not common."""
    n = frame[pos]
    if n >= 0x80:
        raise _Uncommon
    return n - 1


def _body(txn: str | None, acks: int, timeout: int, topics: list[TopicProduceData]) -> ProduceRequest:
    b = _new(ProduceRequest)
    b.transactional_id, b.acks, b.timeout_ms, b.topic_data, b._unknown_tags = txn, acks, timeout, topics, None
    return b


def _topic(name: str, parts: list[PartitionProduceData]) -> TopicProduceData:
    t = _new(TopicProduceData)
    t.name, t.topic_id, t.partition_data, t._unknown_tags = name, _ZERO_ID, parts, None
    return t


def _partition(index: int, records: memoryview) -> PartitionProduceData:
    p = _new(PartitionProduceData)
    p.index, p.records, p._unknown_tags = index, records, None
    return p


def _classic(frame: memoryview, pos: int) -> ProduceRequest:
    end = len(frame)
    txn, pos = _string(frame, pos + 2, _I16.unpack_from(frame, pos)[0])
    acks, timeout = _ACKS_TIMEOUT.unpack_from(frame, pos)
    (count,) = _I32.unpack_from(frame, pos + 6)
    pos += 10
    if not 0 <= count <= end - pos:
        raise _Uncommon
    topics = []
    for _ in range(count):
        (n,) = _I16.unpack_from(frame, pos)
        name, pos = _string(frame, pos + 2, n)
        (pcount,) = _I32.unpack_from(frame, pos)
        pos += 4
        if name is None or not 0 <= pcount <= end - pos:
            raise _Uncommon
        parts = []
        for _ in range(pcount):
            index, size = _INDEX_SIZE.unpack_from(frame, pos)
            pos += 8
            if size < 0 or pos + size > end:
                raise _Uncommon
            parts.append(_partition(index, frame[pos : pos + size]))
            pos += size
        topics.append(_topic(name, parts))
    if pos != end:
        raise _Uncommon
    return _body(txn, acks, timeout, topics)


def _flexible(frame: memoryview, pos: int) -> ProduceRequest:
    end = len(frame)
    if frame[pos] != 0:  # the header's tagged fields
        raise _Uncommon
    txn, pos = _string(frame, pos + 2, _short(frame, pos + 1))
    acks, timeout = _ACKS_TIMEOUT.unpack_from(frame, pos)
    count = _short(frame, pos + 6)
    pos += 7
    topics = []
    for _ in range(count):
        name, pos = _string(frame, pos + 1, _short(frame, pos))
        pcount = _short(frame, pos)
        pos += 1
        if name is None or pcount < 0:
            raise _Uncommon
        parts = []
        for _ in range(pcount):
            (index,) = _I32.unpack_from(frame, pos)
            size, pos = _uvarint(frame, pos + 4)
            size -= 1
            if size < 0 or pos + size >= end or frame[pos + size] != 0:  # the partition's tags
                raise _Uncommon
            parts.append(_partition(index, frame[pos : pos + size]))
            pos += size + 1
        if frame[pos] != 0:  # the topic's tags
            raise _Uncommon
        pos += 1
        topics.append(_topic(name, parts))
    if count < 0 or pos + 1 != end or frame[pos] != 0:  # the body's tags, and nothing after them
        raise _Uncommon
    return _body(txn, acks, timeout, topics)


def _uvarint(frame: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 4 bytes (a records size) at `pos`: (value, position after it)."""
    value = shift = 0
    for i in range(pos, pos + 4):
        b = frame[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i + 1
        shift += 7
    raise _Uncommon


# -- the answer -----------------------------------------------------------------------------------

# (version, topic) -> (its struct, the frame's size, the constant bytes before the partition, after
# it and at the end); None: a topic name too long for one-byte compact lengths.
_Template = tuple[struct.Struct, int, bytes, bytes, bytes]
_templates: dict[tuple[int, str], _Template | None] = {}
_MAX_TEMPLATES = 4096  # topics answered; past that the cache starts again


def encode_produce_answer(version: int, correlation_id: int, body: object) -> list[Chunk] | None:
    """The whole answer frame (size prefix included) when `body` is the common answer; else None."""
    if type(body) is not ProduceResponse or len(body.responses) != 1 or body.node_endpoints:
        return None
    topic = body.responses[0]
    if len(topic.partition_responses) != 1 or topic._unknown_tags or body._unknown_tags:
        return None
    p = topic.partition_responses[0]
    if p.error_code or p.record_errors or p.error_message is not None or p._unknown_tags:
        return None
    leader = p.current_leader
    if leader.leader_id != -1 or leader.leader_epoch != -1 or leader._unknown_tags:
        return None
    key = (version, topic.name)
    t = _templates.get(key)
    if t is None:
        if key in _templates or not FIRST <= version <= LAST:
            return None
        if len(_templates) >= _MAX_TEMPLATES:
            _templates.clear()
        t = _templates[key] = _template(version, topic.name)
        if t is None:
            return None
    s, size, head, mid, tail = t
    index, base, append_time, throttle = p.index, p.base_offset, p.log_append_time_ms, body.throttle_time_ms
    if version >= LOG_START:
        data = s.pack(
            size, correlation_id, head, index, 0, base, append_time, p.log_start_offset, mid, throttle, tail
        )
    else:
        data = s.pack(size, correlation_id, head, index, 0, base, append_time, mid, throttle, tail)
    return [data]


def _template(version: int, name: str) -> _Template | None:
    raw = name.encode()
    if version >= FLEXIBLE:
        if len(raw) + 1 >= 0x80:
            return None
        # header tags, 1 topic (compact: 2), the name, 1 partition
        head = b"\x00\x02" + bytes([len(raw) + 1]) + raw + b"\x02"
        mid = b"\x01\x00\x00\x00"  # no record errors, null error message, partition and topic tags
        tail = b"\x00"  # the body's tags
    else:
        head = _I32.pack(1) + _I16.pack(len(raw)) + raw + _I32.pack(1)
        mid = _I32.pack(0) + _I16.pack(-1) if version >= RECORD_ERRORS else b""
        tail = b""
    offsets = "qqq" if version >= LOG_START else "qq"  # base offset, append time[, log start]
    s = struct.Struct(f">ii{len(head)}sih{offsets}{len(mid)}si{len(tail)}s")
    return s, s.size - 4, head, mid, tail
