"""The embedded "consumer" protocol: what Java-style clients put in JoinGroup metadata and SyncGroup assignments.

The broker treats these bytes as opaque, except where Kafka itself reads them: to know which topics
a classic group is subscribed to (OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC, offset expiry).

    Subscription  version int16, topics ARRAY(int32 count) of STRING, user_data nullable BYTES,
                  v1+: owned_partitions ARRAY of (topic STRING, partitions ARRAY of int32),
                  v2+: generation_id int32, v3+: rack_id nullable STRING
    Assignment    version int16, assigned_partitions ARRAY of (topic STRING, partitions ARRAY of int32),
                  user_data nullable BYTES

Only the leading fields are read, so newer versions with extra trailing fields still decode, as
Kafka's ConsumerProtocol does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kcompat.wire.errors import DecodeError
from kcompat.wire.primitives import Reader, Writer

PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics a consumer-protocol subscription names, or None when the bytes do not parse."""
    try:
        r = Reader(metadata)
        if r.int16() < 0:
            return None
        topics = []
        for _ in range(max(r.array_length(2), 0)):
            t = r.string()
            if t is None:
                return None
            topics.append(t)
        return frozenset(topics)
    except DecodeError:
        return None


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None) -> bytes:
    """A version-0 subscription (what the tests and DescribeGroups of consumer groups need)."""
    w = Writer()
    w.int16(0)
    names = sorted(topics)
    w.array_length(len(names))
    for t in names:
        w.string(t)
    w.bytes_(user_data)
    return w.getvalue()


def encode_assignment(partitions: Mapping[str, Iterable[int]], user_data: bytes | None = None) -> bytes:
    """A version-0 assignment."""
    w = Writer()
    w.int16(0)
    topics = sorted(partitions.items())
    w.array_length(len(topics))
    for t, ps in topics:
        w.string(t)
        plist = sorted(ps)
        w.array_length(len(plist))
        for p in plist:
            w.int32(p)
    w.bytes_(user_data)
    return w.getvalue()


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """The partitions of an assignment; empty bytes (Kafka's "no assignment") decode to {}."""
    if not data:
        return {}
    r = Reader(data)
    r.int16()
    out: dict[str, list[int]] = {}
    for _ in range(max(r.array_length(6), 0)):
        t = r.string()
        if t is None:
            raise DecodeError("null topic", "assigned_partitions.topic")
        out[t] = [r.int32() for _ in range(max(r.array_length(4), 0))]
    return out
