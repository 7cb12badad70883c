"""The broker's side of several log dirs: replicas moved between them (Kafka's
ReplicaAlterLogDirsManager) and dirs that fail (Kafka's LogDirFailureChannel).

    AlterReplicaLogDirs ──► LogDirMover.alter ──► LogManager.start_move (a future log)
        ──► one task copies every move a step at a time (worker thread, beside no deletion,
            maintenance or close), until the future takes over (log/log_dirs.py)
    an append the disk refuses ──► LogDirFailureChannel.failed ──► LogManager.fail_dir
        (parked fetches of its partitions answer now; never the last dir online)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from kcompat.log.errors import KafkaStorageError, LogError
from kcompat.log.manager import LogManager
from kcompat.server.delayed_fetch import FetchWaiters
from kcompat.server.isr_port import HostedReplica

log = logging.getLogger("kcompat.server")


class ReplicaManager(Protocol):  # what of the ReplicaManager these use
    @property
    def logs(self) -> LogManager | None: ...
    @property
    def fetch_waiters(self) -> FetchWaiters: ...
    @property
    def maintenance_lock(self) -> asyncio.Lock: ...
    @property
    def dir_failures(self) -> LogDirFailureChannel: ...
    @property
    def partitions(self) -> Mapping[tuple[str, int], HostedReplica]: ...


class LogDirFailureChannel:
    """A dir whose disk refused a read or write goes offline while another dir serves. The last
    one stays: Kafka halts then, but a single node whose only disk filled up serves reads and takes
    writes again once space is freed (compat_tests/test_faults_disk_full.py), and so does the last
    disk of several: its writes answer KAFKA_STORAGE_ERROR meanwhile."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas

    def failed(self, topic: str, partition: int, error: LogError | OSError) -> None:
        """The disk refused a read or write of this partition's log: its dir goes offline."""
        logs = self._replicas.logs
        d = None if logs is None else logs.dir_of(topic, partition)
        if d is not None:
            self.failed_dir(d, error)

    def failed_dir(self, d: Path, error: LogError | OSError) -> None:
        logs = self._replicas.logs
        if logs is None or logs.online_dirs() == [d]:
            return
        reason = error.message if isinstance(error, LogError) else f"{type(error).__name__}: {error.strerror}"
        for tp in logs.fail_dir(d, reason):
            self._replicas.fetch_waiters.notify(tp)


class LogDirMover:
    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas
        self._task: asyncio.Task[None] | None = None

    def alter(self, topic: str, partition: int, destination: str) -> str:
        """One partition of AlterReplicaLogDirs: the Kafka error name to answer (NONE when the
        move is under way or the log is there already)."""
        logs = self._replicas.logs
        assert logs is not None
        try:
            started = logs.start_move(topic, partition, destination)
        except LogError as e:
            return e.error_name
        except OSError:
            return "KAFKA_STORAGE_ERROR"
        if started is None:
            return "UNKNOWN_TOPIC_OR_PARTITION"
        if started:
            self.resume()
        return "NONE"

    def resume(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        replicas = self._replicas
        while (logs := replicas.logs) is not None and (moving := logs.moving()):
            for tp in moving:
                async with replicas.maintenance_lock:  # never beside deletion, maintenance or close
                    future = logs.future_of(*tp)
                    if replicas.logs is not logs or future is None:
                        continue
                    step = asyncio.ensure_future(asyncio.to_thread(logs.copy_step, *tp))
                    try:
                        if await asyncio.shield(step):  # cancelled: the lock is kept until the step ends
                            hosted, plog = replicas.partitions.get(tp), logs.get(*tp)
                            if hosted is not None and plog is not None:  # cluster mode: its Partition's log
                                hosted.log = plog  # type: ignore[misc]
                    except asyncio.CancelledError:
                        await asyncio.wait([step])
                        raise
                    except (KafkaStorageError, OSError) as e:
                        # Kafka: the dir that refused the copy's writes goes offline (the source serves on).
                        logs.drop_future(*tp)
                        replicas.dir_failures.failed_dir(future.directory.parent, e)
                    except LogError as e:
                        log.error("moving %s-%d to another log dir failed (%s): the move is dropped", *tp, e)
                        logs.drop_future(*tp)
