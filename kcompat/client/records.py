"""Produce and Fetch: record batches out and in (kcompat.wire.records builds and reads them).

Produce sends one v2 batch per partition per call, acks=-1, and returns each batch's base offset.
Fetch reads from one leader, without a fetch session (session 0, epoch -1, as librdkafka does), and
returns the records at or after the offset asked for (a batch may start before it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kcompat.client.cluster import Cluster, TopicInfo
from kcompat.client.errors import KafkaError, check
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.record_batch import CONTROL_MASK, split_batches
from kcompat.wire.records import Record, build_batch, decode_batch

PRODUCE = 0
FETCH = 1
ALL_ISR = -1


@dataclass(frozen=True, slots=True)
class Fetched:
    """One record as a consumer sees it: where it lives and what it holds."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def produce(
    cluster: Cluster, topic: TopicInfo, batches: Mapping[int, Sequence[Record]], *, acks: int = ALL_ISR,
    compression: int = 0,
) -> dict[int, int]:
    """partition -> base offset the leader assigned (-1 with acks=0). Records' offsets are deltas."""
    out: dict[int, int] = {}
    for node, parts in cluster.leaders(topic, sorted(batches)).items():
        data: list[dict[str, object]] = [
            {"index": p, "records": build_batch(list(batches[p]), compression=compression)}
            for p in parts
            if batches[p]
        ]
        if not data:
            continue
        body = {
            "transactional_id": None,
            "acks": acks,
            "timeout_ms": int(cluster.timeout * 1000),
            "topic_data": [{"name": topic.name, "topic_id": topic.topic_id, "partition_data": data}],
        }
        conn = cluster.node(node)
        if acks == 0:
            conn.send_only(PRODUCE, body)
            out.update({p: -1 for p in parts if batches[p]})
            continue
        _, answer = conn.request(PRODUCE, body)
        for t in answer.responses:
            for p in t.partition_responses:
                check(p.error_code, f"{topic.name}[{p.index}]: Produce", getattr(p, "error_message", None))
                out[p.index] = p.base_offset
    return out


def fetch(
    cluster: Cluster, topic: TopicInfo, positions: dict[int, int], *, max_wait_ms: int = 500,
    max_bytes: int = 4 << 20, partition_max_bytes: int = 1 << 20,
) -> tuple[list[Fetched], dict[int, int], dict[int, int]]:
    """(records at or past each partition's position, partition -> high watermark, partition -> the
    offset after the last batch returned: where to fetch next even when that batch held only
    transaction markers)."""
    records: list[Fetched] = []
    high: dict[int, int] = {}
    after: dict[int, int] = {}
    for node, parts in cluster.leaders(topic, sorted(positions)).items():
        body = {
            "replica_id": -1,
            "replica_state": {"replica_id": -1, "replica_epoch": -1},
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic.name,
                    "topic_id": topic.topic_id,
                    "partitions": [
                        {"partition": p, "fetch_offset": positions[p], "partition_max_bytes": partition_max_bytes,
                         "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}
                        for p in parts
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        _, answer = cluster.node(node).request(FETCH, body)
        check(getattr(answer, "error_code", 0), f"{topic.name}: Fetch")
        for t in answer.responses:
            for p in t.partitions:
                check(p.error_code, f"{topic.name}[{p.partition_index}]: Fetch")
                high[p.partition_index] = p.high_watermark
                got, next_offset = _records(topic.name, p.partition_index, p.records, positions[p.partition_index])
                records.extend(got)
                after[p.partition_index] = max(next_offset, positions[p.partition_index])
    return records, high, after


def _records(topic: str, partition: int, data: object, start: int) -> tuple[list[Fetched], int]:
    if not data:
        return [], start
    buf = memoryview(data)  # type: ignore[arg-type]
    out: list[Fetched] = []
    next_offset = start
    for pos, size in split_batches(buf):  # a partial batch at the end (max bytes) is left out
        try:
            header, records = decode_batch(buf[pos : pos + size])
        except Exception as e:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{topic}[{partition}]: Fetch", str(e)) from None
        next_offset = header.base_offset + header.last_offset_delta + 1
        if header.attributes & CONTROL_MASK:
            continue  # transaction markers are not records a consumer sees
        out.extend(
            Fetched(topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers)
            for r in records
            if r.offset >= start
        )
    return out, next_offset
