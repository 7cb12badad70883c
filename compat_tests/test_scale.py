"""Many partitions on one broker (issue 18): real `kcompat serve` processes and real clients.

* Under `ulimit -n 1024` (prlimit on the broker process), 1,200 partitions whose segment files share
  a cache of 64 descriptors (log.segment.descriptors.max): a real client's record in every one, the
  descriptors within the bound (plus sockets and a few), and after a kill -9 every record is there.
* SIGTERM while thousands of partitions are being recovered after a kill -9: the process exits
  within a second, and the next start recovers every record.
* A clean stop past log.close.timeout.ms (a disk far behind) exits at once without the clean
  shutdown marker, and the next start recovers every acknowledged record.
* CreateTopics answers before the partition logs are made (as Kafka's controller does); a kill -9
  right after the answer leaves a broker that starts and serves every created partition.
* Partitions of many segments stay within that cache too, and catch-up reads over every old
  segment (sendfile) return every record while staying within it.
* Under `ulimit -n 1024`, idle connections that take all but a few descriptors: CreateTopics and
  a Produce to a partition whose log cannot be made get KAFKA_STORAGE_ERROR answers (the
  connection stays open), existing partitions are served and new connections accepted; the
  descriptors running out altogether leave the broker serving; once the connections go, new
  partitions work again.
* (slow) 5,000 partitions created and filled by a real client, kill -9, restart: every
  acknowledged record is there.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.crash.wire_client import API_VERSIONS, FETCH, PRODUCE, WireClient, fetch_body, produce_body
from kcompat.testing import TEST_DEFAULTS, Broker

pytestmark = pytest.mark.timeout(300)


class LimitedBroker(Broker):
    """A broker started under `prlimit --nofile=N:N` (soft and hard: it cannot raise it)."""

    def __init__(self, *args: object, nofile: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.nofile = nofile

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={self.nofile}:{self.nofile}", "--", *super().command()]


def _broker(tmp_path: Path, name: str, **kwargs: object) -> Broker:
    cls = LimitedBroker if "nofile" in kwargs else Broker
    return cls(tmp_path / f"{name}-data", tmp_path / f"{name}.log", dict(TEST_DEFAULTS), **kwargs)  # type: ignore[arg-type]


def create(admin: AdminClient, names: list[str], partitions: int) -> dict[str, int]:
    """topic -> Kafka error code of its CreateTopics result (0 when created)."""
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], request_timeout=120)
    out = {}
    for name, f in futures.items():
        e = f.exception()
        out[name] = 0 if e is None else e.args[0].code()
    return out


def produce(
    bootstrap: str, targets: list[tuple[str, int]], value: bytes = b"v"
) -> dict[tuple[str, int], int]:
    """One record per partition; (topic, partition) -> acknowledged offset."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "enable.idempotence": True})
    acked: dict[tuple[str, int], int] = {}
    errors: list[str] = []

    def done(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[(msg.topic(), msg.partition())] = msg.offset()  # type: ignore[attr-defined]

    for topic, part in targets:
        while True:
            try:
                p.produce(topic, value, partition=part, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    assert not errors, errors[:3]
    return acked


def read_back(bootstrap: str, expected: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The offset at which each expected (topic, partition) record is read back."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-check", "enable.auto.commit": False})
    c.assign([TopicPartition(t, p, 0) for t, p in expected])
    seen: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + 120
    while len(seen) < len(expected) and time.monotonic() < deadline:
        for m in c.consume(1000, timeout=0.5):
            if m.error() is None:
                seen.setdefault((m.topic(), m.partition()), m.offset())
    c.close()
    return seen


def descriptors(pid: int, data_dir: Path) -> tuple[int, int, int]:
    """(all, sockets, segment .log files under `data_dir`) of the descriptors process `pid` holds."""
    total = sockets = logs = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        total += 1
        sockets += target.startswith("socket:")
        logs += target.startswith(str(data_dir)) and target.endswith(".log")
    return total, sockets, logs


def test_more_partitions_than_descriptors_take_records_and_survive_kill_9(tmp_path: Path) -> None:
    # 1,200 partitions under `ulimit -n 1024`, their segment files through a cache of 64 descriptors.
    bound, topics, partitions = 64, 24, 50
    config = {**TEST_DEFAULTS, "log.segment.descriptors.max": str(bound)}
    broker = LimitedBroker(tmp_path / "fd-data", tmp_path / "fd.log", config, nofile=1024).start()
    names = [f"fd-{i:02d}" for i in range(topics)]
    every = [(n, p) for n in names for p in range(partitions)]
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert set(create(admin, names, partitions).values()) == {0}
        acked = produce(broker.bootstrap, every, b"r" * 100)  # a record in every partition
        assert len(acked) == len(every)
        total, sockets, logs = descriptors(broker.process.pid, broker.data_dir)  # type: ignore[union-attr]
        print(f"descriptors after the fill: {total} ({sockets} sockets, {logs} segment files)")
        assert logs <= bound
        assert total <= bound + sockets + 32, (total, sockets, logs)
        assert "Too many open files" not in broker.logs()
    finally:
        broker.kill()
    broker.start()  # under the same limit: low for 1,200 partitions, said in one line
    try:
        assert f"open file limit (1024) is low for the {len(every)} partitions" in broker.logs()
        assert read_back(broker.bootstrap, acked) == acked
        assert descriptors(broker.process.pid, broker.data_dir)[2] <= bound  # type: ignore[union-attr]
    finally:
        broker.stop()


def _many_unflushed(
    tmp_path: Path, topics: int, partitions: int
) -> tuple[Broker, dict[tuple[str, int], int]]:
    """A broker whose topics x partitions each got one acknowledged record, then was killed."""
    broker = _broker(tmp_path, "many").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        names = [f"many-{i:03d}" for i in range(topics)]
        assert set(create(admin, names, partitions).values()) == {0}
        acked = produce(broker.bootstrap, [(n, p) for n in names for p in range(partitions)], b"x" * 100)
    finally:
        broker.kill()
    return broker, acked


def test_sigterm_during_recovery_exits_within_a_second_and_the_next_start_recovers(tmp_path: Path) -> None:
    broker, acked = _many_unflushed(tmp_path, 40, 50)
    # Start again (not waiting for it to answer) and stop it as soon as it says it is recovering.
    with open(broker.log_path, "ab") as out:
        proc = subprocess.Popen(broker.command(), stdout=out, stderr=subprocess.STDOUT, env=broker._env(),
                                cwd=str(broker.data_dir.parent))  # fmt: skip
    deadline = time.monotonic() + 60
    while "was not shut down cleanly" not in broker.logs():
        assert proc.poll() is None and time.monotonic() < deadline, broker.logs()[-2000:]
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    code = proc.wait(10)
    took = time.monotonic() - t0
    assert code == 0, broker.logs()[-2000:]
    assert took < 1.0, f"exited {took:.2f} s after SIGTERM"
    assert "stopped during start-up" in broker.logs()
    assert not (broker.data_dir / ".kafka_cleanshutdown").exists()
    broker.start()
    try:
        assert read_back(broker.bootstrap, acked) == acked
    finally:
        broker.stop()


def test_a_stop_past_the_log_close_timeout_is_prompt_unmarked_and_recovered(tmp_path: Path) -> None:
    # log.close.timeout.ms=0 stands for a disk far behind (thousands of partitions just filled):
    # the clean stop gives up at once, exits, and leaves the logs for the next start to recover.
    config = {**TEST_DEFAULTS, "log.close.timeout.ms": "0"}
    broker = Broker(tmp_path / "cut-data", tmp_path / "cut.log", config).start()
    names = [f"cut-{i}" for i in range(10)]
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert set(create(admin, names, 50).values()) == {0}
        acked = produce(broker.bootstrap, [(n, p) for n in names for p in range(50)], b"c" * 100)
        t0 = time.monotonic()
        assert broker.stop() == 0
        took = time.monotonic() - t0
    finally:
        broker.kill()
    assert took < 3.0, f"stopped {took:.2f} s after SIGTERM"
    assert "clean stop cut short" in broker.logs()
    assert not (broker.data_dir / ".kafka_cleanshutdown").exists()
    broker.overrides = dict(TEST_DEFAULTS)
    broker.start()
    try:
        assert "was not shut down cleanly" in broker.logs()
        assert read_back(broker.bootstrap, acked) == acked
    finally:
        broker.stop()
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()  # a stop in time is marked


def test_kill_9_right_after_create_topics_leaves_every_partition_served(tmp_path: Path) -> None:
    broker = _broker(tmp_path, "early").start()
    names = [f"early-{i:02d}" for i in range(10)]
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert set(create(admin, names, 50).values()) == {0}
    finally:
        broker.kill()  # at once: most of the 500 logs are not made yet
    made = sum(1 for d in broker.data_dir.iterdir() if d.name.startswith("early-"))
    print(f"partition dirs on disk at the kill: {made} of 500")
    broker.start()
    try:
        every = [(n, p) for n in names for p in range(50)]
        acked = produce(broker.bootstrap, every)
        assert acked == dict.fromkeys(every, 0)
        assert read_back(broker.bootstrap, acked) == acked
        assert sum(1 for d in broker.data_dir.iterdir() if d.name.startswith("early-")) == 500
    finally:
        broker.stop()


def log_descriptors(pid: int, data_dir: Path) -> int:
    """Descriptors of process `pid` open on segment `.log` files under `data_dir`."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        n += target.startswith(str(data_dir)) and target.endswith(".log")
    return n


def test_sealed_segments_stay_within_the_descriptor_bound(tmp_path: Path) -> None:
    bound, partitions, rounds = 4, 8, 12
    broker = Broker(tmp_path / "seg-data", tmp_path / "seg.log",
                    {**TEST_DEFAULTS, "log.segment.descriptors.max": str(bound)}).start()  # fmt: skip
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic("seg", partitions, 1, config={"segment.ms": "1"})])
        futures["seg"].result(30)
        targets = [("seg", p) for p in range(partitions)]
        for i in range(rounds):  # each round a batch per partition, a new segment each (segment.ms=1)
            produce(broker.bootstrap, targets, b"r%d" % i)
            time.sleep(0.002)
        pid = broker.process.pid  # type: ignore[union-attr]
        segments = sum(1 for f in (broker.data_dir / "seg-0").iterdir() if f.suffix == ".log")
        assert segments >= rounds - 1, segments
        # At most the bound of the 100-odd segments, active ones included (and the piece or two of a
        # last answer: a piece keeps its descriptor until dropped).
        assert log_descriptors(pid, broker.data_dir) <= bound + 2
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "seg", "enable.auto.commit": False})
        c.assign([TopicPartition("seg", p, 0) for p in range(partitions)])
        got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < partitions * rounds and time.monotonic() < deadline:
            for m in c.consume(500, timeout=0.5):
                if m.error() is None:
                    got[m.partition()].append(m.value())
        c.close()
        assert got == {p: [b"r%d" % i for i in range(rounds)] for p in range(partitions)}
        # A let-go descriptor closes when the last piece of an answer holding it is freed; a piece
        # caught in a reference cycle waits for the broker's garbage collector, which runs as the
        # broker allocates: keep it busy with Metadata requests for a while (the bound, not a leak).
        deadline = time.monotonic() + 20
        while log_descriptors(pid, broker.data_dir) > bound + 2 and time.monotonic() < deadline:
            admin.list_topics(timeout=5)
        assert log_descriptors(pid, broker.data_dir) <= bound + 2
    finally:
        broker.stop()


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def hog_descriptors(broker: Broker, target: int, hogs: list[socket.socket]) -> None:
    """Idle connections to `broker` until its process holds `target` descriptors."""
    pid = broker.process.pid  # type: ignore[union-attr]
    deadline = time.monotonic() + 30
    while (held := open_descriptors(pid)) < target:
        want = min(target - held, 40)  # within the listen backlog (50, Kafka's): no SYN dropped
        hogs.extend(socket.create_connection((broker.host, broker.port)) for _ in range(want))
        settle = time.monotonic() + 1  # every one accepted before counting again: no overshoot
        while open_descriptors(pid) < held + want and time.monotonic() < settle:
            time.sleep(0.02)
        assert time.monotonic() < deadline, (open_descriptors(pid), target)


def produce_code(c: WireClient, topic: str, value: bytes) -> tuple[int, int]:
    """(error code, base offset) of a one-record Produce to partition 0 of `topic`."""
    (answer,) = c.call(PRODUCE, 9, produce_body(topic, value)).responses
    (part,) = answer.partition_responses
    return part.error_code, part.base_offset


def test_out_of_descriptors_answers_kafka_storage_error_and_serves_on(tmp_path: Path) -> None:
    limit = 1024
    broker = LimitedBroker(tmp_path / "hog-data", tmp_path / "hog.log", dict(TEST_DEFAULTS), nofile=limit)
    broker.start()
    pid = broker.process.pid  # type: ignore[union-attr]
    hogs: list[socket.socket] = []
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert create(admin, ["kept"], 1) == {"kept": 0}
        kept = WireClient(broker.host, broker.port)
        assert produce_code(kept, "kept", b"before") == (0, 0)

        # All but 48 descriptors taken (fewer than the 64 a new partition log leaves free).
        hog_descriptors(broker, limit - 48, hogs)
        codes = create(AdminClient({"bootstrap.servers": broker.bootstrap}), ["refused"], 4)
        assert codes == {"refused": KafkaError.KAFKA_STORAGE_ERROR}
        # The topic is recorded; its logs are made when used, which cannot be now: the partition's
        # error, on a connection that stays open and goes on serving the partitions there are.
        c = WireClient(broker.host, broker.port)
        assert produce_code(c, "refused", b"no room")[0] == KafkaError.KAFKA_STORAGE_ERROR
        assert produce_code(c, "kept", b"during") == (0, 1)
        versions = c.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert versions.error_code == 0
        c.close()

        # None left (accept fails: the connections beyond wait in the backlog), those there served.
        deadline = time.monotonic() + 30
        while "accepting on" not in broker.logs():
            assert time.monotonic() < deadline, open_descriptors(pid)
            hog_descriptors(broker, min(limit, open_descriptors(pid) + 8), hogs)
        assert produce_code(kept, "kept", b"at the limit") == (0, 2)

        for h in hogs:
            h.close()
        hogs.clear()
        deadline = time.monotonic() + 30
        while open_descriptors(pid) > 100:
            assert time.monotonic() < deadline, open_descriptors(pid)
            time.sleep(0.05)
        again = WireClient(broker.host, broker.port)  # accepted again
        assert create(AdminClient({"bootstrap.servers": broker.bootstrap}), ["after"], 4) == {"after": 0}
        assert produce_code(again, "after", b"room again") == (0, 0)
        assert produce_code(again, "refused", b"room again") == (0, 0)  # made now that it can be
        (fetched,) = again.call(FETCH, 12, fetch_body("kept", 0)).responses[0].partitions
        assert fetched.error_code == 0 and fetched.high_watermark == 3 and len(fetched.records) > 0
        again.close()
        kept.close()
        logs = broker.logs()
        assert "too many open files" in logs
        assert "Traceback" not in logs, logs[-3000:]
    finally:
        for h in hogs:
            h.close()
        broker.stop()


@pytest.mark.slow
def test_5000_partitions_survive_kill_9(tmp_path: Path) -> None:
    broker, acked = _many_unflushed(tmp_path, 100, 50)
    assert len(acked) == 5000
    t0 = time.monotonic()
    broker.start()
    try:
        print(f"restart after kill -9 with 5,000 partitions: {time.monotonic() - t0:.1f} s")
        assert read_back(broker.bootstrap, acked) == acked
        fds = len(os.listdir(f"/proc/{broker.process.pid}/fd"))  # type: ignore[union-attr]
        assert fds < 1.2 * 5000, fds
    finally:
        broker.stop()
