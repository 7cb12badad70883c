"""The replica manager (Kafka's ReplicaManager): the partition logs this broker holds, and the fetches
parked on them.

    Produce, group/offset records, DeleteRecords ──► ReplicaManager.append / delete_records
        ──► PartitionLog (kcompat.log) ──► FetchWaiters.notify(tp)   (one place wakes parked Fetches)
    Fetch, ListOffsets, OffsetForLeaderEpoch ──► ReplicaManager.partition_log ──► file slices

It owns the LogManager (opened at start, closed last) and the FetchWaiters. What a topic is (its
partitions, leader epoch and log config) it asks the metadata through two callables, so that cluster
mode can answer them from a KRaft image; replica fetchers and transaction markers append here too.

New partitions' logs are made in worker threads, never on the event loop (on a single node):
CreateTopics queues them for after its answer (create_partitions_later), and a request that
touches some before their turn awaits `await_logs` first, which makes those in one thread while
the loop serves everybody else; past the request's timeout they answer NOT_LEADER_OR_FOLLOWER
(retriable), as a Kafka broker that has not applied the topic yet.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Unpack

from kcompat.log.batch_validation import LeaderAppend
from kcompat.log.config import LogConfig
from kcompat.log.errors import KafkaStorageError, LoadAborted, LogError, LogMoved
from kcompat.log.manager import LogManager
from kcompat.log.partition_log import AppendInfo, PartitionLog
from kcompat.server.delayed_fetch import FetchWaiters
from kcompat.server.isr_port import HostedReplica, IsrPort, NoIsrChanges, ReadReplicaSelector
from kcompat.server.log_dirs import LogDirFailureChannel, LogDirMover
from kcompat.server.log_throttle import LogThrottle
from kcompat.storage.topic_store import TopicInfo

log = logging.getLogger("kcompat.server")

TP = tuple[str, int]
# How long a request without a timeout of its own (ListOffsets before v10, Fetch's floor) waits
# for its partitions' logs: well inside the clients' request.timeout.ms (30 s in Java).
UNTIMED_WAIT_S = 10.0


class LogNotReady(LogError):
    """The partition's log is still being made: retriable, as Kafka's answer for a partition its
    metadata has and its ReplicaManager does not host yet."""

    error_name = "NOT_LEADER_OR_FOLLOWER"


class ReplicaManager:
    def __init__(
        self,
        *,
        topic: Callable[[str], TopicInfo | None],
        log_config: Callable[[TopicInfo], LogConfig],
        cluster_mode: bool = False,
        isr: Callable[[ReplicaManager], IsrPort] = lambda _replicas: NoIsrChanges(),
        hosted: Mapping[tuple[str, int], HostedReplica] | None = None,
        read_replica: ReadReplicaSelector | None = None,
    ) -> None:
        """`cluster_mode`: only the image makes a replica here; `isr` builds the ISR port from the
        partitions and waiters made here (cluster/assembly.py gives the AlterPartition one);
        `hosted`: cluster mode's replicas, which its assembly fills as images arrive;
        `read_replica`: the leader's choice of a consumer's read replica (None: the leader's own)."""
        self.read_replica = read_replica
        self._topic = topic
        self._log_config = log_config
        self.logs: LogManager | None = None
        self.fetch_waiters = FetchWaiters()
        # Cluster mode: the replicas this broker hosts, leader or follower (replica_delta.py keeps
        # them in step with the image). Empty on a single node, which leads every partition itself.
        self.partitions: Mapping[tuple[str, int], HostedReplica] = {} if hosted is None else hosted
        self.cluster_mode = cluster_mode
        self.maintenance_lock = asyncio.Lock()  # maintenance, deletion, moves, close: one at a time
        self.dir_failures, self.mover = LogDirFailureChannel(self), LogDirMover(self)  # several log dirs
        self._maintenance_errors = LogThrottle(log, interval_s=60)
        # New partitions admitted by CreateTopics/CreatePartitions, created after the answer.
        self._to_create: deque[tuple[TopicInfo, range]] = deque()
        self._creator: asyncio.Task[None] | None = None
        self._pending = 0  # reserved logs not created yet (descriptor accounting)
        self._pending_lock = threading.Lock()
        self._closing = False
        # Made by the request that needed them (await_logs): each partition's making, and what it
        # refused (said once, by the next partition_log; a later await_logs tries again).
        self._making: dict[TP, asyncio.Future[dict[TP, KafkaStorageError]]] = {}
        self._refused: dict[TP, KafkaStorageError] = {}
        self._gaps = False  # a creation failed: some partition may lack its log with nothing pending
        self._make_lock = threading.Lock()  # a topic checked and its log made: one step against deletion
        # Requests first: while one waits for its logs, the background creation of others pauses.
        self._urgent = 0
        self._urgent_done = threading.Condition()
        self.isr_manager = isr(self)  # after the partitions and waiters it watches

    async def start(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        *,
        cluster_id: str,
        node_id: int,
        topic_configs: dict[str, LogConfig],
        clock: Callable[[], int],
        topics: list[TopicInfo],
        recovery_threads: int = 1,
    ) -> None:
        """Open (and recover) the logs, then every partition of `topics`, in a worker thread.
        Cancelled (SIGTERM during start-up): the thread stops between two partitions and this
        raises CancelledError once it has; nothing is marked cleanly shut down."""
        abort = threading.Event()

        def load() -> LogManager:
            logs = LogManager(
                log_dirs,
                default_config,
                cluster_id=cluster_id,
                node_id=node_id,
                topic_configs=topic_configs,
                clock=clock,
                abort=abort,
                recovery_threads=recovery_threads,
            )
            self.logs = logs
            for t in topics:
                if abort.is_set():
                    raise LoadAborted("stopped while opening the partitions")
                for p in range(t.partitions):
                    if not logs.held_offline(t.name, p):  # perhaps in a log dir that failed: never empty
                        self.open_partition(t, p)
            logs.sync_new_logs()
            logs.restart_moves()  # copies a stop cut short
            return logs

        work = asyncio.ensure_future(asyncio.to_thread(load))
        try:
            await asyncio.shield(work)
            self.mover.resume()
        except asyncio.CancelledError:
            abort.set()
            await asyncio.wait([work])
            self.logs = None  # half-opened: never closed as if it had been a clean start
            raise

    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        """The partition's log, for a request that awaited await_logs: LogNotReady while it is still
        being made, or the KafkaStorageError that refused it (said once). One nobody awaited is
        made as log_now makes it."""
        assert self.logs is not None
        plog = self.logs.get(topic, partition)
        if plog is None:
            tp = (topic, partition)
            if tp in self._making:
                raise LogNotReady(f"the log of {topic}-{partition} is still being made")
            if (refused := self._refused.pop(tp, None)) is not None:
                raise refused
            plog = self.log_now(topic, partition)
        return plog

    def log_error(self, topic: str, partition: int) -> LogError | None:
        """What partition_log would raise instead of answering (without making anything), or None."""
        if not self._making and not self._refused:
            return None if self.logs is None else self.logs.offline_error(topic, partition)
        if self.logs is not None and self.logs.get(topic, partition) is not None:
            return None
        tp = (topic, partition)
        if tp in self._making:
            return LogNotReady(f"the log of {topic}-{partition} is still being made")
        return self._refused.pop(tp, None) or (None if self.logs is None else self.logs.offline_error(*tp))

    def log_now(self, topic: str, partition: int) -> PartitionLog:
        """The partition's log, made on the caller's thread if missing: for the coordinators of the
        internal topics, which touch one partition at a time (often from a worker thread)."""
        assert self.logs is not None
        plog = self.logs.get(topic, partition)
        if plog is None:
            if (offline := self.logs.offline_error(topic, partition)) is not None:
                raise offline  # its log dir failed
            if self.cluster_mode:  # only the image makes a replica here
                raise KeyError(f"{topic}-{partition} is not hosted here")
            t = self._topic(topic)
            if t is None:
                raise KeyError(f"no topic {topic}")
            plog = self.open_partition(t, partition)
        return plog

    async def await_logs(self, tps: Iterable[TP], timeout_s: float) -> None:
        """Make the missing logs of these partitions (of topics that exist) in one worker thread and
        wait for them, at most `timeout_s`; the loop serves other connections meanwhile. Afterwards
        partition_log answers each: its log, LogNotReady while still being made, or the
        KafkaStorageError that refused it. Costs nothing when no log is waiting to be made."""
        logs = self.logs
        if self.cluster_mode or logs is None or (self._pending == 0 and not self._gaps):
            return
        have, making, topic = logs.get, self._making, self._topic
        missing = [
            tp
            for tp in tps
            if have(*tp) is None and (t := topic(tp[0])) is not None and 0 <= tp[1] < t.partitions
        ]
        if not missing:
            return
        waits = {making[tp] for tp in missing if tp in making}
        fresh = list(dict.fromkeys(tp for tp in missing if tp not in making))
        if fresh:
            waits.add(self._make_soon(logs, fresh))
        await asyncio.wait(waits, timeout=max(timeout_s, 0.0))

    def _make_soon(self, logs: LogManager, tps: list[TP]) -> asyncio.Future[dict[TP, KafkaStorageError]]:
        work = asyncio.ensure_future(asyncio.to_thread(self._make, logs, tps))
        for tp in tps:
            self._making[tp] = work
            self._refused.pop(tp, None)

        def done(work: asyncio.Future[dict[TP, KafkaStorageError]]) -> None:
            # Runs before any waiter resumes (callbacks run in the order they were added).
            for tp in tps:
                if self._making.get(tp) is work:
                    del self._making[tp]
            if work.cancelled():
                return
            if (e := work.exception()) is not None:
                log.error("making %d partition log(s) failed", len(tps), exc_info=e)
                return
            refused = work.result()
            if refused:
                self._gaps = True
                self._refused.update(refused)

        work.add_done_callback(done)
        return work

    def _make(self, logs: LogManager, tps: list[TP]) -> dict[TP, KafkaStorageError]:
        """(Worker thread) make the logs of `tps` whose topics still exist; those refused."""
        refused: dict[TP, KafkaStorageError] = {}
        with self._urgent_done:
            self._urgent += 1
        try:
            for tp in tps:
                try:
                    if not self._make_one(tp[0], tp[1]):
                        break  # closing
                except KafkaStorageError as e:
                    refused[tp] = e
        finally:
            with self._urgent_done:
                self._urgent -= 1
                self._urgent_done.notify_all()
            try:
                logs.sync_new_logs()
            except KafkaStorageError as e:
                log.warning("%s", e)
        if refused:
            (topic, p), why = next(iter(refused.items()))
            log.warning("%d partition log(s) could not be made, e.g. %s-%d: %s", len(refused), topic, p, why)
        return refused

    def _make_one(self, topic: str, partition: int, topic_id: object = None) -> bool:
        """Make one partition's log if its topic (with that id, if given) still has it; False once closing."""
        with self._make_lock:
            if self._closing:
                return False
            t = self._topic(topic)
            if t is not None and 0 <= partition < t.partitions and topic_id in (None, t.topic_id):
                self.open_partition(t, partition)
            return True

    def open_partition(self, t: TopicInfo, partition: int) -> PartitionLog:
        assert self.logs is not None
        plog = self.logs.get_or_create(t.name, partition, config_of=lambda: self._log_config(t))
        # As a new leader does in Kafka, make sure the epoch cache knows the current epoch, so that
        # OffsetForLeaderEpoch answers (epoch, log end) even before anything was appended.
        cache = plog.leader_epoch_cache
        if cache.latest_epoch < t.leader_epoch:
            cache.assign(t.leader_epoch, plog.log_end_offset, write=False)  # written by the log's next flush
        return plog

    async def make_logs(self, wanted: list[tuple[str, int, LogConfig]]) -> None:
        """Cluster mode: make the logs an image is about to assign here, in a worker thread, so that
        applying it (open_log) makes none on the event loop. One that fails is left to open_log."""
        logs = self.logs
        if not wanted or logs is None:
            return

        def make() -> None:
            try:
                for topic, partition, config in wanted:
                    with self._make_lock:
                        if self._closing:
                            return
                        logs.get_or_create(topic, partition, config)
            finally:
                logs.sync_new_logs()

        try:
            await asyncio.to_thread(make)
        except KafkaStorageError as e:
            log.warning("making the logs of %d new replica(s): %s", len(wanted), e)

    def open_log(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """The log of a replica the image assigns here, opened or created (cluster mode)."""
        assert self.logs is not None
        return self.logs.get_or_create(topic, partition, config)

    def reserve_partitions(self, count: int) -> None:
        """Admit `count` new partition logs, to be created by create_partitions_later (KafkaStorageError
        when the descriptors would run out: counted with the logs still waiting to be created)."""
        assert self.logs is not None
        with self._pending_lock:
            self.logs.check_room(self._pending + count)
            self._pending += count

    def release_partitions(self, count: int) -> None:
        """Give back a reservation whose partitions will not be created (their topic was not recorded)."""
        with self._pending_lock:
            self._pending -= count

    def create_partitions_later(self, t: TopicInfo, partitions: range) -> None:
        """Create the reserved logs of a recorded topic's new partitions in a worker thread, after the
        answer (as Kafka's controller answers once the records are committed, before any broker
        made the logs). A partition used first is created then (partition_log); one never created
        before a crash is created at the next start, which opens every recorded partition."""
        self._to_create.append((t, partitions))
        if self._creator is None or self._creator.done():
            self._creator = asyncio.get_running_loop().create_task(self._create_queued())

    async def created(self) -> None:
        """Wait until the logs admitted so far are made (DescribeLogDirs lists them all, as a Kafka
        broker does once it applied the topic records)."""
        creator = self._creator
        if creator is not None and not creator.done():
            await asyncio.shield(creator)

    async def _create_queued(self) -> None:
        # Under the maintenance lock: a topic deleted meanwhile waits for its logs to be made, then
        # drops them; one deleted before its turn is skipped (it is no longer in the metadata).
        async with self.maintenance_lock:
            while self._to_create and self.logs is not None:
                t, partitions = self._to_create.popleft()
                try:
                    await asyncio.to_thread(self._create, self.logs, t, partitions)
                except KafkaStorageError as e:  # used partitions say so themselves, when next used
                    self._gaps = True
                    log.warning("topic %s: %s", t.name, e)
                except Exception:
                    log.exception("creating the logs of topic %s failed", t.name)

    def _create(self, logs: LogManager, t: TopicInfo, partitions: range) -> None:
        left = len(partitions)  # still reserved
        try:
            for p in partitions:
                current = self._topic(t.name)
                if self._closing or current is None or current.topic_id != t.topic_id:
                    return
                with self._urgent_done:  # a request's own logs first (closing ends those too)
                    self._urgent_done.wait_for(lambda: self._urgent == 0)
                if not self._make_one(t.name, p, t.topic_id):
                    return
                with self._pending_lock:
                    self._pending -= 1
                left -= 1
        finally:
            with self._pending_lock:
                self._pending -= left
            logs.sync_new_logs()

    def append(
        self, topic: str, partition: int, batch: bytearray | memoryview, **args: Unpack[LeaderAppend]
    ) -> AppendInfo:
        """Append one batch as leader and wake the fetches parked on the partition (LogError as the log raises it)."""
        try:
            info = self.partition_log(topic, partition).append(batch, **args)
        except LogMoved:  # its copy in another log dir took over meanwhile: appended there
            info = self.partition_log(topic, partition).append(batch, **args)
        except KafkaStorageError as e:
            self.dir_failures.failed(topic, partition, e)
            raise
        if self.partitions:  # cluster mode: an ISR of the leader alone commits at once
            p = self.partitions.get((topic, partition))
            if p is not None:
                p.maybe_increment_hw()
        self.fetch_waiters.notify((topic, partition))
        return info

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Move the log start up to `offset` (DeleteRecords); the new low watermark. Parked fetches re-read."""
        low = self.partition_log(topic, partition).delete_records_before(offset)
        self.fetch_waiters.notify((topic, partition))
        return low

    async def delete_partitions(self, topic: str, partitions: int) -> None:
        """Drop a deleted topic's logs (in a worker thread); its parked fetches answer first."""
        for p in range(partitions):
            self.fetch_waiters.notify((topic, p))
            self._refused.pop((topic, p), None)
        logs = self.logs
        assert logs is not None
        async with self.maintenance_lock:
            await asyncio.to_thread(self._locked, logs.delete, topic)

    def _locked(self, work: Callable[..., object], *args: object) -> None:
        """(Worker thread) `work` with no partition log being made meanwhile (deletion, close)."""
        with self._make_lock:
            work(*args)

    async def delete_replica(self, topic: str, partition: int) -> None:
        """Drop one partition's log: this broker is no longer among its replicas (Kafka's
        StopReplica with delete); its parked fetches answer first."""
        self.fetch_waiters.notify((topic, partition))
        logs = self.logs
        assert logs is not None
        async with self.maintenance_lock:
            if (topic, partition) in self.partitions:
                return  # assigned here again meanwhile: the log is in use
            await asyncio.to_thread(logs.delete, topic, partition)

    async def mark_strays(self, strays: list[tuple[str, int]]) -> None:
        """Move aside the logs the first caught-up image assigns elsewhere (Kafka's stray replicas)."""
        logs = self.logs
        assert logs is not None

        def work() -> None:
            for tp in strays:
                if tp in self.partitions:
                    continue  # assigned here again meanwhile: the log is in use
                path = logs.mark_stray(*tp)
                if path is not None:
                    log.warning(
                        "%s-%d: not a replica here in the metadata: stray log moved aside to %s", *tp, path
                    )

        async with self.maintenance_lock:
            await asyncio.to_thread(work)

    def set_config(self, topic: str, config: LogConfig) -> None:
        assert self.logs is not None
        self.logs.set_config(topic, config)

    def set_default_config(self, config: LogConfig) -> None:
        assert self.logs is not None
        self.logs.default_config = config

    def begin_shutdown(self) -> None:
        """Parked fetches answer with what they have; nothing parks any more."""
        self.fetch_waiters.close()

    async def run_maintenance(self, now_ms: int) -> None:
        """Retention, flushes by flush.ms, checkpoints: in a worker thread."""
        await self._in_worker(lambda logs: logs.run_maintenance(now_ms), "maintenance")

    async def run_cleaner(self, now_ms: int) -> int:
        """One round of the log cleaner (worker thread); the segments it compacted."""
        return await self._in_worker(lambda logs: logs.run_cleaner(now_ms), "compaction")

    async def _in_worker(self, job: Callable[[LogManager], int | None], what: str) -> int:
        async with self.maintenance_lock:  # retention, compaction and close, one at a time
            logs = self.logs
            if logs is None:
                return 0
            work = asyncio.ensure_future(asyncio.to_thread(job, logs))
            try:
                # A cancelled task (close) cannot stop the thread: the lock is held until it is done,
                # so close() never writes the checkpoints while maintenance is still writing them.
                return await asyncio.shield(work) or 0
            except asyncio.CancelledError:
                await asyncio.wait([work])
                raise
            except (OSError, KafkaStorageError) as e:  # a failing disk: once in a while, no traceback
                self._maintenance_errors.log(logging.ERROR, what, "log %s failed: %s", what, e)
            except Exception:
                log.exception("log %s failed", what)
            return 0

    async def checkpoint_high_watermarks(self) -> None:
        """replication-offset-checkpoint in every log dir (worker thread; never beside close or maintenance)."""
        await self._in_worker(lambda logs: logs.checkpoint_high_watermarks(), "high watermark checkpoint")

    async def close(self, timeout_s: float | None = None) -> None:
        """Flush and close every log (in a worker thread), after any maintenance under way; logs
        still waiting to be created are left to the next start. Past `timeout_s` the logs are left
        as a crash leaves them, for the next start to recover (LogManager.close)."""
        self._closing = True
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            await asyncio.wait_for(self.maintenance_lock.acquire(), timeout_s)
        except TimeoutError:
            log.warning("clean stop cut short: maintenance still running; the next start recovers the logs")
            return
        try:
            if self.logs is not None:
                await asyncio.to_thread(self._locked, self.logs.close, deadline)
                self.logs = None
        finally:
            self.maintenance_lock.release()
