"""Share consumers under kill -9 (single node): nothing acknowledged-and-answered comes again,
nothing produced is lost, and records acquired but unacknowledged at the kill come back.

A producer (acks=all, idempotent) writes numbered records to a 3-partition topic for the whole
test. Two confluent-kafka ShareConsumers (explicit acknowledgement) consume into a ledger: every
record is ACCEPTed, except that each tenth record is RELEASEd on its first delivery; then
commit_sync. A record whose partition commit_sync answered without error is *answered*: it may
never be delivered again. Each round, a third member (the holder) acquires records and keeps them
unacknowledged while the `kcompat serve` process is killed -9 and started again on its data.

Checks, over all rounds:

* answered-then-delivered-again: 0 (an ACCEPT answered is final; so is a RELEASE answered: the
  record comes again only as a new delivery, with its delivery count raised past the released one);
* lost (produced and acknowledged by the broker, never delivered): 0;
* held at the kill: each held record is delivered again, with a delivery count not lower than the
  one it was held with (it came back AVAILABLE, its count kept);
* unacknowledged records redelivered (their acknowledgement cut off by a kill): allowed, counted.

Rounds: KCOMPAT_SHARE_KILL9_ROUNDS (default 3, about 30 s); the slow layer runs
KCOMPAT_SHARE_KILL9_SLOW_ROUNDS (default 25).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from support import kafka_tool

from kcompat.testing import TEST_DEFAULTS, Broker

ROUNDS = int(os.environ.get("KCOMPAT_SHARE_KILL9_ROUNDS", "3"))
SLOW_ROUNDS = int(os.environ.get("KCOMPAT_SHARE_KILL9_SLOW_ROUNDS", "25"))
PARTITIONS = 3
LOCK_MS = 4000
pytestmark = pytest.mark.timeout(max(240, SLOW_ROUNDS * 20))

PROPS = {
    **TEST_DEFAULTS,
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": "10",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("share-kill9-ledger")
    b = Broker(base / "data", base / "kcompat.log", overrides=PROPS)
    b.start()
    yield b
    b.stop()


@dataclass
class Ledger:
    lock: threading.Lock = field(default_factory=threading.Lock)
    produced: set[int] = field(default_factory=set)  # the broker acknowledged these
    delivered: dict[int, list[int]] = field(default_factory=dict)  # record -> delivery counts
    answered: dict[int, tuple[str, int]] = field(default_factory=dict)  # record -> (verdict, count)
    again_after_answer: list[str] = field(default_factory=list)
    unacked_redelivered: int = 0
    released: int = 0
    errors: list[str] = field(default_factory=list)

    def deliver(self, n: int, count: int) -> None:
        with self.lock:
            done = self.answered.get(n)
            if done is not None and (done[0] == "accept" or count <= done[1]):
                self.again_after_answer.append(f"record {n}: {done} answered, delivered with count {count}")
            elif done is None and n in self.delivered:
                self.unacked_redelivered += 1
            self.delivered.setdefault(n, []).append(count)

    def answer(self, n: int, verdict: str, count: int) -> None:
        with self.lock:
            self.answered[n] = (verdict, count)


def number(m: Any) -> int | None:
    v = m.value()
    return int(v[1:]) if v and v[:1] == b"r" else None


def produce_loop(broker: Broker, t: str, ledger: Ledger, stop: threading.Event) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    n = 0

    def done(n: int) -> Any:
        def cb(err: Any, _msg: Any) -> None:
            if err is None:
                with ledger.lock:
                    ledger.produced.add(n)

        return cb

    while not stop.is_set():
        for _ in range(20):
            p.produce(t, value=f"r{n}".encode(), partition=n % PARTITIONS, on_delivery=done(n))
            n += 1
        p.poll(0.05)
    assert p.flush(60) == 0, "the producer could not deliver everything after the last restart"


def consume_loop(broker: Broker, group: str, t: str, ledger: Ledger, stop: threading.Event) -> None:
    c = ShareConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    c.subscribe([t])
    try:
        while not stop.is_set():
            try:
                batch = c.poll(0.3)
            except KafkaException as e:  # the broker away: poll again
                ledger.errors.append(f"poll: {e}")
                continue
            verdicts: dict[tuple[int, int], list[tuple[int, str, int]]] = {}
            for m in batch:
                if m.error() is not None:
                    continue
                n = number(m)
                if n is None:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    continue
                count = m.delivery_count()
                ledger.deliver(n, count)
                release = n % 10 == 0 and count == 1
                c.acknowledge(m, AcknowledgeType.RELEASE if release else AcknowledgeType.ACCEPT)
                verdicts.setdefault((m.partition(), 0), []).append(
                    (n, "release" if release else "accept", count)
                )
            if not verdicts:
                continue
            try:
                result = c.commit_sync(10)
            except KafkaException:
                continue  # not answered: these may come again
            for tp, err in result.items():
                if err is None:
                    for n, verdict, count in verdicts.get((tp.partition, 0), []):
                        ledger.answer(n, verdict, count)
            time.sleep(0.05)  # about a few hundred records a second: data for every round
    finally:
        c.close()


def hold(
    broker: Broker, group: str, t: str, ledger: Ledger
) -> tuple[ShareConsumer, dict[int, tuple[int, int]]]:
    """A member that acquires records and keeps them unacknowledged: record -> (its delivery count,
    how many deliveries the ledger has of it with this one)."""
    c = ShareConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    c.subscribe([t])
    held: dict[int, tuple[int, int]] = {}
    deadline = time.time() + 20
    while not held and time.time() < deadline:
        for m in c.poll(0.5):
            if m.error() is None and (n := number(m)) is not None:
                ledger.deliver(n, m.delivery_count())
                held[n] = (m.delivery_count(), len(ledger.delivered[n]))
    return c, held


def run_rounds(broker: Broker, rounds: int, group: str, t: str, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(t, PARTITIONS, 1)])[t].result(30)
    kafka_tool("kafka-configs", "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type",
               "groups", "--entity-name", group, "--add-config", "share.auto.offset.reset=earliest")  # fmt: skip
    ledger = Ledger()
    stop_produce, stop_consume = threading.Event(), threading.Event()
    threads = [threading.Thread(target=produce_loop, args=(broker, t, ledger, stop_produce))] + [
        threading.Thread(target=consume_loop, args=(broker, group, t, ledger, stop_consume)) for _ in range(2)
    ]
    for th in threads:
        th.start()
    held_total = 0
    held_rounds: list[dict[int, tuple[int, int]]] = []
    try:
        for _ in range(rounds):
            time.sleep(rng.uniform(1.0, 3.0))
            holder, held = hold(broker, group, t, ledger)
            assert held, "the holder acquired nothing"
            broker.kill()
            time.sleep(rng.uniform(0, 0.3))
            broker.start()
            holder.close()  # on the new process: its acquisitions there are none
            held_rounds.append(held)
            held_total += len(held)
        stop_produce.set()
        threads[0].join(90)
        deadline = time.time() + 60
        while time.time() < deadline:
            with ledger.lock:
                missing = ledger.produced - set(ledger.delivered)
                unheld = [n for h in held_rounds for n, (_, k) in h.items() if len(ledger.delivered[n]) <= k]
            if not missing and not unheld:
                break
            time.sleep(0.5)
        time.sleep(1.0)  # anything delivered twice late shows up now
    finally:
        stop_produce.set()
        stop_consume.set()
        for th in threads:
            th.join(60)
    with ledger.lock:
        lost = sorted(ledger.produced - set(ledger.delivered))
        assert not ledger.again_after_answer, ledger.again_after_answer[:10]
        assert not lost, f"{len(lost)} produced records never delivered: {lost[:20]}"
        for h in held_rounds:
            for n, (count, k) in h.items():
                later = ledger.delivered[n][k:]
                assert later and later[0] >= count, f"record {n} held with count {count}, then {later}"
        return {
            "produced": len(ledger.produced),
            "delivered": sum(map(len, ledger.delivered.values())),
            "answered": len(ledger.answered),
            "again_after_answer": len(ledger.again_after_answer),
            "lost": len(lost),
            "unacked_redelivered": ledger.unacked_redelivered,
            "released_redelivered": sum(1 for v in ledger.delivered.values() if 1 in v and max(v) > 1),
            "held": held_total,
        }


def report(rounds: int, seed: int, figures: dict[str, int]) -> str:
    return f"\nshare kill -9: {rounds} rounds (seed {seed}): " + ", ".join(
        f"{k} {v}" for k, v in figures.items()
    )


def test_share_consumers_under_kill9(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    seed = int(os.environ.get("KCOMPAT_CRASH_SEED", str(random.randrange(1 << 30))))
    figures = run_rounds(broker, ROUNDS, "sk9", "share-kill9", seed)
    with capsys.disabled():
        print(report(ROUNDS, seed, figures))


@pytest.mark.slow
def test_share_consumers_under_kill9_many_rounds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = Broker(tmp_path / "data", tmp_path / "kcompat.log", overrides=PROPS)
    b.start()
    try:
        seed = int(os.environ.get("KCOMPAT_CRASH_SEED", str(random.randrange(1 << 30))))
        figures = run_rounds(b, SLOW_ROUNDS, "sk9-slow", "share-kill9-slow", seed)
    finally:
        b.stop()
    with capsys.disabled():
        print(report(SLOW_ROUNDS, seed, figures))
