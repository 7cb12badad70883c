"""kill -9 while replicas move between log dirs: nothing acknowledged is lost, nothing delivered twice.

One `kcompat serve` with two log dirs; an idempotent confluent-kafka producer (acks=all) writes to
a 2-partition topic the whole time. Each round asks AlterReplicaLogDirs to move both partitions to
the other dir (tens of MiB: the copy takes several steps), kills the broker at a random moment of
the copy or the swap, starts it again (an unfinished copy starts over, a finished one is the log),
and lets the move finish. At the end every acknowledged record is read back at the offset it was
acknowledged with, offsets are contiguous, and each record is there once.

Rounds: KCOMPAT_JBOD_KILL_ROUNDS (default 4, under a minute).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.crash.ledger import Acked, Ledger, read_topic
from compat_tests.jbod_wire import alter, placement
from kcompat.testing import Broker

ROUNDS = int(os.environ.get("KCOMPAT_JBOD_KILL_ROUNDS", "4"))
TOPIC = "moving"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def jbod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, list[Path]]]:
    base = tmp_path_factory.mktemp("jbod-kill")
    dirs = [base / "d0", base / "d1"]
    broker = Broker(
        data_dir=dirs[0],
        log_path=base / "broker.log",
        overrides={"log.dirs": ",".join(str(d) for d in dirs)},
    )
    broker.start()
    try:
        yield broker, dirs
    finally:
        broker.stop()


def test_kill9_during_moves_loses_nothing(jbod: tuple[Broker, list[Path]]) -> None:
    broker, dirs = jbod
    rng = random.Random(29)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    ledger = Ledger()
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    )
    stop = threading.Event()

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            ledger.fail(str(err))
            return
        m: object = msg
        ledger.ack(Acked("p", TOPIC, m.partition(), m.offset(), m.key(), m.value(), (), m.timestamp()[1]))  # type: ignore[attr-defined]

    crashed: list[BaseException] = []

    def produce() -> None:
        seq = 0
        try:
            while not stop.is_set():
                try:
                    producer.produce(
                        TOPIC, b"v%09d" % seq + b"x" * 4000, key=b"%d" % seq, on_delivery=delivered
                    )
                    seq += 1
                except BufferError:
                    producer.poll(0.05)
                producer.poll(0.001)  # about 4 MB/s
        except BaseException as e:
            crashed.append(e)

    writer = threading.Thread(target=produce)
    writer.start()
    moves = 0
    try:
        time.sleep(3)  # some MiB first: each move is several copy steps
        for _ in range(ROUNDS):
            where = placement(broker.bootstrap, TOPIC)
            for p in (0, 1):
                dest = str(next(d for d in dirs if str(d) != where[(p, False)]))
                assert alter(broker.bootstrap, dest, TOPIC, p) == {p: 0}
            time.sleep(rng.uniform(0.0, 0.4))  # in the copy, or at the swap
            broker.kill()
            broker.start()
            deadline = time.monotonic() + 60
            while any(future for _, future in placement(broker.bootstrap, TOPIC)):
                assert time.monotonic() < deadline, "a move did not finish"
                time.sleep(0.1)
            after = placement(broker.bootstrap, TOPIC)
            moves += sum(after[(p, False)] != where[(p, False)] for p in (0, 1))
    finally:
        stop.set()
        writer.join()
    assert crashed == [] and ledger.errors == []
    assert producer.flush(60) == 0
    acked = ledger.snapshot()
    assert moves > 0 and len(acked) > 1000, (moves, len(acked))
    stored = read_topic(broker.bootstrap, TOPIC, 2)
    for p in (0, 1):
        assert [s.offset for s in stored[p]] == list(range(len(stored[p])))  # contiguous from 0
        values = [s.value for s in stored[p]]
        assert len(values) == len(set(values)), f"partition {p}: a record twice"
    at = {(p, s.offset): s for p in (0, 1) for s in stored[p]}
    lost = [
        a
        for a in acked
        if at.get((a.partition, a.offset)) is None or at[(a.partition, a.offset)].value != a.value
    ]
    assert lost == [], f"{len(lost)} acknowledged records lost or changed, e.g. {lost[:3]}"
