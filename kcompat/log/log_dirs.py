"""Several log dirs (JBOD): replicas moved between them, and dirs that fail (Kafka's LogManager,
KIP-112 and KIP-113). A mixin of LogManager, which owns the maps it works on.

Moving a replica (AlterReplicaLogDirs) goes as Kafka's future replica does:

    start_move ──► <dest>/<topic>-<p>.<uuid>-future, an empty log
    copy_step  ──► the source's batches appended to it as a follower appends (source serves on)
    caught up  ──► under the source's lock (appends wait): the last batches copied, the future
                   closed and fsynced, the source renamed <topic>-<p>.<uuid>-delete, the future
                   renamed <topic>-<p>, opened, and served from then on; the old files removed

The renames are ordered so that a crash anywhere loses nothing: a future dir next to its
partition's log is an unfinished copy (removed at start, the move starts over); a future dir
whose partition has no log is a finished one whose source was already renamed for deletion, so
it becomes the log. Two logs of one partition in two dirs is refused at start, as Kafka does.

A failed dir (an I/O error from a write, a full disk, a dir gone) is taken offline: its logs are
forgotten, their partitions answer KAFKA_STORAGE_ERROR and are never made again elsewhere (that
would serve an empty log in place of the data), and new partitions go to the dirs still online.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from kcompat.log.config import LogConfig
from kcompat.log.errors import KafkaStorageError, LogDirNotFound, OffsetOutOfRange
from kcompat.log.log_files import fsync_dir, partition_dir_name
from kcompat.log.partition_log import PartitionLog

log = logging.getLogger("kcompat.log")

TP = tuple[str, int]
FUTURE_DIR_SUFFIX = "-future"
DELETE_DIR_SUFFIX = "-delete"
COPY_BYTES = 1 << 20  # per copy step: the source's lock is never held long, the loop never waits
_FUTURE_NAME = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)\.[0-9a-f]{32}-future$")


def suffixed_dir_name(topic: str, partition: int, suffix: str) -> str:
    """`<topic>-<partition>.<uuid>-future|-delete`, cut to 255 bytes as Kafka names them."""
    tail = f"-{partition}.{uuid.uuid4().hex}{suffix}"
    return topic[: 255 - len(tail)] + tail


def parse_future_dir(name: str) -> TP | None:
    m = _FUTURE_NAME.match(name)
    return None if m is None else (m.group("topic"), int(m.group("partition")))


def copy_some(source: PartitionLog, future: PartitionLog, now_ms: int) -> bool:
    """Copy the source's next batches (COPY_BYTES at most) to the future; True once it holds all."""
    start, end = source.log_start_offset, source.log_end_offset
    if future.log_end_offset < start or future.log_end_offset > end:
        future.restart_at(start, now_ms=now_ms)  # retention or DeleteRecords moved past it
    at = future.log_end_offset
    if at < end:
        try:
            piece = source.read(at, min(COPY_BYTES, future.config.segment_bytes))  # one append: one segment
        except OffsetOutOfRange:
            return False  # the log start moved meanwhile: the next step starts from there
        if 0 <= piece.first_offset < at:  # the log start is inside a batch: the whole batch
            future.restart_at(piece.first_offset, now_ms=now_ms)
        future.append_as_follower(piece.read_bytes(), now_ms=now_ms, gaps=True)
    if future.log_start_offset < start <= future.log_end_offset:
        future.delete_records_before(start)
    return future.log_end_offset >= source.log_end_offset


class LogDirs:
    # Set by LogManager.__init__.
    log_dirs: list[Path]
    clock: Callable[[], int]
    _lock: threading.Lock
    _logs: dict[TP, PartitionLog]
    _dir_of: dict[TP, Path]
    _partition_counts: dict[Path, int]
    offline_dirs: dict[Path, str]  # a failed dir -> what failed
    _offline: dict[TP, Path]  # partitions whose log is in a failed dir
    _futures: dict[TP, PartitionLog]
    restarted_moves: dict[TP, Path]  # unfinished copies found at start (the move starts over)
    directory_ids: dict[Path, str]

    def config_for(self, topic: str) -> LogConfig:
        raise NotImplementedError

    def _write_checkpoints(self, d: Path) -> None:
        raise NotImplementedError

    def _check_directory_ids(self) -> None:
        """kafka-storage's rule: two log dirs never share a directory.id (one copied from another)."""
        seen: dict[str, Path] = {}
        for d, directory_id in self.directory_ids.items():
            if directory_id in seen:
                raise KafkaStorageError(
                    f"log dirs {seen[directory_id]} and {d} have the same directory.id {directory_id} in "
                    f"meta.properties: remove the directory.id line from one of them (a new one is written)"
                )
            seen[directory_id] = d

    # --- lookups ---

    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def future_of(self, topic: str, partition: int) -> PartitionLog | None:
        return self._futures.get((topic, partition))

    def moving(self) -> list[TP]:
        return list(self._futures)

    def offline_error(self, topic: str, partition: int) -> KafkaStorageError | None:
        d = self._offline.get((topic, partition)) if self._offline else None
        if d is None:
            return None
        return KafkaStorageError(f"{topic}-{partition} is in the offline log dir {d}")

    # --- failed dirs ---

    def fail_dir(self, d: Path, reason: str) -> list[TP]:
        """Take log dir `d` offline; the partitions it held (none when it already was)."""
        with self._lock:
            if d in self.offline_dirs or d not in self._partition_counts:
                return []
            self.offline_dirs[d] = reason
            gone = [tp for tp, at in self._dir_of.items() if at == d]
            for tp in gone:
                del self._logs[tp], self._dir_of[tp]
                self._offline[tp] = d
            for tp, future in list(self._futures.items()):
                if future.directory.parent == d:
                    del self._futures[tp]  # a move into a failed dir ends; the source serves on
            self._partition_counts[d] = 0
        log.error(
            "log dir %s is offline (%s): its %d partition(s) answer KAFKA_STORAGE_ERROR, the other "
            "log dirs serve on; replace the disk (or free space) and restart the broker",
            d,
            reason,
            len(gone),
        )
        return gone

    def held_offline(self, topic: str, partition: int) -> bool:
        """At start, for a partition the metadata has: True (and it answers KAFKA_STORAGE_ERROR)
        when it has no log and a log dir failed at start-up, which may hold it."""
        tp = (topic, partition)
        if tp in self._logs or not self.offline_dirs:
            return False
        self._offline.setdefault(tp, next(iter(self.offline_dirs)))
        return True

    def fail_dir_of(self, topic: str, partition: int, reason: str) -> list[TP]:
        d = self._dir_of.get((topic, partition))
        return [] if d is None else self.fail_dir(d, reason)

    # --- moves ---

    def start_move(self, topic: str, partition: int, destination: str) -> bool | None:
        """AlterReplicaLogDirs for one partition: True when a copy into `destination` is under way,
        False when the log is there already, None when this broker has no log of it. Raises
        LogDirNotFound (not one of log.dirs) or KafkaStorageError (that dir or the log is offline)."""
        d = next((x for x in self.log_dirs if str(x) == destination), None)
        if d is None:
            raise LogDirNotFound(f"Failed to find the log directory {destination}")
        if d in self.offline_dirs:
            raise KafkaStorageError(f"Log directory {destination} is offline")
        if (err := self.offline_error(topic, partition)) is not None:
            raise err
        tp = (topic, partition)
        with self._lock:
            if tp not in self._logs:
                return None
            future = self._futures.get(tp)
            if future is not None:
                if future.directory.parent == d:
                    return True
                del self._futures[tp]  # another destination now: that copy is dropped
                shutil.rmtree(future.directory, ignore_errors=True)
            if self._dir_of[tp] == d:
                return False
            try:
                self._futures[tp] = PartitionLog(
                    d / suffixed_dir_name(topic, partition, FUTURE_DIR_SUFFIX),
                    topic,
                    partition,
                    self.config_for(topic),
                    now_ms=self.clock(),
                    clean_shutdown=True,
                )
            except OSError as e:
                raise KafkaStorageError(
                    f"cannot create the future log of {topic}-{partition} in {d}: {e}"
                ) from e
            return True

    def restart_moves(self) -> None:
        for (topic, partition), d in self.restarted_moves.items():
            self.start_move(topic, partition, str(d))

    def copy_step(self, topic: str, partition: int) -> bool:
        """(Worker thread, never beside deletion or close) one step of a move; True once it is over
        (finished, or nothing left to move)."""
        tp = (topic, partition)
        source, future = self._logs.get(tp), self._futures.get(tp)
        if source is None or future is None:
            return True
        if not copy_some(source, future, self.clock()):
            return False
        self._finish_move(tp, source, future)
        return True

    def _finish_move(self, tp: TP, source: PartitionLog, future: PartitionLog) -> None:
        topic, partition = tp
        src_dir, dst_dir = source.directory.parent, future.directory.parent
        with source.lock:  # appends wait until the copy takes over
            now = self.clock()
            while not copy_some(source, future, now):
                pass
            future.close()  # fsynced: once the source is renamed below it is the only copy
            doomed = src_dir / suffixed_dir_name(topic, partition, DELETE_DIR_SUFFIX)
            os.rename(source.directory, doomed)
            fsync_dir(src_dir)
            final = dst_dir / partition_dir_name(topic, partition)
            os.rename(future.directory, final)
            fsync_dir(dst_dir)
            moved = PartitionLog(
                final,
                topic,
                partition,
                self.config_for(topic),
                now_ms=now,
                recovery_point=future.log_end_offset,
                log_start_offset=future.log_start_offset,
                clean_shutdown=True,
            )
            moved.first_dirty_offset = max(
                moved.log_start_offset, min(source.first_dirty_offset, moved.log_end_offset)
            )
            moved.checkpointed_hw, moved.replicated_hw = source.checkpointed_hw, source.replicated_hw
            source.retired = True  # an append that held the old log retries on this one
            with self._lock:
                self._logs[tp] = moved
                self._dir_of[tp] = dst_dir
                self._partition_counts[src_dir] -= 1
                self._partition_counts[dst_dir] += 1
                self._futures.pop(tp, None)
        self._write_checkpoints(src_dir)
        self._write_checkpoints(dst_dir)
        # Readers still holding the old log keep their open descriptors; the files go now.
        shutil.rmtree(doomed, ignore_errors=True)
        log.info("%s-%d moved from %s to %s", topic, partition, src_dir, dst_dir)

    def drop_future(self, topic: str, partition: int) -> None:
        future = self._futures.pop((topic, partition), None)
        if future is not None:
            with contextlib.suppress(OSError, KafkaStorageError):  # its dir may be the one failing
                future.close(sync=False)
            shutil.rmtree(future.directory, ignore_errors=True)

    def _settle_futures(self, found: list[tuple[Path, TP]], now_ms: int) -> None:
        """At start: an unfinished copy is removed (its move starts over, restarted_moves), a
        finished one whose source was renamed for deletion becomes the partition's log."""
        for path, tp in found:
            d = path.parent
            if tp in self._logs:
                shutil.rmtree(path, ignore_errors=True)
                self.restarted_moves[tp] = d
                continue
            final = d / partition_dir_name(*tp)
            os.rename(path, final)
            fsync_dir(d)
            log.info("%s-%d: the copy moved into %s before the last stop is its log now", *tp, d)
            self._logs[tp] = PartitionLog(final, tp[0], tp[1], self.config_for(tp[0]), now_ms=now_ms)
            self._dir_of[tp] = d
            self._partition_counts[d] += 1
