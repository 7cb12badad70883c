"""The records in a Produce request (with the offsets its answer gave them) and in a Fetch answer.

What a client produced: each partition's batch of the request, its records placed at the base
offset the answer gave the partition (None: acks=0, or the partition failed: nothing written, so
nothing listed). What a consumer got: the records of each partition's batches at or after the
offset it asked for (a batch may start before it), control batches left out, as its client
library would hand them over. Replica fetches (a follower's) are not consumption and not listed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

from kcompat.capture.bodies import record_json, records_bytes
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, split_batches
from kcompat.wire.records import decode_batch

TopicName = Callable[[uuid.UUID], str | None]
PRODUCE, FETCH = 0, 1
# One captured record: the fields of record_json plus where it went and who sent or got it.
Captured = dict[str, Any]


def _topic(entry: Any, topic_name: TopicName | None, key: str = "name") -> str | None:
    name = getattr(entry, key, None) or None
    if name is None and topic_name is not None:
        tid = getattr(entry, "topic_id", None)
        if isinstance(tid, uuid.UUID):
            name = topic_name(tid)
    return name


def produced(request: Any, response: Any, topic_name: TopicName | None) -> Iterator[Captured]:
    bases: dict[tuple[str | None, int], int] = {}
    if response is not None:
        for t in response.responses:
            name = _topic(t, topic_name)
            for p in t.partition_responses:
                if p.error_code == 0:
                    bases[(name, p.index)] = p.base_offset
    for t in request.topic_data:
        name = _topic(t, topic_name)
        for p in t.partition_data:
            if p.records is None:
                continue
            if response is not None and (name, p.index) not in bases:
                continue  # refused: nothing was written
            base = bases.get((name, p.index))
            for item in _records(records_bytes(p.records), name, p.index, base, -1):
                if base is None:
                    item["offset"] = None  # acks=0: the client never learns where they went
                yield item


def consumed(
    request: Any, response: Any, topic_name: TopicName | None, last: dict[tuple[str | None, int], int]
) -> Iterator[Captured]:
    """`last`: per (topic, partition) the offset after the last record listed for this client,
    for partitions a fetch session leaves out of the request (updated here)."""
    replica = getattr(getattr(request, "replica_state", None), "replica_id", -1)
    if getattr(request, "replica_id", -1) >= 0 or (replica is not None and replica >= 0):
        return
    asked: dict[tuple[str | None, int], int] = {}
    for t in request.topics:
        name = _topic(t, topic_name, "topic")
        for p in t.partitions:
            asked[(name, p.partition)] = p.fetch_offset
    for t in response.responses:
        name = _topic(t, topic_name, "topic")
        for p in t.partitions:
            if p.error_code != 0 or p.records is None:
                continue
            key = (name, p.partition_index)
            start = asked.get(key, last.get(key, -1))
            for item in _records(records_bytes(p.records), name, p.partition_index, None, start):
                last[key] = item["offset"] + 1
                yield item


def _records(
    data: bytes, topic: str | None, partition: int, base: int | None, start: int
) -> Iterator[Captured]:
    """Records of a blob of batches; `base`: the offset the first batch was given (produce)."""
    try:
        spans = split_batches(data)
    except DecodeError:
        return
    view = memoryview(data)
    for pos, size in spans:
        try:
            h, records = decode_batch(view[pos : pos + size], verify_crc=False)
        except DecodeError:
            return
        if h.attributes & CONTROL_MASK:
            continue
        delta = 0 if base is None else base - h.base_offset
        for r in records:
            if r.offset + delta < start:
                continue
            item = record_json(r, delta)
            item.update(
                topic=topic,
                partition=partition,
                producer_id=h.producer_id,
                transactional=bool(h.attributes & TRANSACTIONAL_MASK),
            )
            yield item
