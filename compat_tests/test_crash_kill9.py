"""kill -9 at random moments under load: nothing a producer was told is written may be lost.

Five producers run for the whole test, each on its own 3-partition topic:

    ck-acks1     confluent-kafka   acks=1    not idempotent   uncompressed
    ck-acksall   confluent-kafka   acks=all  not idempotent   lz4
    ck-idem      confluent-kafka   acks=all  idempotent       zstd
    kp-acks1     kafka-python      acks=1    not idempotent   uncompressed
    kp-idem      kafka-python      acks=all  idempotent       gzip

Each round: produce for a random while, SIGKILL the broker, start it again on the same data dir and
port (the producers' in-flight requests are retried against the new process), produce a little
more, pause the producers and wait for every outstanding delivery, then read every topic back with
a consumer and check:

* every acknowledged record is at the offset it was acknowledged with: key, value, headers (in
  order, repeated keys included) and timestamp intact;
* offsets are contiguous from 0, no two acknowledgements share an offset, and everything read in
  the previous round is still there, unchanged (offsets never go backwards or repeat);
* the idempotent producers' topics hold each record exactly once (their retries across the restart
  were recognised), in the order the producer sent them; neither producer hit a fatal error.

A second test commits group offsets (OffsetCommit) in a loop and kills the broker, every other
round with no commit in flight: after each restart the committed offset is the last acknowledged
commit (or, when a commit was cut off by the kill, that one).

Rounds: KCOMPAT_CRASH_ROUNDS (default 20, about a minute); the slow layer runs
KCOMPAT_CRASH_SLOW_ROUNDS (default 60).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from compat_tests.crash.ledger import Acked, Ledger, Stored, read_topic
from kcompat.testing import Broker, BrokerFactory

ROUNDS = int(os.environ.get("KCOMPAT_CRASH_ROUNDS", "20"))
SLOW_ROUNDS = int(os.environ.get("KCOMPAT_CRASH_SLOW_ROUNDS", "60"))  # the slow layer's run
PARTITIONS = 3
BASE_TS = 1_700_000_000_000
pytestmark = pytest.mark.timeout(max(300, ROUNDS * 30))


@dataclass
class Spec:
    name: str
    client: str  # "confluent" or "kafka-python"
    acks: str
    idempotent: bool
    compression: str


SPECS = [
    Spec("ck-acks1", "confluent", "1", False, "none"),
    Spec("ck-acksall", "confluent", "all", False, "lz4"),
    Spec("ck-idem", "confluent", "all", True, "zstd"),
    Spec("kp-acks1", "kafka-python", "1", False, "none"),
    Spec("kp-idem", "kafka-python", "all", True, "gzip"),
]


def record(spec: Spec, seq: int) -> tuple[int, bytes, bytes, list[tuple[str, bytes]], int]:
    """(partition, key, value, headers, timestamp) of a producer's seq-th record: all derived from seq."""
    rng = random.Random(f"{spec.name}:{seq}")
    size = rng.choice((0, 1, 17, 300, 1500))
    value = rng.randbytes(size) if seq % 3 else (b"%d " % seq) * (size // 8)
    headers = [("seq", str(seq).encode()), ("p", spec.name.encode()), ("dup", b"1"), ("dup", b"\x00\xff")]
    return seq % PARTITIONS, f"{spec.name}:{seq}".encode(), value, headers, BASE_TS + seq


@dataclass
class Runner:
    """One producer on its own thread; `paused` stops it between sends."""

    spec: Spec
    bootstrap: str
    ledger: Ledger = field(default_factory=Ledger)
    seq: int = 0
    fatal: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.run = threading.Event()
        self.idle = threading.Event()
        self.stop = threading.Event()
        self.producer: Any = self._make()
        self.thread = threading.Thread(target=self._loop, name=self.spec.name, daemon=True)

    def _make(self) -> Any:
        s = self.spec
        if s.client == "confluent":
            conf: dict[str, Any] = {
                "bootstrap.servers": self.bootstrap,
                "acks": s.acks,
                "enable.idempotence": s.idempotent,
                "compression.type": s.compression,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "retry.backoff.ms": 50,
                "retry.backoff.max.ms": 200,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 250,
                "error_cb": self._error,
            }
            return Producer(conf)
        return KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks=1 if s.acks == "1" else "all",
            enable_idempotence=s.idempotent,
            compression_type=None if s.compression == "none" else s.compression,
            linger_ms=5,
            retries=2**31 - 1,
            delivery_timeout_ms=120000,
            request_timeout_ms=5000,
            retry_backoff_ms=50,
            reconnect_backoff_ms=50,
            reconnect_backoff_max_ms=250,
        )

    def _error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def _loop(self) -> None:
        try:
            self._produce_until_stopped()
        except Exception as e:  # e.g. librdkafka's fatal idempotence errors, raised from poll()
            self.fatal.append(f"{type(e).__name__}: {e}")
        self.idle.set()

    def _produce_until_stopped(self) -> None:
        while not self.stop.is_set():
            if not self.run.is_set():
                self.idle.set()
                self.run.wait(0.1)
                continue
            self.idle.clear()
            self.send(self.seq)
            self.seq += 1
            time.sleep(0.004)
            if self.spec.client == "confluent":
                self.producer.poll(0)

    def send(self, seq: int) -> None:
        s = self.spec
        partition, key, value, headers, ts = record(s, seq)
        acked = Acked(s.name, s.name, partition, -1, key, value, tuple(headers), ts)

        if s.client == "confluent":

            def on_delivery(err: Any, msg: Any) -> None:
                if err is not None:
                    self.ledger.fail(f"{seq}: {err}")
                else:
                    self.ledger.ack(acked._replace(partition=msg.partition(), offset=msg.offset()))

            while True:
                try:
                    self.producer.produce(
                        s.name, value=value, key=key, headers=headers, partition=partition, timestamp=ts,
                        on_delivery=on_delivery,
                    )  # fmt: skip
                    return
                except BufferError:
                    self.producer.poll(0.1)
        future = self.producer.send(
            s.name, value=value, key=key, headers=headers, partition=partition, timestamp_ms=ts
        )
        future.add_callback(
            lambda md: self.ledger.ack(acked._replace(partition=md.partition, offset=md.offset))
        )
        future.add_errback(lambda e: self.ledger.fail(f"{seq}: {e!r}"))

    def pause_and_flush(self, timeout: float = 90.0) -> None:
        self.run.clear()
        assert self.idle.wait(10), f"{self.spec.name} did not pause"
        assert not self.fatal, f"{self.spec.name}: producer failed: {self.fatal}"
        if self.spec.client == "confluent":
            left = self.producer.flush(timeout)
            assert left == 0, f"{self.spec.name}: {left} records still undelivered after {timeout}s (a hang?)"
        else:
            self.producer.flush(timeout)

    def close(self) -> None:
        self.stop.set()
        self.run.set()
        self.thread.join(10)
        if self.spec.client == "confluent":
            self.producer.flush(10)
        else:
            self.producer.close(10)


def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, fut in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).items():
        fut.result(30)
        assert name in names


class Checker:
    """Everything each round must find, with the previous round's reads as the floor."""

    def __init__(self) -> None:
        self.previous: dict[str, dict[int, list[Stored]]] = {}
        self.duplicates: Counter[str] = Counter()

    def check(self, bootstrap: str, runners: list[Runner], round_no: int) -> int:
        total = 0
        for r in runners:
            name = r.spec.name
            acked = r.ledger.snapshot()
            total += len(acked)
            read = read_topic(bootstrap, name, PARTITIONS)
            where = f"round {round_no}, topic {name}"
            for p, stored in read.items():
                offsets = [s.offset for s in stored]
                assert offsets == list(range(len(stored))), f"{where}-{p}: offsets not contiguous from 0"
                before = self.previous.get(name, {}).get(p, [])
                assert stored[: len(before)] == before, (
                    f"{where}-{p}: records read in the previous round changed or vanished "
                    f"(had {len(before)}, now {len(stored)})"
                )
            seen: dict[tuple[int, int], bytes] = {}
            for a in acked:
                at = (a.partition, a.offset)
                assert at not in seen, f"{where}: offset {at} acknowledged twice ({seen[at]!r} and {a.key!r})"
                seen[at] = a.key
                log = read[a.partition]
                assert a.offset < len(log), (
                    f"{where}-{a.partition}: acknowledged offset {a.offset} ({a.key!r}) is beyond the log "
                    f"end {len(log)}: lost"
                )
                assert log[a.offset] == a.stored(), (
                    f"{where}-{a.partition}: offset {a.offset} holds {log[a.offset]!r}, acknowledged {a.stored()!r}"
                )
            keys = Counter(s.key for stored in read.values() for s in stored)
            dups = sum(n - 1 for n in keys.values() if n > 1)
            if r.spec.idempotent:
                assert dups == 0, (
                    f"{where}: idempotent producer's records duplicated: {[k for k, n in keys.items() if n > 1][:10]}"
                )
                assert not r.fatal, f"{where}: fatal producer errors {r.fatal}"
                for p, stored in read.items():
                    seqs = [int(dict(s.headers)["seq"]) for s in stored]
                    assert seqs == sorted(seqs), f"{where}-{p}: idempotent records out of send order"
            else:
                self.duplicates[name] = dups  # at-least-once: a retry across a crash may write twice
            assert not r.ledger.errors, f"{where}: failed deliveries {r.ledger.errors}"
            self.previous[name] = read
        return total


def kill_and_restart(broker: Broker, rng: random.Random) -> None:
    broker.kill()
    time.sleep(rng.uniform(0, 0.3))  # clients find nobody listening for a moment
    broker.start()


def run_rounds(broker: Broker, rounds: int, seed: int, report: Callable[[str], None]) -> None:
    rng = random.Random(seed)
    create_topics(broker.bootstrap, [s.name for s in SPECS])
    runners = [Runner(s, broker.bootstrap) for s in SPECS]
    for r in runners:
        r.thread.start()
    checker = Checker()
    total = 0
    try:
        for round_no in range(1, rounds + 1):
            for r in runners:
                r.run.set()
            time.sleep(rng.uniform(0.2, 1.5))
            kill_and_restart(broker, rng)
            time.sleep(rng.uniform(0.2, 0.8))
            for r in runners:
                r.pause_and_flush()
            total = checker.check(broker.bootstrap, runners, round_no)
    finally:
        for r in runners:
            r.close()
    report(
        f"kill -9: {rounds} rounds survived, {total} acknowledged records all intact "
        f"(seed {seed}); duplicates written by non-idempotent retries: {dict(checker.duplicates)}"
    )


def test_kill9_loses_no_acknowledged_record(
    kcompat_broker_factory: BrokerFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    crash_rounds(kcompat_broker_factory, capsys, ROUNDS)


@pytest.mark.slow
@pytest.mark.timeout(SLOW_ROUNDS * 30)
def test_kill9_many_rounds(kcompat_broker_factory: BrokerFactory, capsys: pytest.CaptureFixture[str]) -> None:
    crash_rounds(kcompat_broker_factory, capsys, SLOW_ROUNDS)


def crash_rounds(factory: BrokerFactory, capsys: pytest.CaptureFixture[str], rounds: int) -> None:
    seed = int(os.environ.get("KCOMPAT_CRASH_SEED", str(random.randrange(2**32))))
    broker = factory(auto_create_topics_enable=False)
    lines: list[str] = []
    try:
        run_rounds(broker, rounds, seed, lines.append)
    except AssertionError as e:
        raise AssertionError(f"{e}\n(reproduce with KCOMPAT_CRASH_SEED={seed})") from None
    assert "Traceback" not in broker.logs()
    with capsys.disabled():
        print("\n" + "\n".join(lines))


GROUP_ROUNDS = max(3, ROUNDS // 4)


class Committer:
    """Commits ever larger offsets for a group, synchronously, until stopped; remembers what the
    broker acknowledged and what it merely attempted (a commit cut off by the kill may or may not
    have been applied)."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.topic = topic
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 250,
            }
        )
        self.next = 1
        self.acked: dict[int, int] = {}
        self.attempted: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="committer", daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            offsets = {p: self.next * 10 + p for p in range(PARTITIONS)}
            self.attempted = offsets
            try:
                self.consumer.commit(
                    offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()], asynchronous=False
                )
                self.acked = offsets
            except KafkaException:
                time.sleep(0.05)  # the broker is down: retry with the next offsets
            self.next += 1

    def committed(self) -> dict[int, int]:
        got = self.consumer.committed([TopicPartition(self.topic, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in got}


def test_kill9_keeps_committed_group_offsets(kcompat_broker_factory: BrokerFactory) -> None:
    rng = random.Random()
    broker = kcompat_broker_factory(auto_create_topics_enable=False)
    create_topics(broker.bootstrap, ["committed"])
    c = Committer(broker.bootstrap, "committed", "crash-group")
    c.thread.start()
    try:
        for round_no in range(1, GROUP_ROUNDS + 1):
            time.sleep(rng.uniform(0.3, 1.2))
            quiet = round_no % 2 == 0
            if quiet:  # every commit answered before the kill: the last one must be there exactly
                c.stop.set()
                c.thread.join(60)
            broker.kill()
            time.sleep(rng.uniform(0, 0.3))
            broker.start()
            c.stop.set()  # a commit cut off by the kill is retried against the new process
            c.thread.join(60)
            assert not c.thread.is_alive(), "a commit did not return within 60 s of the restart"
            acked, attempted = dict(c.acked), dict(c.attempted)
            got = c.committed()
            for p in range(PARTITIONS):
                low, high = acked.get(p, -1001), attempted.get(p, -1001)
                assert low <= got[p] <= high and (got[p] == low or not quiet), (
                    f"round {round_no}, partition {p}: committed offset {got[p]} after the restart; "
                    f"last acknowledged commit {low}, last attempted {high}"
                )
            c.stop.clear()
            c.thread = threading.Thread(target=c._loop, name="committer", daemon=True)
            c.thread.start()
    finally:
        c.stop.set()
        c.thread.join(30)
        c.consumer.close()
