"""LogManager: every partition log in the broker's log dirs (Kafka's LogManager).

A log dir, as Kafka 3.x/4.x lays it out:

    <log dir>/
        meta.properties                    cluster.id, directory.id, node.id, version=1
        .kafka_cleanshutdown               present only between a clean stop and the next start
        recovery-point-offset-checkpoint   topic partition offset   (checkpoints.py)
        log-start-offset-checkpoint        topic partition offset
        cleaner-offset-checkpoint          topic partition offset   (compacted logs only)
        replication-offset-checkpoint      topic partition high watermark   (replicated logs only)
        <topic>-<partition>/               one PartitionLog each

Start-up loads every partition directory; without the clean-shutdown marker, logs are recovered
from their checkpointed recovery points. The marker is then removed, so a crash from here on is
seen as unclean. `close()` flushes and closes every log, writes the checkpoints, then the marker.
A close given a deadline stops there (between two logs, or while the filesystem sync runs on in a
`sync -f` process of its own): no checkpoint and no marker are written, the files are as a crash
leaves them, and the next start recovers them, so a stop is prompt however much is unwritten.

High watermarks (cluster mode): a log's checkpointed one is kept as `checkpointed_hw` until the
image makes it a replica (partition.py starts its high watermark there rather than at the log
start, so a restarted leader under strict min-ISR does not hide what was committed, nor a follower
report less). Only replicated logs are written: a single node's high watermark is its log end.
`checkpoint_high_watermarks()` is called every replica.high.watermark.checkpoint.interval.ms.

The server calls `run_maintenance(now_ms)` periodically from a worker thread: retention, flushes
due by flush.ms or rolls, producer-id expiry, checkpoints, and the epoch checkpoints
that new leaders kept in memory once records carry their epoch (so that a clean stop finds them
written: what a stop costs is mostly such file creations). Compaction is `run_cleaner(now_ms)`, on
the cleaner's own cadence (log.cleaner.backoff.ms).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kcompat.kafka_uuid import random_uuid_base64
from kcompat.log.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offsets,
    write_offsets,
)
from kcompat.log.cleaner import LogCleaner
from kcompat.log.config import LogConfig
from kcompat.log.errors import KafkaStorageError, LoadAborted
from kcompat.log.log_dirs import DELETE_DIR_SUFFIX, LogDirs, parse_future_dir
from kcompat.log.log_files import LEFT_SYNCING as LEFT_SYNCING  # re-exported (tests)
from kcompat.log.log_files import (
    STRAY_DIR_SUFFIX,
    atomic_write,
    fsync_dir,
    parse_partition_dir,
    partition_dir_name,
    stray_dir_name,
    sync_filesystem,
    sync_filesystem_until,
)
from kcompat.log.meta_properties import META_PROPERTIES as META_PROPERTIES
from kcompat.log.meta_properties import META_VERSION, write_properties
from kcompat.log.meta_properties import check_meta_properties as check_meta_properties
from kcompat.log.meta_properties import read_properties as read_properties
from kcompat.log.partition_log import PartitionLog
from kcompat.log.segment_files import RESERVED, SEGMENT_FILES

log = logging.getLogger("kcompat.log")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
FD_RESERVE = RESERVED  # descriptors new partitions leave free for connections and index maps


def open_file_limit() -> int:
    """The soft RLIMIT_NOFILE (the process raises it to the hard limit at start)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


def open_descriptors() -> int | None:
    """How many descriptors this process has open (Linux's /proc), or None where that is not known."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogManager(LogDirs):
    def __init__(
        self,
        log_dirs: list[Path] | list[str],
        default_config: LogConfig,
        *,
        cluster_id: str,
        node_id: int,
        topic_configs: dict[str, LogConfig] | None = None,
        clock: Callable[[], int] = _wall_clock_ms,
        abort: threading.Event | None = None,
        recovery_threads: int = 1,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.clock = clock
        self._fd_limit = open_file_limit()
        self._recovery_threads = max(1, recovery_threads)  # num.recovery.threads.per.data.dir
        self._abort = abort  # set by another thread: stop loading between two partitions (LoadAborted)
        self.cleaner = LogCleaner()
        self._lock = threading.Lock()
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        self._partition_counts: dict[Path, int] = dict.fromkeys(self.log_dirs, 0)
        self._unsynced_dirs: set[Path] = set()  # log dirs with partition dirs created since the last sync
        self.directory_ids: dict[Path, str] = {}
        self.offline_dirs: dict[Path, str] = {}
        self._offline: dict[tuple[str, int], Path] = {}
        self._futures: dict[tuple[str, int], PartitionLog] = {}
        self.restarted_moves: dict[tuple[str, int], Path] = {}
        futures: list[tuple[Path, tuple[str, int]]] = []
        now = clock()
        for d in self.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
                self.directory_ids[d] = self._ensure_meta_properties(d)
                if not self._load_dir(d, now, futures) and self._partition_counts[d]:  # none: no sync
                    # What recovery cut and re-indexed (and the epochs it found) is written back before
                    # the checkpoints below move every recovery point to its log end (syncfs: slow, busy disk).
                    sync_filesystem(d)
            except OSError as e:  # Kafka: a dir that cannot be read at start is offline, the rest serve
                self.fail_dir(d, f"{type(e).__name__} at start-up: {e.strerror or e}")
        if not self.online_dirs():
            raise KafkaStorageError("every log dir is offline (see above): nothing can be served")
        self._check_directory_ids()
        self._settle_futures(futures, now)
        if self._fd_limit < 2 * len(self._logs) + 4 * FD_RESERVE:
            log.warning(
                "the open file limit (%d) is low for the %d partitions here: at most %d segment files "
                "are kept open, and a partition idle longer than that many others reopens its file when "
                "used (raise the limit: ulimit -n, LimitNOFILE=)",
                self._fd_limit,
                len(self._logs),
                SEGMENT_FILES.bound,
            )
        for d in self.online_dirs():
            marker = d / CLEAN_SHUTDOWN_FILE
            if marker.exists():
                marker.unlink()
            self._write_checkpoints(d)

    # --- start-up ---

    def _ensure_meta_properties(self, d: Path) -> str:
        path = d / META_PROPERTIES
        props = check_meta_properties(d, self.cluster_id, self.node_id)
        if props is not None and "directory.id" in props and props.get("version") == str(META_VERSION):
            return props["directory.id"]
        directory_id = random_uuid_base64()
        write_properties(
            path,
            {
                "cluster.id": self.cluster_id,
                "node.id": str(self.node_id),
                "version": str(META_VERSION),
                "directory.id": directory_id,
            },
        )
        return directory_id

    def _load_dir(self, d: Path, now_ms: int, futures: list[tuple[Path, tuple[str, int]]]) -> bool:
        """Open every partition of `d`; True when it was shut down cleanly."""
        clean = (d / CLEAN_SHUTDOWN_FILE).exists()
        recovery_points = read_offsets(d / RECOVERY_POINT_CHECKPOINT) or {}
        log_starts = read_offsets(d / LOG_START_OFFSET_CHECKPOINT) or {}
        cleaner_offsets = read_offsets(d / CLEANER_OFFSET_CHECKPOINT) or {}
        high_watermarks = read_offsets(d / REPLICATION_OFFSET_CHECKPOINT) or {}
        entries = sorted(os.listdir(d))
        if not clean and any(parse_partition_dir(e) for e in entries):
            log.info("%s was not shut down cleanly: recovering its logs from their recovery points", d)
        found: list[tuple[Path, tuple[str, int]]] = []
        for entry in entries:
            path = d / entry
            if not path.is_dir():
                continue
            if entry.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)  # a deletion interrupted by a crash
                continue
            if entry.endswith(STRAY_DIR_SUFFIX):  # moved aside at an earlier start: kept, never served
                log.warning("loaded stray log: %s", path)
                continue
            tp = parse_partition_dir(entry)
            if tp is not None:
                if tp in self._dir_of:  # Kafka refuses to start on this too
                    raise KafkaStorageError(
                        f"{tp[0]}-{tp[1]} has a log in both {self._dir_of[tp]} and {d}: remove the one in "
                        f"the dir that failed most recently, then start again"
                    )
                found.append((path, tp))
            elif (tp := parse_future_dir(entry)) is not None:
                futures.append((path, tp))

        def open_log(item: tuple[Path, tuple[str, int]]) -> PartitionLog:
            if self._abort is not None and self._abort.is_set():
                raise LoadAborted(f"stopped while opening the logs of {d}")
            path, (topic, partition) = item
            return PartitionLog(
                path,
                topic,
                partition,
                self.config_for(topic),
                now_ms=now_ms,
                recovery_point=recovery_points.get((topic, partition), 0),
                log_start_offset=log_starts.get((topic, partition), 0),
                clean_shutdown=clean,
            )

        # Threads overlap the file I/O of different partitions (and the CRC-32C of large batches,
        # which the crc32c package computes without the GIL).
        with ThreadPoolExecutor(self._recovery_threads, thread_name_prefix="log-recovery") as pool:
            opened = (
                list(pool.map(open_log, found)) if self._recovery_threads > 1 else list(map(open_log, found))
            )
        for (_, tp), plog in zip(found, opened, strict=True):
            if tp in cleaner_offsets:
                plog.first_dirty_offset = max(
                    plog.log_start_offset, min(cleaner_offsets[tp], plog.log_end_offset)
                )
            if tp in high_watermarks:
                plog.checkpointed_hw = high_watermarks[tp]
            self._logs[tp] = plog
            self._dir_of[tp] = d
            self._partition_counts[d] += 1
        return clean

    # --- partitions ---

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        config_of: Callable[[], LogConfig] | None = None,
    ) -> PartitionLog:
        """The partition's log, made now if it has none. `config_of` is read under the lock that
        set_config takes: a config read before an AlterConfigs that lands while a worker thread
        makes the log would otherwise be the one the new log (and the topic) keeps."""
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            return existing
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if config_of is not None:
                config = config_of()
            if config is not None:
                self.topic_configs[topic] = config
            if (offline := self.offline_error(topic, partition)) is not None:
                raise offline  # never an empty log elsewhere in place of the data
            counts, online = self._partition_counts, self.online_dirs()
            if not online:
                raise KafkaStorageError(
                    f"cannot create the log of {topic}-{partition}: every log dir is offline"
                )
            d = min(online, key=lambda x: counts[x])  # Kafka: the dir with the fewest partitions
            try:
                plog = PartitionLog(
                    d / partition_dir_name(topic, partition),
                    topic,
                    partition,
                    self.config_for(topic),
                    now_ms=self.clock(),
                    clean_shutdown=True,
                )
            except OSError as e:
                raise KafkaStorageError(f"cannot create the log of {topic}-{partition}: {e}") from e
            self._unsynced_dirs.add(d)
            fd = plog.active_segment.log.fd
            if fd >= self._fd_limit - FD_RESERVE:
                # Linux hands out the lowest free descriptor: this one's number says how many are
                # in use. The last ones are kept for connections and index maps, so that the broker
                # goes on serving what it has (Kafka would fail with "Too many open files" anywhere).
                plog.delete_files()
                raise KafkaStorageError(
                    f"cannot create the log of {topic}-{partition}: too many open files "
                    f"({fd} in use of the limit of {self._fd_limit}, {FD_RESERVE} kept for connections)"
                )
            self._logs[tp] = plog
            self._dir_of[tp] = d
            counts[d] += 1
            return plog

    def check_room(self, new_logs: int) -> None:
        """KafkaStorageError unless `new_logs` more partition logs can be made: they hold no lasting
        descriptor (segment files go through the bounded cache), but making one opens its file, so
        the descriptors must not be all but gone (to connections and index maps) already."""
        in_use = open_descriptors()
        if in_use is not None and in_use + FD_RESERVE >= self._fd_limit:
            raise KafkaStorageError(
                f"too many open files for {new_logs} new partition log(s): {in_use} in use of the limit "
                f"of {self._fd_limit}, {FD_RESERVE} kept for connections"
            )

    def sync_new_logs(self) -> None:
        """Make the partition directories created since the last call durable: one fsync per log dir
        for any number of them (Kafka flushes the parent dir per created log; a batch pays once)."""
        with self._lock:
            dirs, self._unsynced_dirs = self._unsynced_dirs, set()
        for d in dirs:
            try:
                fsync_dir(d)
            except OSError as e:
                raise KafkaStorageError(f"cannot sync {d}: {e}") from e

    def set_config(self, topic: str, config: LogConfig) -> None:
        """Apply a changed topic config (AlterConfigs) to its live logs (under the lock that
        get_or_create holds: a log being made meanwhile is either among them or made with it)."""
        with self._lock:
            self.topic_configs[topic] = config
            live = [plog for (t, _), plog in self._logs.items() if t == topic]
        for plog in live:
            plog.update_config(config)

    def delete(self, topic: str, partition: int | None = None) -> int:
        """Delete every partition of `topic` (or only `partition`: a replica moved away from this
        broker); returns how many were deleted."""
        with self._lock:
            doomed = [tp for tp in self._logs if tp[0] == topic and partition in (None, tp[1])]
            for tp in [tp for tp in self._offline if tp[0] == topic and partition in (None, tp[1])]:
                del self._offline[tp]
            for tp in doomed:
                self.drop_future(*tp)
                plog = self._logs.pop(tp)
                d = self._dir_of.pop(tp, None)
                if d is not None:
                    self._partition_counts[d] -= 1
                plog.delete_files()
            if not any(t == topic for t, _ in self._logs):
                self.topic_configs.pop(topic, None)
        self.checkpoint()
        return len(doomed)

    def mark_stray(self, topic: str, partition: int) -> Path | None:
        """Move aside a log the metadata no longer assigns here (Kafka 4.x LogManager at start,
        KAFKA-15355): closed and renamed `<topic>-<p>.<uuid>-stray`, never served again and never
        deleted, so a wrong image costs no data (an operator removes it). The new path, or None."""
        tp = (topic, partition)
        with self._lock:
            plog = self._logs.pop(tp, None)
            if plog is None:
                return None
            d = self._dir_of.pop(tp)
            self._partition_counts[d] -= 1
            plog.close()
            target = d / stray_dir_name(topic, partition)
            try:
                os.rename(plog.directory, target)
                fsync_dir(d)
            except OSError as e:
                raise KafkaStorageError(f"cannot move the stray log {plog.directory} aside: {e}") from e
        self._write_checkpoints(d)
        return target

    def logs(self) -> Iterator[PartitionLog]:
        return iter(list(self._logs.values()))

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._logs)

    # --- background work ---

    def run_maintenance(self, now_ms: int | None = None) -> None:
        """Retention, due flushes and checkpoints for every log (call from a worker thread)."""
        now = self.clock() if now_ms is None else now_ms
        for plog in self.logs():
            try:
                plog.run_retention(now)
                plog.maybe_flush(now)
                with plog.lock:
                    # An epoch that records now carry is written here, not left to the clean stop
                    # (Kafka writes it as the partition becomes leader; thousands of new partitions
                    # here do not pay a file each on the event loop).
                    plog.leader_epoch_cache.sync(fsync=False, log_end_offset=plog.log_end_offset)
            except (KafkaStorageError, OSError):  # a disk error, or the topic was deleted meanwhile
                log.exception("maintenance of %s-%d failed", plog.topic, plog.partition)
        self.checkpoint()

    def run_cleaner(self, now_ms: int | None = None) -> int:
        """One round of the log cleaner (worker thread); the segments it compacted."""
        cleaned = self.cleaner.clean_due(self.logs(), self.clock() if now_ms is None else now_ms)
        if cleaned:
            self.checkpoint()  # cleaner-offset-checkpoint
        return cleaned

    def checkpoint(self) -> None:
        for d in self.online_dirs():
            self._write_checkpoints(d)

    def _write_checkpoints(self, d: Path) -> None:
        mine = {tp: plog for tp, plog in list(self._logs.items()) if self._dir_of.get(tp) == d}
        write_offsets(d / RECOVERY_POINT_CHECKPOINT, {tp: p.recovery_point for tp, p in mine.items()})
        write_offsets(d / LOG_START_OFFSET_CHECKPOINT, {tp: p.log_start_offset for tp, p in mine.items()})
        write_offsets(
            d / CLEANER_OFFSET_CHECKPOINT,
            {tp: p.first_dirty_offset for tp, p in mine.items() if p.config.compact},
        )
        self._write_high_watermarks(d, mine)

    def checkpoint_high_watermarks(self) -> None:
        """Write replication-offset-checkpoint in every log dir (Kafka's checkpointHighWatermarks)."""
        for d in self.online_dirs():
            self._write_high_watermarks(
                d, {tp: p for tp, p in list(self._logs.items()) if self._dir_of.get(tp) == d}
            )

    @staticmethod
    def _write_high_watermarks(d: Path, mine: dict[tuple[str, int], PartitionLog]) -> None:
        hws = {}
        for tp, p in mine.items():
            # A log the image has not made a replica yet keeps what was checkpointed before.
            hw = p.high_watermark if p.replicated_hw is not None else p.checkpointed_hw
            if hw is not None:
                hws[tp] = hw
        write_offsets(d / REPLICATION_OFFSET_CHECKPOINT, hws)

    def close(self, deadline: float | None = None) -> bool:
        """Clean shutdown: flush and close every log, write checkpoints, leave the clean-shutdown
        marker. With a `deadline` (time.monotonic()) it may be cut short, said in one line, and
        returns False: the logs not closed yet and every log dir not synced get no checkpoint and no
        marker (closing moves recovery points to log ends that are not synced yet)."""
        logs = list(self.logs())
        for i, plog in enumerate(logs):
            if deadline is not None and time.monotonic() > deadline:
                log.warning(
                    "clean stop cut short: %d of %d logs closed; the next start recovers them", i, len(logs)
                )
                return False
            try:
                plog.close(sync=False)
            except (OSError, KafkaStorageError) as e:  # a dir failing now: the others close cleanly
                self.fail_dir(plog.directory.parent, f"{type(e).__name__} while closing: {e}")
        for tp in list(self._futures):  # an unfinished copy: it starts over next time
            self.drop_future(*tp)
        for d in self.online_dirs():
            # Every log closed above, at once: the checkpoints may then say so.
            try:
                if not sync_filesystem_until(d, deadline):
                    log.warning("clean stop cut short while syncing %s; the next start recovers its logs", d)
                    return False
                self._write_checkpoints(d)
                atomic_write(d / CLEAN_SHUTDOWN_FILE, json.dumps({"version": 0, "brokerEpoch": -1}).encode())
            except (OSError, KafkaStorageError) as e:
                self.fail_dir(d, f"{type(e).__name__} while closing: {e}")
        return True
