"""The leader epoch cache: which leader epoch began at which offset (Kafka's LeaderEpochFileCache).

Persisted in the partition directory as `leader-epoch-checkpoint`, a checkpoint file (see
checkpoints.py) whose entries are `epoch startOffset`:

    0
    2
    0 0
    3 1200

It answers OffsetForLeaderEpoch (`end_offset_for_epoch`) and is kept in step with the log: appends
in a new epoch add an entry, truncation drops entries past the new end, and retention / DeleteRecords
move the first entry's start offset up to the new log start.
"""

from __future__ import annotations

import bisect
import logging
import os
from pathlib import Path

from kcompat.log.checkpoints import decode_checkpoint, encode_checkpoint
from kcompat.log.errors import KafkaStorageError
from kcompat.log.log_files import LEADER_EPOCH_CHECKPOINT, PartitionFile, atomic_write, fsync_dir

log = logging.getLogger("kcompat.log")

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache(PartitionFile):
    # Slots: one of these per partition (or per segment), thousands of them in a broker.
    __slots__ = ("_disk", "_epochs", "_starts", "_sync", "_unwritten", "unsynced")

    def __init__(self, directory: Path, *, sync: bool = True) -> None:
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self._sync = sync
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self.unsynced = False  # written by assign() but not yet fsynced: see sync()
        self._unwritten = False  # assigned with write=False: in memory only until sync()
        self._disk: list[tuple[int, int]] | None = None  # while _unwritten: what a start would read
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        entries = decode_checkpoint(data, 2)
        if entries is None:
            log.warning("ignoring malformed %s; it is rebuilt from batch headers", self.path)
            return
        for e, o in entries:
            self._epochs.append(int(e))
            self._starts.append(int(o))

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int, *, write: bool = True) -> None:
        """Record that `epoch` starts at `start_offset` if it is newer than the latest known epoch.

        write=False keeps it in memory until sync() (a partition becoming leader: thousands at once
        must not create a file each; lost in a crash, it is assigned again at the next start)."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return
        epochs, starts = list(self._epochs), list(self._starts)
        # Entries at or past the new start cannot be right any more (Kafka's assign does the same).
        while starts and starts[-1] >= start_offset:
            epochs.pop()
            starts.pop()
        epochs.append(epoch)
        starts.append(start_offset)
        # First: when the disk refuses, nothing changes. Not fsynced here (Kafka stopped doing so
        # too): a new partition or a new epoch would pay an fsync each; the owning log calls sync()
        # before it moves its recovery point, and until then a crash replays the batches whose
        # headers carry the epochs anyway.
        if write:
            self._write(epochs, starts, sync=False)
        elif not self._unwritten:
            # The file holds what memory held until now (or, missing or malformed, reads as that).
            self._disk = self.entries()
        self._epochs, self._starts = epochs, starts
        if write:
            self.unsynced = self._sync
        else:
            self._unwritten = True

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers (Kafka's endOffsetFor).

        The end offset of an epoch is the start offset of the next larger epoch; for the latest
        epoch it is the log end offset; an epoch larger than all known gets (-1, -1).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that was current at `offset`, or UNDEFINED_EPOCH."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated to it)."""
        n = bisect.bisect_left(self._starts, end_offset)
        if n < len(self._starts):
            del self._epochs[n:], self._starts[n:]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop older epochs, move the one in force up to it."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0:
            return
        changed = i > 1 or self._starts[0] != start_offset
        del self._epochs[: i - 1], self._starts[: i - 1]
        self._starts[0] = start_offset
        if changed:
            self.flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self.flush()

    def flush(self) -> None:
        self._write(self._epochs, self._starts)

    def sync(self, *, fsync: bool = True, log_end_offset: int | None = None) -> None:
        """Write what assign(write=False) kept, and fsync what assign() wrote (the file, then its
        directory for the rename); fsync=False when the caller syncs the filesystem itself.

        With `log_end_offset` (a clean close, maintenance), entries starting there are left out, as
        the next start drops them (truncate_from_end): an epoch no record carries yet is assigned
        again when the log next leads. The file is then written only when that changes what it
        holds, so a stop writes nothing for a partition that became leader but got no record in
        its epoch."""
        if self._unwritten and log_end_offset is not None:
            epochs, starts = self._epochs, self._starts
            n = bisect.bisect_left(starts, log_end_offset)
            carried = list(zip(epochs[:n], starts[:n], strict=True))
            if carried != (self._disk or []):
                self._write(epochs[:n], starts[:n], sync=False)
                self.unsynced = self._sync
            # Entries no record carries yet stay in memory only (still to be written).
            self._unwritten = n < len(epochs)
            self._disk = carried if self._unwritten else None
        elif self._unwritten:
            self._write(self._epochs, self._starts, sync=False)
            self.unsynced = self._sync
        if not fsync or not self.unsynced:
            return
        try:
            fd = os.open(self._path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(self.path.parent)
        except OSError as e:
            raise KafkaStorageError(f"cannot sync {self.path}: {e}") from e
        self.unsynced = False

    def _write(self, epochs: list[int], starts: list[int], *, sync: bool | None = None) -> None:
        sync = self._sync if sync is None else sync
        try:
            lines = (f"{e} {o}" for e, o in zip(epochs, starts, strict=True))
            atomic_write(self.path, encode_checkpoint(lines), sync=sync)
        except OSError as e:
            raise KafkaStorageError(f"cannot write {self.path}: {e}") from e
        self._unwritten = False
        self._disk = None
        if sync:
            self.unsynced = False
