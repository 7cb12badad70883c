"""Why the confluent-defaults 100 B catch-up row rewards a slower broker: librdkafka's fetch back-off.

    python -m benchmarks.backoff_trace [--brokers kcompat,kafka] [--records 2000000]

With librdkafka's defaults (queued.min.messages=100000, fetch.queue.backoff.ms=1000) the consumer
stops fetching for a whole second whenever its local queue holds 100,000 records or more. Each
cycle therefore fetches until the queue, filled by the fetcher and drained by the application at
the same time, reaches 100,000; a broker that answers each fetch sooner reaches it sooner and idles
more. This reads 100-byte records from offset 0 with librdkafka's `debug=fetch` log, cuts it at
each "Fetch backoff for 1000ms: Local: Queue full", and prints per fill phase: its length, the
Fetch requests in it, milliseconds per Fetch, and the records fetched. Figures, not a test.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from benchmarks import confluent_clients as cc
from benchmarks.brokers import BrokerProcess, KafkaBroker, KcompatBroker

_FETCH_AT = re.compile(r"Fetch topic \S+ \[0\] at offset (\d+)")
_QUEUE_FULL = "Fetch backoff for 1000ms: Local: Queue full"


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((time.perf_counter(), record.getMessage()))


def trace(broker: BrokerProcess, records: int) -> None:
    broker.start()
    try:
        cc.create_topic(broker.bootstrap, "trace")
        cc.produce(broker.bootstrap, "trace", records, 100, "1", "none")
        lines = _Lines()
        logger = logging.getLogger(f"librdkafka-{broker.name}")
        logger.addHandler(lines)
        logger.setLevel(logging.DEBUG)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "trace", "enable.auto.commit": False,
                             "debug": "fetch", "logger": logger})  # fmt: skip
        try:
            consumer.list_topics("trace", timeout=10)
            lines.lines.clear()
            t0 = time.perf_counter()
            consumer.assign([TopicPartition("trace", 0, 0)])
            got = 0
            while got < records:
                got += len(consumer.consume(10000, 1.0))
            seconds = time.perf_counter() - t0
        finally:
            consumer.close()
    finally:
        broker.stop()
        broker.cleanup()
    print(f"{broker.name}: {records:,} records in {seconds:.2f} s = {records / seconds:,.0f} records/s")
    start: tuple[float, int] | None = None
    last: tuple[float, int] | None = None
    fetches = 0
    for t, line in lines.lines:
        if m := _FETCH_AT.search(line):
            last = (t, int(m.group(1)))
            start = start or last
            fetches += 1
        elif _QUEUE_FULL in line and start is not None and last is not None:
            ms = (last[0] - start[0]) * 1000
            print(f"  fill {ms:6.1f} ms, {fetches:3d} fetches, {ms / max(1, fetches - 1):5.2f} ms per fetch, "
                  f"{last[1] - start[1]:9,} records, then 1 s of back-off")  # fmt: skip
            start, last, fetches = None, None, 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--brokers", default="kcompat,kafka")
    p.add_argument("--records", type=int, default=2_000_000)
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kcompat-backoff-"))
    for name in args.brokers.split(","):
        broker: BrokerProcess = KcompatBroker(work / name) if name == "kcompat" else KafkaBroker(work / name)
        trace(broker, args.records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
