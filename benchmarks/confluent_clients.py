"""The harness's own clients, on confluent-kafka (librdkafka), with librdkafka's defaults unless
said otherwise; the same code drives both brokers.

- produce:  one producer, one partition, as fast as it goes; timed from the first produce() to
            the end of flush() (every record acknowledged). Only delivery errors are reported
            back (delivery.report.only.error), so Python does no per-record callback work.
- catch-up consume: an assigned consumer (no group join) reads a partition from offset 0 to its
            end; timed from assign() (after the consumer has connected and has metadata) to the
            last record, since librdkafka prefetches in the background. Read twice: with
            fetch.queue.backoff.ms=10, and with librdkafka's default of 1000 ms, which stops
            fetching for a whole second whenever the local queue holds queued.min.messages: the
            faster a broker answers, the sooner the queue fills and the longer the client idles
            (100-byte records: ~270k records/s with the default, ~1.3M with 10 ms, same broker),
            so the default figure measures that back-off more than the broker.
- end-to-end latency: a producer (linger.ms=0) sends at a fixed rate while an assigned consumer
            reads, both with socket.nagle.disable (librdkafka leaves Nagle on by default, which
            alone puts tens of ms on the p99 whatever the broker; Java clients always disable it); each value starts with its send time (perf_counter_ns, one process), so the
            latency is produce() to consume() through the broker: append, long-poll wake-up, fetch.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.payloads import letter_values


@dataclass
class Throughput:
    records: int
    bytes: int  # record values
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    timeout: float = 30.0,
    *,
    client: dict[str, str] | None = None,
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout)  # fmt: skip
    futures[topic].result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # until the partition has a leader
        md = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 for p in md.partitions.values())
        ):
            return
        time.sleep(0.05)
    raise TimeoutError(f"topic {topic} has no leader after {timeout} s")


def produce(bootstrap: str, topic: str, count: int, size: int, acks: str, compression: str,
            timeout: float = 120.0, *, client: dict[str, str] | None = None) -> Throughput:  # fmt: skip
    """`client`: more settings for the producer (security: the TLS rows)."""
    errors: list[str] = []

    def on_error(err: object, msg: object) -> None:
        errors.append(str(err))

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "compression.type": compression,
        "delivery.report.only.error": True, "on_delivery": on_error, **(client or {}),
    })  # fmt: skip
    producer.list_topics(topic, timeout=10)  # connected and metadata known before the clock starts
    values = letter_values(size)
    pool = len(values)
    send = producer.produce
    t0 = time.perf_counter()
    for i in range(count):
        value = values[i % pool]
        while True:
            try:
                send(topic, value, partition=0)
                break
            except BufferError:  # local queue full: let librdkafka catch up
                producer.poll(0.001)
        if i & 0x3FFF == 0:
            producer.poll(0)
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"produce to {topic} took over {timeout} s")
    left = producer.flush(timeout)
    seconds = time.perf_counter() - t0
    if left:
        raise TimeoutError(f"{left} records of {topic} still unacknowledged after {timeout} s")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors producing to {topic}, first: {errors[0]}")
    return Throughput(count, count * size, seconds)


def _consumer(bootstrap: str, extra: dict[str, object] | None = None) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "enable.partition.eof": False, **(extra or {}),
    })  # fmt: skip


def consume(
    bootstrap: str,
    topic: str,
    count: int,
    timeout: float = 120.0,
    *,
    defaults: bool = False,
    client: dict[str, str] | None = None,
) -> Throughput:
    """Read `count` records of partition 0 from offset 0 (`client`: more consumer settings)."""
    consumer = _consumer(
        bootstrap, {**({} if defaults else {"fetch.queue.backoff.ms": 10}), **(client or {})}
    )
    try:
        consumer.list_topics(topic, timeout=10)  # connected before the clock starts
        t0 = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = nbytes = 0
        deadline = time.perf_counter() + timeout
        while got < count:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"consumed {got} of {count} records of {topic} in {timeout} s")
            for msg in consumer.consume(min(10000, count - got), 1.0):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                got += 1
                nbytes += len(msg)
        return Throughput(got, nbytes, time.perf_counter() - t0)
    finally:
        consumer.close()


@dataclass
class Latencies:
    sent: int
    seconds_each: list[float]  # received, after the warm-up


def end_to_end(bootstrap: str, topic: str, rate: int, seconds: float, size: int,
               warmup_s: float = 0.5, acks: str = "1", max_in_flight: int = 1_000_000) -> Latencies:  # fmt: skip
    consumer = _consumer(bootstrap, {"fetch.wait.max.ms": 500, "socket.nagle.disable": True})
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 0,
            "socket.nagle.disable": True,
            "max.in.flight.requests.per.connection": max_in_flight,
        }
    )
    producer.list_topics(topic, timeout=10)
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.consume(1, 1.0)  # fetching (and long-polling) before the first send
    stamp = struct.Struct(">q")
    filler = b"x" * max(size - stamp.size, 0)
    total = int(rate * seconds)
    sent = [0]

    def send() -> None:
        t0 = time.perf_counter()
        for i in range(total):
            due = t0 + i / rate
            while (now := time.perf_counter()) < due:
                time.sleep(min(due - now, 0.001))
            producer.produce(topic, stamp.pack(time.perf_counter_ns()) + filler, partition=0)
            producer.poll(0)
            sent[0] += 1
        producer.flush(30)

    sender = threading.Thread(target=send, name="e2e-producer")
    start_ns = time.perf_counter_ns()
    sender.start()
    latencies: list[float] = []
    got = 0
    warmup_ns = int(warmup_s * 1e9)
    deadline = time.perf_counter() + seconds + 30
    try:
        while got < total and time.perf_counter() < deadline:
            msg = consumer.poll(0.2)  # one at a time: a batch would hold early records back
            if msg is not None:
                now = time.perf_counter_ns()
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                got += 1
                sent_ns = stamp.unpack_from(msg.value())[0]
                if sent_ns - start_ns >= warmup_ns:
                    latencies.append((now - sent_ns) / 1e9)
    finally:
        sender.join()
        consumer.close()
    if got < total:
        raise TimeoutError(f"end-to-end: received {got} of {total} records")
    return Latencies(sent[0], latencies)
