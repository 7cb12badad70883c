"""The exclusive lock on `<log dir>/.lock` that a broker holds for its whole life (Kafka's FileLock).

Two brokers on one log dir would both "recover" the live logs and both write the clean-shutdown
marker, so the second one to start must refuse before it touches anything. Kafka takes the lock
with FileChannel.tryLock, which on Linux is a POSIX record lock (fcntl F_SETLK) on the whole file:
this module takes the same kind of lock, so kcompat and a Kafka broker also exclude each other.

A POSIX lock belongs to the process: the kernel drops it when the process ends however it ends
(kill -9 included), and a child process does not inherit it. It is also dropped when the process
closes ANY descriptor of the file, so nothing else in kcompat may open `.lock`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import sys
from pathlib import Path

LOCK_FILE = ".lock"


class LogDirInUse(Exception):
    """Another process holds the lock of a log dir."""

    def __init__(self, directory: Path, pid: int | None) -> None:
        holder = f" (pid {pid})" if pid else ""
        super().__init__(
            f"log dir {directory} is in use by another broker process{holder}: "
            f"it holds the lock on {directory / LOCK_FILE}"
        )
        self.directory = directory
        self.pid = pid


def _holder_pid(fd: int) -> int | None:
    """The pid of the process holding a conflicting lock (F_GETLK), where the layout of
    struct flock is known; None otherwise, or when the holder is in another pid namespace."""
    if not sys.platform.startswith("linux"):
        return None
    # struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
    layout = "hhqqi"
    request = struct.pack(layout, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    request += b"\0" * (32 - len(request))
    try:
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, request)
    except OSError:
        return None
    l_type, _, _, _, pid = struct.unpack_from(layout, answer)
    return pid if l_type != fcntl.F_UNLCK and pid > 0 else None


class LogDirLock:
    """Locks for every log dir, taken in order; `release()` (or process exit) lets them go."""

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._created: list[Path] = []  # lock files this process made (none before it)

    def acquire(self, directory: Path) -> None:
        """Create the dir if needed and lock it; LogDirInUse if another process holds it,
        OSError if the dir or its lock file cannot be created or opened."""
        if directory.exists() and not directory.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "exists and is not a directory", str(directory))
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / LOCK_FILE
        existed = path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            pid = _holder_pid(fd)
            os.close(fd)
            if e.errno in (errno.EACCES, errno.EAGAIN):
                raise LogDirInUse(directory, pid) from None
            raise
        self._fds.append(fd)
        if not existed:
            self._created.append(path)

    def discard(self) -> None:
        """Release, and remove the lock files this process created: a start-up refused before it
        wrote anything leaves the dirs as it found them."""
        for path in self._created:
            path.unlink(missing_ok=True)  # still held: no other process can have taken it meanwhile
        self._created.clear()
        self.release()

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


def lock_log_dirs(directories: list[Path]) -> LogDirLock:
    """Lock every dir (all or none): LogDirInUse or OSError leave no lock behind."""
    locks = LogDirLock()
    try:
        for d in directories:
            locks.acquire(d)
    except BaseException:
        locks.release()
        raise
    return locks
