"""A full disk under the log engine (issue 8): every refusal is a KafkaStorageError with the log as
it was, never a dead process.

The sparse, memory-mapped index files are the trap: a store into a page the filesystem cannot
allocate is a SIGBUS. The first test runs the engine in a child process on a real 1 MiB tmpfs
(root only: it fails, saying so, where mounting is impossible) so that a SIGBUS shows as the
child's death instead of killing pytest. The others make one write fail on purpose.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kcompat.log.index as index_module
import kcompat.log.leader_epoch as leader_epoch_module
import kcompat.log.partition_log as partition_log_module
from kcompat.log import KafkaStorageError, LogConfig, LogManager
from kcompat.log.log_files import atomic_write
from tests.log.batches import batch

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import os, sys
    from kcompat.log import KafkaStorageError, LogConfig, LogManager
    from tests.log.batches import batch

    mnt = sys.argv[1]
    cfg = LogConfig(index_interval_bytes=100, segment_bytes=64 << 10)
    m = LogManager([mnt + "/d"], cfg, cluster_id="c", node_id=1, clock=lambda: 0)
    plog = m.get_or_create("t", 0)
    plog.append(batch(1, timestamp=1), leader_epoch=1, now_ms=0)
    fd = os.open(mnt + "/filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, bytes(4096)):
            pass
    except OSError:
        pass
    os.ftruncate(fd, os.fstat(fd).st_size - 4096)  # exactly one page left
    os.close(fd)
    ok = refused = 0
    for i in range(200):
        leo = plog.log_end_offset
        try:
            plog.append(batch(3, timestamp=10 + i), leader_epoch=1, now_ms=0)
            ok += 1
        except KafkaStorageError:
            refused += 1
            assert plog.log_end_offset == leo
    assert plog.verify() == [], plog.verify()
    end = plog.log_end_offset
    got = plog.read(0, 1 << 30)
    assert got.first_offset == 0 and len(got) == plog.size
    os.unlink(mnt + "/filler")
    plog.append(batch(2, timestamp=999), leader_epoch=2, now_ms=0)
    assert plog.log_end_offset == end + 2
    print(f"ok={ok} refused={refused}")
    """
)


@pytest.fixture
def tiny_fs(tmp_path: Path):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.fail(
            f"cannot mount a tmpfs ({r.stderr.strip()}): run as root to test a full disk", pytrace=False
        )
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_tmpfs_refuses_appends_without_killing_the_process(tiny_fs: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(tiny_fs)], cwd=tiny_fs.parent, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p)},
    )  # fmt: skip
    assert child.returncode == 0, (
        f"child died with {child.returncode} (-7 is SIGBUS):\n{child.stderr[-3000:]}"
    )
    ok, refused = (int(part.split("=")[1]) for part in child.stdout.split())
    assert ok > 0 and refused > 0


def fresh(tmp_path: Path) -> LogManager:
    return LogManager(
        [tmp_path], LogConfig(index_interval_bytes=100), cluster_id="c", node_id=1, clock=lambda: 0
    )


def enospc(*_args: object, **_kw: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_unallocatable_index_page_skips_the_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = fresh(tmp_path).get_or_create("t", 0)
    monkeypatch.setattr(index_module.os, "posix_fallocate", enospc)
    for i in range(50):
        plog.append(batch(2, timestamp=100 + i), leader_epoch=1, now_ms=0)
    assert plog.active_segment.offset_index.entries == 0  # every entry skipped, none stored
    assert plog.verify() == []
    assert plog.read(37, 10).first_offset == 36  # lookups scan from the segment start instead
    monkeypatch.undo()
    plog.append(batch(2, timestamp=500), leader_epoch=1, now_ms=0)
    plog.append(batch(2, timestamp=501), leader_epoch=1, now_ms=0)
    assert plog.active_segment.offset_index.entries > 0


def test_unwritable_leader_epoch_checkpoint_fails_the_append_before_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = fresh(tmp_path).get_or_create("t", 0)
    plog.append(batch(2), leader_epoch=1, now_ms=0)
    monkeypatch.setattr(leader_epoch_module, "atomic_write", enospc)
    size = plog.size
    with pytest.raises(KafkaStorageError):
        plog.append(batch(2), leader_epoch=2, now_ms=0)  # a new epoch must be checkpointed
    assert (plog.log_end_offset, plog.size, plog.leader_epoch_cache.latest_epoch) == (2, size, 1)
    plog.append(batch(2), leader_epoch=1, now_ms=0)  # the same epoch needs no checkpoint
    monkeypatch.undo()
    info = plog.append(batch(2), leader_epoch=2, now_ms=0)
    assert info.base_offset == 4
    assert plog.leader_epoch_cache.entries() == [(1, 0), (2, 4)]


def test_unwritable_snapshot_at_roll_does_not_fail_the_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = LogManager([tmp_path], LogConfig(segment_bytes=1000), cluster_id="c", node_id=1, clock=lambda: 0)
    plog = m.get_or_create("t", 0)
    monkeypatch.setattr(partition_log_module.ProducerStateManager, "take_snapshot", enospc)
    for _ in range(30):
        plog.append(batch(3, value_size=100), leader_epoch=1, now_ms=0)
    assert len(plog.segments) > 1
    assert plog.verify() == []


def test_atomic_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "checkpoint"
    monkeypatch.setattr(os, "fsync", enospc)
    with pytest.raises(OSError):
        atomic_write(target, b"0\n0\n")
    assert list(tmp_path.iterdir()) == []
