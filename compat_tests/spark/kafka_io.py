"""The non-Spark side of the Spark tests: confluent-kafka (librdkafka) and kafka-python produce the
input and read Spark's output back, so every check compares bytes that crossed the wire through a
client other than Spark."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.wire.record_batch import BatchHeader, read_header, split_batches


class Rec(NamedTuple):
    """One Kafka record as both sides see it. `headers` is None for a record without headers (what
    Spark's `headers` column holds then)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int  # ms
    headers: tuple[tuple[str, bytes | None], ...] | None


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, partitions: int, *names: str, config: dict[str, str] | None = None) -> None:
    client = admin(bootstrap)  # must outlive the futures: its handle is destroyed when collected
    futures = client.create_topics(
        [NewTopic(n, num_partitions=partitions, replication_factor=1, config=config or {}) for n in names],
        operation_timeout=10,
    )
    for future in futures.values():
        future.result(timeout=20)


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> int:
    """DeleteRecords: makes `offset` the partition's log start offset; returns the new low watermark."""
    client = admin(bootstrap)
    (future,) = client.delete_records([TopicPartition(topic, partition, offset)]).values()
    return int(future.result(timeout=20).low_watermark)


def produce(bootstrap: str, records: Iterable[Rec], *, compression: str = "none", **config: Any) -> None:
    """Produce with librdkafka, waiting for every acknowledgement; records keep their partition,
    timestamp and headers (their offset is ignored)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 20, **config}
    )
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for r in records:
        producer.produce(
            r.topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            timestamp=r.timestamp,
            headers=list(r.headers) if r.headers else None,
            on_delivery=on_delivery,
        )
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not errors, f"produce failed: {remaining} unacknowledged, errors {errors}"


def produce_kafka_python(bootstrap: str, records: Iterable[Rec], *, compression: str | None = None) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, linger_ms=20)
    futures = [
        producer.send(
            r.topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            timestamp_ms=r.timestamp,
            headers=list(r.headers or ()),
        )
        for r in records
    ]
    producer.flush(30)
    for f in futures:
        f.get(timeout=30)
    producer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("watermarks")})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)
        }
    finally:
        consumer.close()


def consume_all(
    bootstrap: str, topic: str, partitions: int, *, expect: int | None = None, timeout: float = 30
) -> list[Rec]:
    """Every record of the topic, read with librdkafka from the log start to the high watermark
    (or until `expect` records have arrived), sorted by (partition, offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("readback"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    got: list[Rec] = []
    try:
        marks = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        done = {p for p, (low, high) in marks.items() if high <= low} if expect is None else set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if expect is None and len(done) == partitions:
                break
            if expect is not None and len(got) >= expect:
                break
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if expect is None and msg.offset() >= marks[msg.partition()][1]:
                        done.add(msg.partition())
                    continue
                raise AssertionError(f"consume {topic}: {msg.error()}")
            headers = msg.headers()
            got.append(
                Rec(
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    msg.timestamp()[1],
                    tuple(headers) if headers else None,
                )
            )
    finally:
        consumer.close()
    if expect is not None:
        assert len(got) >= expect, f"{topic}: {len(got)} of {expect} records within {timeout}s"
    else:
        assert len(done) == partitions, f"{topic}: not all partitions read to their end within {timeout}s"
    return sorted(got, key=lambda r: (r.partition, r.offset))


def spark_rows_to_recs(rows: Sequence[Any]) -> list[Rec]:
    """Rows of Spark's Kafka source (with includeHeaders, and `timestamp_ms` = unix_millis(timestamp))
    as Recs, sorted by (topic, partition, offset)."""
    out = [
        Rec(
            row.topic,
            row.partition,
            row.offset,
            None if row.key is None else bytes(row.key),
            None if row.value is None else bytes(row.value),
            row.timestamp_ms,
            None
            if row.headers is None
            else tuple((h.key, None if h.value is None else bytes(h.value)) for h in row.headers),
        )
        for row in rows
    ]
    return sorted(out, key=lambda r: (r.topic, r.partition, r.offset))


def stored_batches(data_dir: Path, topic: str) -> list[BatchHeader]:
    """The headers of the record batches the broker stored for a topic (every partition), to see
    what the clients really sent: compression codec, producer id."""
    found: list[BatchHeader] = []
    for segment in sorted(data_dir.glob(f"{topic}-*/*.log")):
        data = segment.read_bytes()
        found += [read_header(data, pos) for pos, _ in split_batches(data)]
    return found
