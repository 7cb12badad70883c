"""Power loss, simulated on the files of a killed `kcompat serve`, then a restart on them.

A power cut leaves what the disk had: the tail of the last write torn off, pages the file size
already covers but whose data never arrived (zeros), index files cut short, a checkpoint missing.
Each test writes known batches (10 records each, several segments), kills the broker with SIGKILL,
damages the files as a power cut would, restarts it and checks, through a real consumer:

* the broker starts (it never refuses a damaged tail) and the log is consistent: offsets
  contiguous from 0, every batch before the damage intact, nothing after it;
* what was cut is said in ONE warning line naming the partition (none when nothing was cut);
* the partition takes new writes at the recovered end, and reads them back.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.crash.ledger import Stored, read_topic
from kcompat.log.checkpoints import RECOVERY_POINT_CHECKPOINT
from kcompat.testing import Broker, BrokerFactory
from kcompat.wire.record_batch import read_header, split_batches

pytestmark = pytest.mark.timeout(120)
TOPIC = "power"
PAGE = 4096
BATCHES = 200  # about 3 MiB: three segments of 1 MiB (the smallest segment.bytes Kafka allows)
PER_BATCH = 10


class Batch(NamedTuple):
    segment: Path
    position: int
    size: int
    base_offset: int
    last_offset: int


def expected(i: int) -> tuple[bytes, bytes, tuple[tuple[str, bytes], ...], int]:
    return f"k{i}".encode(), (b"%06d" % i) * (200 + i % 50), (("i", str(i).encode()),), 1_700_000_000_000 + i


def produce(bootstrap: str, start: int, count: int) -> None:
    """`count` batches of PER_BATCH records from record number `start`, each batch flushed alone."""
    p = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1000, "batch.num.messages": PER_BATCH}
    )
    failures: list[object] = []
    for b in range(count):
        for i in range(start + b * PER_BATCH, start + (b + 1) * PER_BATCH):
            key, value, headers, ts = expected(i)
            p.produce(TOPIC, key=key, value=value, headers=list(headers), timestamp=ts, partition=0,
                      on_delivery=lambda err, _m: err is not None and failures.append(err))  # fmt: skip
        assert p.flush(30) == 0
    assert not failures, failures


def start_with_data(factory: BrokerFactory) -> Broker:
    broker = factory(auto_create_topics_enable=False)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic(TOPIC, 1, 1, config={"segment.bytes": str(1 << 20), "segment.index.bytes": str(4 << 10),
                                         "index.interval.bytes": "2048"})  # fmt: skip
    admin.create_topics([topic])[TOPIC].result(30)
    produce(broker.bootstrap, 0, BATCHES)
    return broker


def batches(broker: Broker) -> list[Batch]:
    out = []
    for seg in sorted((broker.data_dir / f"{TOPIC}-0").glob("*.log")):
        data = seg.read_bytes()
        for pos, size in split_batches(data):
            h = read_header(data, pos)
            out.append(Batch(seg, pos, size, h.base_offset, h.last_offset))
    return out


def check_log(broker: Broker, end: int) -> None:
    """Records 0..end-1 intact and nothing else; then 2 more batches go in at `end` and read back."""
    got = read_topic(broker.bootstrap, TOPIC, 1)[0]
    assert [s.offset for s in got] == list(range(end)), f"expected offsets 0..{end - 1}"
    assert got == [Stored(i, *expected(i)) for i in range(end)]
    produce(broker.bootstrap, end, 2)
    got = read_topic(broker.bootstrap, TOPIC, 1)[0]
    assert got == [Stored(i, *expected(i)) for i in range(end + 2 * PER_BATCH)]


def warnings_about_partition(broker: Broker) -> list[str]:
    return [
        line for line in broker.logs().splitlines()
        if " WARNING " in line and f"{TOPIC}-0" in line and re.search(r"truncat|cut|deleted", line)
    ]  # fmt: skip


def restart_after(broker: Broker) -> None:
    """Start again after the damage, and insist nothing crashed along the way."""
    broker.start()
    assert "Traceback" not in broker.logs()


def test_torn_last_batch(kcompat_broker_factory: BrokerFactory) -> None:
    broker = start_with_data(kcompat_broker_factory)
    broker.kill()
    last = batches(broker)[-1]
    os.truncate(last.segment, last.position + last.size // 2)
    restart_after(broker)
    lines = warnings_about_partition(broker)
    assert len(lines) == 1, lines
    assert f"truncated {last.size // 2} bytes from offset {last.base_offset}" in lines[0], lines
    check_log(broker, last.base_offset)


def test_zeroed_tail_pages(kcompat_broker_factory: BrokerFactory) -> None:
    """The file size made it to disk, its last two pages of data did not (delayed allocation)."""
    broker = start_with_data(kcompat_broker_factory)
    broker.kill()
    all_batches = batches(broker)
    seg = all_batches[-1].segment
    size = seg.stat().st_size
    zero_from = max(((size - 1) // PAGE - 1) * PAGE, 0)
    with open(seg, "r+b") as f:
        f.seek(zero_from)
        f.write(bytes(size - zero_from))
    first_hit = next(b for b in all_batches if b.segment == seg and b.position + b.size > zero_from)
    restart_after(broker)
    lines = warnings_about_partition(broker)
    assert len(lines) == 1, lines
    assert f"truncated {size - first_hit.position} bytes from offset {first_hit.base_offset}" in lines[0]
    check_log(broker, first_hit.base_offset)


@pytest.mark.parametrize("which", ["active", "sealed"])
def test_truncated_index(kcompat_broker_factory: BrokerFactory, which: str) -> None:
    """An index cut mid-entry (and its time index emptied) is rebuilt from the log: nothing is lost."""
    broker = start_with_data(kcompat_broker_factory)
    broker.kill()
    segments = sorted({b.segment for b in batches(broker)})
    assert len(segments) >= 3, "the test needs several segments"
    seg = segments[-1] if which == "active" else segments[0]
    index, time_index = seg.with_suffix(".index"), seg.with_suffix(".timeindex")
    os.truncate(index, 8 * 3 + 5)
    os.truncate(time_index, 0)
    end = batches(broker)[-1].last_offset + 1
    restart_after(broker)
    assert warnings_about_partition(broker) == []
    assert f"rebuilding the indexes of {seg}" in broker.logs()
    check_log(broker, end)
    # the rebuilt indexes answer lookups: fetch from the middle of the segment, and by timestamp
    middle = next(b for b in batches(broker) if b.segment == seg and b.position > 0).base_offset + 3
    assert middle_fetch(broker, middle) == Stored(middle, *expected(middle))


def middle_fetch(broker: Broker, offset: int) -> Stored:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "mid", "enable.auto.commit": False})
    try:
        by_time = c.offsets_for_times([TopicPartition(TOPIC, 0, expected(offset)[3])], timeout=15)
        assert by_time[0].offset == offset
        c.assign([TopicPartition(TOPIC, 0, offset)])
        m = None
        while m is None:
            m = c.poll(5)
        assert m.error() is None
        return Stored(m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])
    finally:
        c.close()


def test_missing_recovery_point_checkpoint(kcompat_broker_factory: BrokerFactory) -> None:
    """Without its checkpoint every segment is re-validated from offset 0; intact data is all kept."""
    broker = start_with_data(kcompat_broker_factory)
    broker.kill()
    (broker.data_dir / RECOVERY_POINT_CHECKPOINT).unlink()
    end = batches(broker)[-1].last_offset + 1
    restart_after(broker)
    assert warnings_about_partition(broker) == []
    assert "was not shut down cleanly" in broker.logs()
    check_log(broker, end)


def test_missing_checkpoint_and_torn_tail(kcompat_broker_factory: BrokerFactory) -> None:
    """Both at once: the full scan still finds the torn batch and cuts only it."""
    broker = start_with_data(kcompat_broker_factory)
    broker.kill()
    (broker.data_dir / RECOVERY_POINT_CHECKPOINT).unlink()
    last = batches(broker)[-1]
    os.truncate(last.segment, last.position + 61)  # the header survived, the records did not
    restart_after(broker)
    lines = warnings_about_partition(broker)
    assert len(lines) == 1, lines
    check_log(broker, last.base_offset)


def test_torn_batch_in_an_unflushed_sealed_segment(kcompat_broker_factory: BrokerFactory) -> None:
    """A rolled segment that had not reached the disk loses its tail: the log ends there (no hole
    of lost offsets with later data after it), the later segments go, in one line."""
    broker = start_with_data(kcompat_broker_factory)
    broker.kill()
    all_batches = batches(broker)
    segments = sorted({b.segment for b in all_batches})
    assert len(segments) >= 3, "the test needs several segments"
    last_of_middle = [b for b in all_batches if b.segment == segments[1]][-1]
    os.truncate(last_of_middle.segment, last_of_middle.position + 100)
    restart_after(broker)
    lines = warnings_about_partition(broker)
    assert len(lines) == 1, lines
    assert f"truncated 100 bytes from offset {last_of_middle.base_offset}" in lines[0]
    assert f"deleted {len(segments) - 2} later segment(s)" in lines[0]
    check_log(broker, last_of_middle.base_offset)
