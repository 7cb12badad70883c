"""File names inside a partition directory, as Kafka's LogFileUtils spells them.

<topic>-<partition>/
    00000000000000000000.log          record batches, byte for byte as produced (offsets patched)
    00000000000000000000.index        sparse offset index
    00000000000000000000.timeindex    sparse time index
    00000000000000000000.txnindex     aborted transactions (only once one is aborted there)
    00000000000000001234.snapshot     producer state as of offset 1234
    leader-epoch-checkpoint
with suffixes .cleaned (compaction output being written), .swap (complete, replacing older
segments) and .deleted (on its way out) appended to a segment's file names.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kcompat.log.errors import KafkaStorageError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

_DIR_NAME = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def offset_name(offset: int) -> str:
    """The 20-digit zero-padded offset that names segment and snapshot files."""
    return f"{offset:020d}"


def log_path(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (offset_name(base_offset) + LOG_SUFFIX + suffix)


def index_path(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (offset_name(base_offset) + INDEX_SUFFIX + suffix)


def time_index_path(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (offset_name(base_offset) + TIME_INDEX_SUFFIX + suffix)


def txn_index_path(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (offset_name(base_offset) + TXN_INDEX_SUFFIX + suffix)


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / (offset_name(offset) + SNAPSHOT_SUFFIX)


class PartitionFile:
    """Base of the objects that own one file of a partition (segment files, indexes, checkpoints).

    The path is kept as an interned (directory, name) pair and a Path built on demand: a broker
    holds thousands of partitions with four or five files each, and a Path per file (parts list,
    cached string) or even a full path string per file cost ~100-300 bytes; interned, every file
    of a partition shares one directory string and most segments share their names
    ("00000000000000000000.index")."""

    __slots__ = ("_dir", "_name")

    @property
    def path(self) -> Path:
        return Path(self._dir, self._name)

    @path.setter
    def path(self, path: Path | str) -> None:
        d, name = os.path.split(os.fspath(path))
        self._dir, self._name = sys.intern(d), sys.intern(name)

    @property
    def _path(self) -> str:
        """The path as a str, for os calls."""
        return os.path.join(self._dir, self._name)


def offset_from_name(name: str) -> int:
    """The offset a file name starts with ("00000000000000000042.log.swap" -> 42)."""
    return int(name.split(".", 1)[0])


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


STRAY_DIR_SUFFIX = "-stray"


def stray_dir_name(topic: str, partition: int) -> str:
    """`<topic>-<partition>.<uuid>-stray`, the topic cut so the name stays within 255 bytes (as Kafka names it)."""
    tail = f"-{partition}.{uuid.uuid4().hex}{STRAY_DIR_SUFFIX}"
    return topic[: 255 - len(tail)] + tail


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) for a partition directory name; None for anything else (or a '-delete' dir)."""
    m = _DIR_NAME.match(name)
    if not m:
        return None
    return m.group("topic"), int(m.group("partition"))


def make_dir(directory: Path) -> bool:
    """Create `directory` (and its parents); False when it was already there."""
    try:
        directory.mkdir(parents=True)
    except FileExistsError:
        return False
    return True


def fsync_dir(directory: Path) -> None:
    """Make renames and creations in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """fsync the file at `path` (gone already: nothing to make durable)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_syncfs: Callable[[int], int] | None = None
_syncfs_loaded = False


def _load_syncfs() -> Callable[[int], int] | None:
    """libc's syncfs through ctypes, loaded on first use: a start with nothing to recover needs
    neither ctypes nor the library lookup."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:  # not glibc: look it up (ctypes.util runs ldconfig or the compiler to find it)
        import ctypes.util

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        except OSError:
            return None
    fn: Callable[[int], int] | None = getattr(libc, "syncfs", None)
    return fn


def sync_filesystem(directory: Path) -> None:
    """Write back everything written to the filesystem holding `directory` (Linux syncfs(2), else
    sync(2)): one call instead of an fsync per file, for thousands of partitions at once."""
    global _syncfs, _syncfs_loaded
    if not _syncfs_loaded:
        _syncfs, _syncfs_loaded = _load_syncfs(), True
    if _syncfs is None:
        os.sync()
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            import ctypes

            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(directory))
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write to `<path>.tmp`, fsync, rename over `path`: a crash leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # a partial file must not hold on to the space that ran out
        raise
    os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


LEFT_SYNCING: list[subprocess.Popen[bytes]] = []  # `sync -f` processes a close stopped waiting for


def sync_filesystem_until(directory: Path, deadline: float | None) -> bool:
    """sync_filesystem, given up at `deadline` (False then). The sync runs in a `sync -f` process:
    a thread of ours in syncfs could not be stopped (the wait is uninterruptible) and would hold
    the process's exit until the disk caught up; a process left behind just finishes on its own."""
    if deadline is None:
        sync_filesystem(directory)
        return True
    try:
        proc = subprocess.Popen(
            ["sync", "--file-system", str(directory)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
        )
    except OSError:  # no sync(1) here: in this process, then
        sync_filesystem(directory)
        return True
    try:
        code = proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        LEFT_SYNCING.append(proc)  # let be: it ends on its own, after this process perhaps
        return False
    if code != 0:
        raise KafkaStorageError(f"cannot sync {directory}: sync -f exited with {code}")
    return True
