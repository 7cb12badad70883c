"""Produce and Fetch: record batches out and in (kcompat.wire.records builds and reads them).

Produce sends one v2 batch per partition per call, acks=-1, and returns each batch's base offset.
Fetch reads from one leader, without a fetch session (session 0, epoch -1, as librdkafka does), and
returns the records at or after the offset asked for (a batch may start before it).
"""

from __future__ import annotations

import time
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
RETRY_BACKOFF_S = 0.1  # Kafka's producer: retry.backoff.ms
RETRY_BACKOFF_MAX_S = 1.0  # retry.backoff.max.ms
# The answers that mean "your metadata is stale": Kafka's producer refreshes it and sends again.
REFRESH_AND_RETRY = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)


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
    cluster: Cluster,
    topic: TopicInfo,
    batches: Mapping[int, Sequence[Record]],
    *,
    acks: int = ALL_ISR,
    compression: int = 0,
) -> dict[int, int]:
    """partition -> base offset the leader assigned (-1 with acks=0). Records' offsets are deltas.

    A partition whose leader is unknown or has moved (a topic just created: Kafka's CreateTopics
    answers before the leader knows it leads) is sent again after a metadata refresh, with Kafka's
    producer back-off (retry.backoff.ms 100 doubling to retry.backoff.max.ms 1000), for at most the
    cluster's timeout. Only the partitions that failed go again: they were not written."""
    out: dict[int, int] = {}
    todo = {p: list(recs) for p, recs in batches.items() if recs}
    deadline = time.monotonic() + cluster.timeout
    backoff = RETRY_BACKOFF_S
    while True:
        failed = _produce_once(cluster, topic, todo, acks, compression, out)
        if not failed:
            return out
        if time.monotonic() + backoff > deadline:
            raise failed[min(failed)]
        time.sleep(backoff)
        backoff = min(2 * backoff, RETRY_BACKOFF_MAX_S)
        try:
            topic = cluster.topic(topic.name)
        except KafkaError as e:
            if e.code not in REFRESH_AND_RETRY:
                raise
        todo = {p: todo[p] for p in failed}


def _produce_once(
    cluster: Cluster,
    topic: TopicInfo,
    todo: Mapping[int, list[Record]],
    acks: int,
    compression: int,
    out: dict[int, int],
) -> dict[int, KafkaError]:
    """One Produce per leader; the base offsets go to `out`, the retriable failures are returned."""
    failed: dict[int, KafkaError] = {}
    by_leader: dict[int, list[int]] = {}
    for p in sorted(todo):
        info = topic.partitions.get(p)
        if info is None:
            failed[p] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic.name}[{p}]: Produce")
        elif info.leader < 0:
            failed[p] = KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic.name}[{p}]: Produce")
        else:
            by_leader.setdefault(info.leader, []).append(p)
    for node, parts in by_leader.items():
        body = {
            "transactional_id": None,
            "acks": acks,
            "timeout_ms": int(cluster.timeout * 1000),
            "topic_data": [
                {
                    "name": topic.name,
                    "topic_id": topic.topic_id,
                    "partition_data": [
                        {"index": p, "records": build_batch(todo[p], compression=compression)} for p in parts
                    ],
                }
            ],
        }
        try:
            conn = cluster.node(node)
        except KafkaError as e:  # the leader is not in the metadata yet
            failed.update({p: e for p in parts})
            continue
        if acks == 0:
            conn.send_only(PRODUCE, body)
            out.update({p: -1 for p in parts})
            continue
        _, answer = conn.request(PRODUCE, body)
        for t in answer.responses:
            for r in t.partition_responses:
                try:
                    check(
                        r.error_code, f"{topic.name}[{r.index}]: Produce", getattr(r, "error_message", None)
                    )
                except KafkaError as e:
                    if e.code not in REFRESH_AND_RETRY:
                        raise
                    failed[r.index] = e
                    continue
                out[r.index] = r.base_offset
    return failed


def fetch(
    cluster: Cluster,
    topic: TopicInfo,
    positions: dict[int, int],
    *,
    max_wait_ms: int = 500,
    max_bytes: int = 4 << 20,
    partition_max_bytes: int = 1 << 20,
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
                        {
                            "partition": p,
                            "fetch_offset": positions[p],
                            "partition_max_bytes": partition_max_bytes,
                            "current_leader_epoch": -1,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                        }
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
                got, next_offset = _records(
                    topic.name, p.partition_index, p.records, positions[p.partition_index]
                )
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
