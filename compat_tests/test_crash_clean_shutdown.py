"""SIGTERM leaves a clean log: the restart scans nothing, and the files are sealed as Kafka seals them.

After a graceful stop the log dir holds the clean-shutdown marker, the recovery points are at the
log ends, and every index is trimmed to its entries; the next start recovers nothing (no
"not shut down cleanly", no index rebuilt, no truncation) and serves everything. Proof that no
scan happens: a byte flipped in the last batch after the clean stop is NOT cut at the restart (a
recovery scan would have cut it); after a kill it is.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.crash.ledger import read_topic
from kcompat.log.checkpoints import RECOVERY_POINT_CHECKPOINT, read_offsets
from kcompat.log.manager import CLEAN_SHUTDOWN_FILE
from kcompat.testing import Broker, BrokerFactory

pytestmark = pytest.mark.timeout(120)
TOPIC = "graceful"
RECORDS = 3000


def fill(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1, config={"segment.bytes": str(1 << 20)})])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        p.produce(TOPIC, key=b"%d" % i, value=b"v" * 1000, partition=i % 2)
    assert p.flush(30) == 0


def flip_last_byte(broker: Broker) -> None:
    seg = max((broker.data_dir / f"{TOPIC}-0").glob("*.log"))
    data = bytearray(seg.read_bytes())
    data[-1] ^= 0xFF
    seg.write_bytes(bytes(data))


def recovery_lines(broker: Broker) -> list[str]:
    return [
        line for line in broker.logs().splitlines()
        if "not shut down cleanly" in line or "rebuilding the indexes" in line or "truncated" in line
    ]  # fmt: skip


def test_sigterm_leaves_a_log_that_restarts_without_recovery(kcompat_broker_factory: BrokerFactory) -> None:
    broker = kcompat_broker_factory(auto_create_topics_enable=False)
    fill(broker)
    ends = {p: len(v) for p, v in read_topic(broker.bootstrap, TOPIC, 2).items()}
    assert sum(ends.values()) == RECORDS
    assert broker.stop() == 0
    d = broker.data_dir
    assert (d / CLEAN_SHUTDOWN_FILE).exists()
    assert read_offsets(d / RECOVERY_POINT_CHECKPOINT) is not None
    points = read_offsets(d / RECOVERY_POINT_CHECKPOINT) or {}
    assert {p: points[(TOPIC, p)] for p in (0, 1)} == ends  # everything flushed
    for p in (0, 1):
        for index in (d / f"{TOPIC}-{p}").glob("*.index"):
            assert index.stat().st_size % 8 == 0 and index.stat().st_size < 10 << 20  # trimmed

    flip_last_byte(broker)  # only a recovery scan would notice
    broker.start()
    assert recovery_lines(broker) == []
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()  # a crash from now on is unclean
    assert high_watermarks(broker) == ends  # the damaged batch is still there: nothing scanned

    broker.kill()  # the same damage after a kill: the scan finds it and cuts that batch
    broker.start()
    lines = recovery_lines(broker)
    assert any("not shut down cleanly" in line for line in lines), lines
    assert sum("truncated" in line for line in lines) == 1, lines
    after = high_watermarks(broker)
    assert after[1] == ends[1] and after[0] < ends[0]
    assert "Traceback" not in broker.logs()


def high_watermarks(broker: Broker) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "hw"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=15)[1] for p in (0, 1)}
    finally:
        c.close()
