"""The share-partitions this broker leads (Kafka's SharePartitionManager): their state, loaded
through the Persister, the share sessions, acquisition and acknowledgement, and the lock timer.

    ShareFetch ──► acknowledge (piggy-backed) ──► write_state ──► acquire from the log ──► answer
    ShareAcknowledge ──► acknowledge ──► write_state ──► answer
    lock timer: sleeps until the earliest acquisition lock runs out, releases, writes the state

An acknowledgement is answered only after the persister took its changes, so an answered
acknowledgement survives a crash. A share-partition is loaded on first use: read_state, or, when the
persister knows nothing of it, initialize_state at the offset share.auto.offset.reset names
(latest: the high watermark, earliest: the log start).

Cluster mode: a share-partition is this broker's only while the leader epoch it was loaded at is the
partition's current one. Once leadership moved (even away and back) it is dropped and read again
from the share coordinator, and its writes carry the epoch it was loaded at, so a deposed leader's
late writes (an expired lock, a member leaving) are fenced (FENCED_LEADER_EPOCH) instead of
overwriting what the new leader acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kcompat.coordinator.share.in_flight import Acquired, ShareLimits, StateBatch, Transition
from kcompat.coordinator.share.share_partition import SharePartition
from kcompat.log.log_file import EMPTY_SLICE, FetchSlice
from kcompat.server.share.persister import (
    Persister,
    PersisterStateBatch,
    SharePartitionKey,
    ShareStateWrite,
)
from kcompat.server.share.share_fetch_reader import ShareRead, read_batches
from kcompat.server.share.share_sessions import ShareSession, ShareSessionCache
from kcompat.storage.topic_store import TopicInfo
from kcompat.wire.error_codes import ErrorCode

log = logging.getLogger("kcompat.server.share")

SpKey = tuple[str, uuid.UUID, int]  # group id, topic id, partition
READ_FLOOR = 1 << 20  # bytes a share fetch reads from a partition's log at least (one batch at least)
READ_PER_RECORD = 2048  # and per record it may still acquire


class GroupSettings:
    """A share group's settings: its group config overrides, else the broker's."""

    __slots__ = ("auto_offset_reset", "limits", "read_committed")

    def __init__(self, setting: Callable[[str], Any], overrides: Mapping[str, str]) -> None:
        def num(group_key: str, broker_key: str) -> int:
            v = overrides.get(group_key)
            return int(v) if v is not None else int(setting(broker_key))

        self.limits = ShareLimits(
            delivery_count_limit=num("share.delivery.count.limit", "group.share.delivery.count.limit"),
            max_record_locks=num(
                "share.partition.max.record.locks", "group.share.partition.max.record.locks"
            ),
            lock_duration_ms=num("share.record.lock.duration.ms", "group.share.record.lock.duration.ms"),
        )
        self.auto_offset_reset = overrides.get("share.auto.offset.reset", "latest")
        self.read_committed = overrides.get("share.isolation.level", "read_uncommitted") == "read_committed"


class SharePartitionManager:
    def __init__(
        self,
        *,
        now_ms: Callable[[], int],
        setting: Callable[[str], Any],
        persister: Persister,
        partition_log: Callable[[str, int], Any],
        by_id: Callable[[uuid.UUID], TopicInfo | None],
        leader_epoch: Callable[[TopicInfo, int], int],
        notify: Callable[[str, int], None],
        group_overrides: Callable[[str], Mapping[str, str]],
    ) -> None:
        self.now_ms = now_ms
        self._setting = setting
        self.persister = persister
        self._partition_log = partition_log
        self._by_id = by_id
        self._leader_epoch = leader_epoch
        self._notify = notify  # wakes ShareFetches parked on a partition whose records came back
        self._overrides = group_overrides
        self.partitions: dict[SpKey, SharePartition] = {}
        self._epochs: dict[SpKey, int] = {}  # the leader epoch each share-partition was loaded at
        # ... and its state epoch: a reset (AlterShareGroupOffsets) initializes the state at the next
        # one, and the share coordinator fences writes at an older one (FENCED_STATE_EPOCH)
        self._state_epochs: dict[SpKey, int] = {}
        self._loading: dict[SpKey, asyncio.Future[SharePartition | ErrorCode]] = {}
        # One write at a time per share-partition, made when its turn comes: a write computed while
        # another is in flight could carry a start offset behind it, and the share coordinator
        # would move the start back over batches it had already pruned.
        self._writing: dict[SpKey, asyncio.Lock] = {}
        self.sessions = ShareSessionCache(int(setting("group.share.max.share.sessions")))
        self._wake: asyncio.Event | None = None
        self._sleeping_until: int | None = None  # the deadline the lock timer sleeps to (None: none)
        self._timer: asyncio.Task[None] | None = None
        self._releasing: set[asyncio.Task[None]] = set()  # releases after a connection closed
        self._closed = False

    def settings(self, group_id: str) -> GroupSettings:
        return GroupSettings(self._setting, self._overrides(group_id))

    # --- life cycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._timer = asyncio.create_task(self._timer_loop())

    async def close(self) -> None:
        self._closed = True
        if self._wake is not None:
            self._wake.set()
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None
        for task in list(self._releasing):
            task.cancel()

    # --- share-partitions ------------------------------------------------------------------------

    async def share_partition(
        self, group_id: str, t: TopicInfo, partition: int
    ) -> SharePartition | ErrorCode:
        """The share-partition, loaded from the persister on first use."""
        key = (group_id, t.topic_id, partition)
        sp = self.partitions.get(key)
        settings = self.settings(group_id)
        if sp is not None and self._deposed(key):
            sp = None  # leadership moved since it was loaded: what it held may be stale
        if sp is not None:
            sp.limits = settings.limits  # group configs take effect at once
            return sp
        loading = self._loading.get(key)
        if loading is not None:
            return await asyncio.shield(loading)
        fut: asyncio.Future[SharePartition | ErrorCode] = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            result = await self._load(key, t, partition, settings)
        except Exception:
            log.exception("share-partition %s-%d of group %s failed to load", t.name, partition, group_id)
            result = ErrorCode.UNKNOWN_SERVER_ERROR
        finally:
            del self._loading[key]
        if isinstance(result, SharePartition):
            self.partitions[key] = result
        fut.set_result(result)
        return result

    async def _load(
        self, key: SpKey, t: TopicInfo, partition: int, settings: GroupSettings
    ) -> SharePartition | ErrorCode:
        pkey = SharePartitionKey(key[0], t.topic_id.bytes, partition)
        self._epochs[key] = epoch = self._leader_epoch(t, partition)
        read = await self.persister.read_state(pkey, epoch)
        self._state_epochs[key] = read.state_epoch if read.error_code == ErrorCode.NONE else 0
        sp = SharePartition(0, settings.limits)
        plog = self._partition_log(t.name, partition)
        if read.error_code == ErrorCode.NONE and read.start_offset >= 0:
            sp.load(
                read.start_offset,
                (
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in read.state_batches
                ),
            )
            sp.reset_to(plog.log_start_offset)
            return sp
        start = plog.log_start_offset if settings.auto_offset_reset == "earliest" else plog.high_watermark
        if read.error_code == ErrorCode.NONE:
            # Initialized without an offset (Kafka's coordinator writes -1 on assignment, or a reset to
            # "latest"/"earliest" leaves it so): share.auto.offset.reset decides, the next write keeps it.
            sp.load(start, ())
            return sp
        # Kafka's share coordinator answers INVALID_REQUEST for a share-partition never initialized.
        if read.error_code not in (ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            return ErrorCode.of(read.error_code)
        err = await self.persister.initialize_state(pkey, 0, start)
        if err != ErrorCode.NONE:
            return ErrorCode.of(err)
        sp.load(start, ())
        return sp

    # --- acknowledging ---------------------------------------------------------------------------

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        t: TopicInfo,
        partition: int,
        batches: Iterable[tuple[int, int, list[int]]],
    ) -> ErrorCode:
        sp = await self.share_partition(group_id, t, partition)
        if isinstance(sp, ErrorCode):
            return sp
        err, transition = sp.begin_acknowledge(member_id, list(batches), self.now_ms())
        if err != ErrorCode.NONE or transition is None:
            return err
        # Shielded: a request cancelled meanwhile (its connection closed) must not leave the
        # transition open, its records neither acquirable nor expiring, for good.
        return await asyncio.shield(self._settle(group_id, t, partition, sp, transition))

    async def _settle(
        self, group_id: str, t: TopicInfo, partition: int, sp: SharePartition, transition: Transition
    ) -> ErrorCode:
        """Store the transition, in its share-partition's turn, then commit or roll it back."""
        key = (group_id, t.topic_id, partition)
        async with self._writing.setdefault(key, asyncio.Lock()):
            try:
                err = await self._write(
                    group_id, t, partition, sp, (transition.first, transition.last), transition
                )
            except BaseException:
                sp.rollback(transition)
                raise
            if self.partitions.get(key) is not sp:
                return err  # dropped meanwhile (leadership moved): read again from what is stored
            if err == ErrorCode.NONE:
                sp.commit(transition)
            else:
                # Not stored, and the member told so: its records go back to it as they were (its
                # lock keeps running), not acknowledged in memory only (Kafka rolls back too).
                sp.rollback(transition)
        self._notify(t.name, partition)  # released records are available now, or not at all
        if (deadline := sp.next_deadline_ms()) is not None:
            self._arm(deadline)  # a rolled-back lock may run out before the timer's wake-up
        return err

    async def _write(
        self,
        group_id: str,
        t: TopicInfo,
        partition: int,
        sp: SharePartition,
        span: tuple[int, int],
        transition: Transition | None = None,
    ) -> ErrorCode:
        """The span's runs to the persister; with `transition`, only that acknowledgement's runs."""
        batches = tuple(
            PersisterStateBatch(b.first, b.last, b.state, b.delivery_count)
            for b in sp.state_batches(*span, transition)
        )
        key = (group_id, t.topic_id, partition)
        write = ShareStateWrite(
            state_epoch=self._state_epochs.get(key, 0),
            leader_epoch=self._epochs.get(key, self._leader_epoch(t, partition)),
            start_offset=sp.settled_start_offset(transition),
            delivery_complete_count=sp.delivery_complete_count(transition),
            state_batches=batches,
        )
        err = await self.persister.write_state(
            SharePartitionKey(group_id, t.topic_id.bytes, partition), write
        )
        return ErrorCode.of(err)

    # --- acquiring -------------------------------------------------------------------------------

    def acquire(
        self,
        sp: SharePartition,
        member_id: str,
        t: TopicInfo,
        partition: int,
        max_records: int,
        max_bytes: int,
        read_committed: bool,
        *,
        strict: bool = False,
    ) -> tuple[list[Acquired], FetchSlice]:
        """Acquire `max_records` for the member from the log (`strict`: never more; else to the end
        of the batch holding the last, KIP-1206); the batches holding them, as file slices."""
        if max_records <= 0 or not sp.can_acquire():
            return [], EMPTY_SLICE
        plog = self._partition_log(t.name, partition)
        if sp.next_fetch_offset() < plog.log_start_offset:
            sp.reset_to(plog.log_start_offset)
        offset = sp.next_fetch_offset()
        if offset > plog.log_end_offset:
            return [], EMPTY_SLICE
        # Slice about what max_records can use, not the whole of MaxBytes (50 MiB from Java); the
        # headers are walked only as far as the acquisition goes.
        budget = min(max_bytes, max(READ_FLOOR, max_records * READ_PER_RECORD))
        read: ShareRead = read_batches(plog, offset, budget, read_committed)
        now = self.now_ms()
        acquired = sp.acquire(member_id, read.batches(), max_records, now, strict=strict)
        if not acquired:
            return [], EMPTY_SLICE
        self._arm(now + sp.limits.lock_duration_ms)
        return acquired, read.acquired_slice(acquired)

    # --- releasing -------------------------------------------------------------------------------

    async def release_member(self, group_id: str, member_id: str) -> None:
        """A member left the group or closed its share session: its records go back."""
        for (gid, tid, partition), sp in list(self.partitions.items()):
            if gid != group_id or self._deposed((gid, tid, partition)):
                continue
            span = sp.release_member(member_id)
            if span is not None:
                await self._after_release(gid, tid, partition, sp, span)

    def connection_closed(self, connection_id: str) -> None:
        """A client connection closed: its share sessions go, and their members' acquired records
        come back at once (as Kafka's ShareSessionCache does on disconnect), not at lock expiry."""
        gone = self.sessions.remove_connection(connection_id)
        if gone and not self._closed:
            task = asyncio.get_running_loop().create_task(self._release_sessions(gone))
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

    async def _release_sessions(self, sessions: list[ShareSession]) -> None:
        for s in sessions:
            try:
                await self.release_member(s.group_id, s.member_id)
            except Exception:
                log.exception(
                    "releasing the records of share member %s of group %s failed", s.member_id, s.group_id
                )

    async def _after_release(
        self, group_id: str, topic_id: uuid.UUID, partition: int, sp: SharePartition, span: tuple[int, int]
    ) -> None:
        t = self._by_id(topic_id)
        if t is None:
            return
        self._notify(t.name, partition)
        async with self._writing.setdefault((group_id, topic_id, partition), asyncio.Lock()):
            err = await self._write(group_id, t, partition, sp, span)
        if err != ErrorCode.NONE:
            log.warning(
                "share state of group %s on %s-%d not written (%s); released records are available here "
                "but a restart may show them as they were",
                group_id,
                t.name,
                partition,
                err.name,
            )

    def _arm(self, deadline: int) -> None:
        """A lock runs out at `deadline`: wake the timer only when that is before its own wake-up,
        so a busy share fetch path does not make it rescan every partition each time."""
        if self._wake is not None and (self._sleeping_until is None or deadline < self._sleeping_until):
            self._wake.set()

    async def _timer_loop(self) -> None:
        assert self._wake is not None
        while not self._closed:  # a cancel that wait_for swallowed (3.11) still ends the loop
            deadlines = [d for sp in self.partitions.values() if (d := sp.next_deadline_ms()) is not None]
            self._wake.clear()
            self._sleeping_until = min(deadlines) if deadlines else None
            if deadlines:
                delay = max(0.0, (min(deadlines) - self.now_ms()) / 1000)
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                    continue
                except TimeoutError:
                    pass
            else:
                await self._wake.wait()
                continue
            now = self.now_ms()
            for (gid, tid, partition), sp in list(self.partitions.items()):
                if self._deposed((gid, tid, partition)):
                    continue
                span = sp.expire_locks(now)
                if span is not None:
                    try:
                        await self._after_release(gid, tid, partition, sp, span)
                    except Exception:
                        log.exception("share lock expiry of group %s failed", gid)

    async def delete_group(self, group_id: str) -> ErrorCode:
        """Forget the group's share-partitions here and in the persister (DeleteGroups)."""
        for topic_id, partition, _ in self.group_partitions(group_id):
            err = await self.persister.delete_state(SharePartitionKey(group_id, topic_id.bytes, partition))
            if err != ErrorCode.NONE:
                return ErrorCode.of(err)
            self.drop((group_id, topic_id, partition))
            self._writing.pop((group_id, topic_id, partition), None)  # its writes are moot now
        return ErrorCode.NONE

    def _deposed(self, key: SpKey) -> bool:
        """Leadership moved since the share-partition was loaded: it is dropped (the new leader
        owns the state; this broker reads it again if leadership comes back)."""
        t = self._by_id(key[1])
        if t is not None and self._epochs.get(key) == self._leader_epoch(t, key[2]):
            return False
        self.drop(key)
        return True

    def drop(self, key: SpKey) -> None:
        """Forget what was loaded of the share-partition: read again from the persister on next use."""
        self.partitions.pop(key, None)
        self._epochs.pop(key, None)
        self._state_epochs.pop(key, None)

    def group_partitions(self, group_id: str) -> list[tuple[uuid.UUID, int, SharePartition]]:
        return [(tid, p, sp) for (gid, tid, p), sp in self.partitions.items() if gid == group_id]
