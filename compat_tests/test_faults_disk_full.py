"""Disk full: `kcompat serve` with its log dir on a 16 MiB tmpfs, produced to until nothing fits.

* producers get KAFKA_STORAGE_ERROR for the writes that do not fit: not a hang, not a crash, not a
  dropped connection;
* reads keep working, and every acknowledged record reads back intact;
* when space is freed (a filler file on the same filesystem is deleted), writes succeed again
  without a restart; after a restart everything acknowledged is still there.

The filesystem is mounted by the test (root is needed: `mount -t tmpfs`) and unmounted however the
test ends. Where mounting is impossible the test fails saying so: it is never skipped silently.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.crash.ledger import Stored, read_topic
from kcompat.testing import TEST_DEFAULTS, Broker

pytestmark = pytest.mark.timeout(180)
SIZE_MIB = 16
FILLER_MIB = 4
TOPIC = "full"
VALUE_BYTES = 20_000


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A SIZE_MIB tmpfs mounted at a temporary directory; unmounted (lazily if busy) at the end."""
    mnt = tmp_path / "small-fs"
    mnt.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MIB}m,mode=0755", "tmpfs", str(mnt)],
        capture_output=True, text=True,
    )  # fmt: skip
    if result.returncode != 0:
        pytest.fail(
            f"cannot mount a {SIZE_MIB} MiB tmpfs for the disk-full test ({result.stderr.strip() or result.returncode}); "
            "run the tests as root (or with CAP_SYS_ADMIN) to exercise a full disk",
            pytrace=False,
        )
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill_file(path: Path, mib: int) -> None:
    with open(path, "wb") as f:
        f.writelines(os.urandom(1 << 20) for _ in range(mib))


def fill_until_full(path: Path) -> None:
    """Append pages to `path` until not one more fits, and again after a pause for as long as that
    finds room (the broker frees a page now and then by replacing a checkpoint file)."""
    while True:
        added = 0
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            while os.write(fd, bytes(4096)):
                added += 1
        except OSError:
            pass  # ENOSPC
        finally:
            os.close(fd)
        if not added:
            return
        time.sleep(0.3)


def value(i: int) -> bytes:
    return (b"%08d" % i) + os.urandom(VALUE_BYTES - 8)  # incompressible, in case a codec is set


class Acks:
    def __init__(self) -> None:
        self.ok: dict[int, Stored] = {}
        self.errors: list[KafkaError] = []


def produce(
    bootstrap: str,
    start: int,
    count: int,
    acks: Acks,
    timeout: float = 30,
    topic: str = TOPIC,
    size: int = VALUE_BYTES,
) -> None:
    """`count` records, one request each, no retries: every outcome is the broker's own answer."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "retries": 0,
            "message.timeout.ms": 20000,
            "enable.idempotence": False,
            "max.in.flight": 1,
            "batch.num.messages": 1,
        }
    )
    for i in range(start, start + count):
        key, v, ts = f"k{i}".encode(), value(i)[:size], 1_700_000_000_000 + i

        def report(err: KafkaError | None, msg: object, key: bytes = key, v: bytes = v, ts: int = ts) -> None:
            if err is not None:
                acks.errors.append(err)
            else:
                offset = msg.offset()  # type: ignore[attr-defined]
                acks.ok[offset] = Stored(offset, key, v, (), ts)

        p.produce(topic, key=key, value=v, timestamp=ts, partition=0, on_delivery=report)
        p.poll(0)
    started = time.monotonic()
    left = p.flush(timeout)
    assert left == 0, f"{left} produce requests unanswered after {time.monotonic() - started:.0f}s: a hang"


def assert_all_acked_readable(broker: Broker, acks: Acks) -> None:
    got = read_topic(broker.bootstrap, TOPIC, 1)[0]
    by_offset = {s.offset: s for s in got}
    assert [s.offset for s in got] == list(range(len(got)))
    missing = [o for o in acks.ok if o not in by_offset]
    assert not missing, f"acknowledged offsets lost: {missing[:10]}"
    assert all(by_offset[o] == s for o, s in acks.ok.items())


def test_disk_full_gives_storage_errors_then_recovers(small_fs: Path) -> None:
    filler = small_fs / "filler"
    fill_file(filler, FILLER_MIB)
    broker = Broker(small_fs / "data", small_fs.parent / "broker.log", overrides=dict(TEST_DEFAULTS))
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": str(1 << 20)})])[TOPIC].result(30)

        acks = Acks()
        # 16 MiB cannot hold 20 MB of records: the disk fills in the middle of this.
        produce(broker.bootstrap, 0, 1000, acks)
        assert broker.running, "the broker died when the disk filled"
        codes = {e.code() for e in acks.errors}
        assert codes == {KafkaError.KAFKA_STORAGE_ERROR}, (
            f"expected only KAFKA_STORAGE_ERROR, got {acks.errors[:5]}"
        )
        assert 100 < len(acks.ok) < 1000
        assert_all_acked_readable(broker, acks)

        # still full (topped up to the last byte): still refused, still readable
        top_up = small_fs / "top-up"
        fill_until_full(top_up)
        before = len(acks.errors)
        produce(broker.bootstrap, 1000, 3, acks)
        assert len(acks.errors) == before + 3
        assert_all_acked_readable(broker, acks)
        assert broker.running

        # free space: writes succeed again, without a restart
        filler.unlink()
        top_up.unlink()
        ok_before = len(acks.ok)
        produce(broker.bootstrap, 2000, 50, acks)
        assert len(acks.ok) == ok_before + 50, acks.errors[-5:]
        assert_all_acked_readable(broker, acks)

        # and all of it survives a restart (clean, then a kill)
        broker.restart(clean=True)
        assert_all_acked_readable(broker, acks)
        broker.restart(clean=False)
        assert_all_acked_readable(broker, acks)
        assert broker.running
    finally:
        broker.kill()


def test_full_disk_under_the_index_pages(small_fs: Path) -> None:
    """The log's last page still has room, the index has no page yet: the next index entry would be
    a store into an unallocated page of the memory-mapped index (a SIGBUS that killed the broker).
    The records are taken (the entry is skipped), lookups still work; later writes are refused with
    KAFKA_STORAGE_ERROR and resume once there is room."""
    broker = Broker(small_fs / "data", small_fs.parent / "broker.log", overrides=dict(TEST_DEFAULTS))
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        acks = Acks()
        # about 4.3 KB in 4 batches: two log pages, the second mostly empty; the next batch is past
        # index.interval.bytes (4096) and gets the segment's first index entry
        produce(broker.bootstrap, 0, 4, acks, size=1000)
        assert len(acks.ok) == 4
        filler = small_fs / "filler"
        fill_until_full(filler)
        produce(broker.bootstrap, 4, 200, acks, size=100)
        assert broker.running, f"the broker died (exit code {broker.returncode}) writing into a full disk"
        assert {e.code() for e in acks.errors} <= {KafkaError.KAFKA_STORAGE_ERROR}, acks.errors[:5]
        assert acks.errors, "nothing was refused: the disk was not full"
        assert len(acks.ok) > 4, "the log's free room in its last page was not used"
        assert_all_acked_readable(broker, acks)
        filler.unlink()
        ok = len(acks.ok)
        produce(broker.bootstrap, 1000, 20, acks, size=100)
        assert len(acks.ok) == ok + 20, acks.errors[-3:]
        assert_all_acked_readable(broker, acks)
        broker.restart(clean=False)
        assert_all_acked_readable(broker, acks)
    finally:
        broker.kill()
