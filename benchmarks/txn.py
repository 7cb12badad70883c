"""The transactional rows of the side-by-side run (the "txn" suite), against each broker in turn:

- produce java:      Kafka's ProducerPerformance with --transactional-id and
                     --transaction-duration-ms (a commit every TXN_DURATION_MS), acks=all (what a
                     transactional producer forces), uncompressed, one partition;
- produce confluent: a confluent-kafka (librdkafka) loop, begin / TXN_RECORDS records / commit,
                     timed from the first begin_transaction() to the last commit's answer
                     (init_transactions, the coordinator lookup, is done before the clock starts);
- catch-up consume read_committed: the confluent loop's topic (committed transactions, a COMMIT
                     marker every TXN_RECORDS records) read from offset 0 with
                     isolation.level=read_committed, by the confluent consumer
                     (fetch.queue.backoff.ms=10, as the plain catch-up row) and by
                     ConsumerPerformance.

One warm-up transaction per client first, so that neither broker's first-use cost (creating
__transaction_state, loading the coordinator) is in a measured row. Counts are a fraction of the
plain rows' (TXN_SHARE): transactions add commit round trips, not a different data path.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from benchmarks import confluent_clients as cc
from benchmarks import java_tools
from benchmarks.payloads import letter_values
from benchmarks.plan import Plan, size_label

if TYPE_CHECKING:
    from benchmarks.suite import Suite

TXN_RECORDS = 5000  # records per transaction in the confluent loop
TXN_DURATION_MS = 100  # ProducerPerformance: a commit every 100 ms
TXN_SHARE = 4  # a quarter of the plain rows' record counts
PRODUCE_CLIENTS = ("confluent", "java")
CONSUME_CLIENTS = ("confluent", "java")


def produce_key(client: str, size: int) -> str:
    return f"txn/produce/{client}/{size}"


def consume_key(client: str, size: int) -> str:
    return f"txn/consume-read_committed/{client}/{size}"


def _clients(plan: Plan, names: tuple[str, ...]) -> tuple[str, ...]:
    """--no-java drops the Java rows here too."""
    return tuple(c for c in names if c != "java" or "java" in plan.clients)


def rows(plan: Plan) -> list[tuple[str, str]]:
    """(label, key) of every row, in report order."""
    out = [(f"produce {c} {size_label(s)}", produce_key(c, s)) for c in _clients(plan, PRODUCE_CLIENTS)
           for s in plan.sizes]  # fmt: skip
    out += [(f"consume read_committed {c} {size_label(s)}", consume_key(c, s))
            for c in _clients(plan, CONSUME_CLIENTS) for s in plan.sizes]  # fmt: skip
    return out


def counts(plan: Plan, client: str, size: int) -> int:
    return (plan.records if client == "confluent" else plan.java_records)[size] // TXN_SHARE


def confluent_transactions(
    bootstrap: str, topic: str, count: int, size: int, timeout: float
) -> cc.Throughput:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "delivery.report.only.error": True, "on_delivery": _raise_on_error})  # fmt: skip
    producer.init_transactions(30)
    values = letter_values(size)
    pool = len(values)
    send = producer.produce
    t0 = time.perf_counter()
    sent = 0
    while sent < count:
        producer.begin_transaction()
        for i in range(sent, min(sent + TXN_RECORDS, count)):
            while True:
                try:
                    send(topic, values[i % pool], partition=0)
                    break
                except BufferError:  # local queue full: let librdkafka catch up
                    producer.poll(0.001)
        sent = min(sent + TXN_RECORDS, count)
        producer.commit_transaction(timeout)  # flushes, then EndTxn(commit)
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"transactional produce to {topic} took over {timeout} s")
    return cc.Throughput(count, count * size, time.perf_counter() - t0)


def _raise_on_error(err: Any, msg: Any) -> None:
    if err is not None:
        raise KafkaException(err)


def consume_read_committed(bootstrap: str, topic: str, count: int, timeout: float) -> cc.Throughput:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "fetch.queue.backoff.ms": 10})  # fmt: skip
    try:
        consumer.list_topics(topic, timeout=10)  # connected before the clock starts
        t0 = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = nbytes = 0
        deadline = t0 + timeout
        while got < count:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"consumed {got} of {count} records of {topic} in {timeout} s")
            for msg in consumer.consume(min(10000, count - got), 1.0):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                got += 1
                nbytes += len(msg)
        return cc.Throughput(got, nbytes, time.perf_counter() - t0)
    finally:
        consumer.close()


def _nbytes(written: int, _result: Any) -> int:
    """Record value bytes moved: what the row's CPU s/GB divides by (as the plain rows)."""
    return written


def run(suite: Suite) -> None:
    plan, b = suite.plan, suite.broker
    timeout = plan.timeouts["run"]
    cc.create_topic(b.bootstrap, "txn-warm-up")
    confluent_transactions(b.bootstrap, "txn-warm-up", 10, 100, timeout)
    java = "java" in _clients(plan, PRODUCE_CLIENTS)
    if java:
        java_tools.producer_perf(b.bootstrap, "txn-warm-up", 10, 100, "all", "none", timeout,
                                 extra=["--transactional-id", "bench-warm-up-java"])  # fmt: skip
    for client in _clients(plan, PRODUCE_CLIENTS):
        for size in plan.sizes:
            key, count = produce_key(client, size), counts(plan, client, size)
            topic = key.replace("/", "-")
            cc.create_topic(b.bootstrap, topic)
            work: Callable[[], Any]
            if client == "confluent":
                work = partial(confluent_transactions, b.bootstrap, topic, count, size, timeout)
            else:
                extra = ["--transactional-id", f"bench-{uuid.uuid4().hex[:8]}",
                         "--transaction-duration-ms", str(TXN_DURATION_MS)]  # fmt: skip
                work = partial(java_tools.producer_perf, b.bootstrap, topic, count, size, "all", "none", timeout,
                               extra=extra)  # fmt: skip
            result = suite._measure(key, partial(_nbytes, count * size), work)
            if result is not None:
                suite.values[f"{key}/records_per_s"] = result.records_per_s
                suite.values[f"{key}/mb_per_s"] = result.mb_per_s
    for client in _clients(plan, CONSUME_CLIENTS):
        for size in plan.sizes:
            key, source = consume_key(client, size), produce_key("confluent", size)
            if f"{source}/records_per_s" not in suite.values:
                suite.errors[key] = f"no data: {source} did not run"
                continue
            topic, count = source.replace("/", "-"), counts(plan, "confluent", size)
            if client == "confluent":
                work = partial(consume_read_committed, b.bootstrap, topic, count, timeout)
            else:
                work = partial(java_tools.consumer_perf, b.bootstrap, topic, count, timeout,
                               ["isolation.level=read_committed"])  # fmt: skip
            result = suite._measure(key, partial(_nbytes, count * size), work)
            if result is not None:
                suite.values[f"{key}/records_per_s"] = result.records_per_s
                suite.values[f"{key}/mb_per_s"] = result.mb_per_s
