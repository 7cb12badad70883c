"""The broker's side of the group coordinator: `__consumer_offsets`, deferred answers and timers.

GroupCoordinator (kcompat.coordinator) is pure; this module gives it what it lacks:

    handler --service.run(lambda now: coordinator.join_group(now, ...))--> CoordinatorResult
       1. records  -> appended to __consumer_offsets, partition offsets_partition(group, n), one v2
                      batch per partition, before anything is answered (a client never sees state
                      that a crash, even kill -9, could lose: the page cache keeps what was written)
       2. completions -> the futures of the JoinGroup/SyncGroup handlers waiting under those tokens
       3. response -> returned; or, when deferred, the handler awaits its token's future

    timer task: sleeps until coordinator.next_deadline_ms() (woken early after every call, which may
                have moved it), then tick(now) and the same steps 1-2

The coordinator call, the append and the hand-over of completions happen with no await in
between, so requests from different connections are applied to the groups and to the log in the
same order. Nothing waits for I/O other than the page-cache write of the append.

`__consumer_offsets` is created as Kafka creates it: on first need (FindCoordinator, or the first
record to store), with offsets.topic.num.partitions partitions, cleanup.policy=compact. At start-up
an existing one is read from log start to log end and replayed into the coordinator.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kcompat.coordinator import CoordinatorConfig, CoordinatorResult, GroupCoordinator
from kcompat.coordinator import records as rec
from kcompat.coordinator.result import Completion
from kcompat.log.errors import LogError
from kcompat.server.topics import CONSUMER_OFFSETS
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import read_header, split_batches
from kcompat.wire.records import Record, build_batch, decode_batch

if TYPE_CHECKING:
    from kcompat.server.broker import Broker

log = logging.getLogger("kcompat.server.groups")

_REPLAY_READ_BYTES = 1 << 20


class CoordinatorUnavailable(Exception):
    """The broker is closing: a deferred JoinGroup/SyncGroup will not be answered by the coordinator."""


def coordinator_config(get: Callable[[str], Any]) -> CoordinatorConfig:
    """Kafka's broker settings for groups and offsets, as the coordinator's config."""

    def num(name: str) -> int:
        return int(get(name))

    return CoordinatorConfig(
        group_initial_rebalance_delay_ms=num("group.initial.rebalance.delay.ms"),
        group_min_session_timeout_ms=num("group.min.session.timeout.ms"),
        group_max_session_timeout_ms=num("group.max.session.timeout.ms"),
        group_max_size=num("group.max.size"),
        offsets_retention_minutes=num("offsets.retention.minutes"),
        offsets_retention_check_interval_ms=num("offsets.retention.check.interval.ms"),
        consumer_session_timeout_ms=num("group.consumer.session.timeout.ms"),
        consumer_heartbeat_interval_ms=num("group.consumer.heartbeat.interval.ms"),
        consumer_max_size=num("group.consumer.max.size"),
        offset_metadata_max_bytes=num("offset.metadata.max.bytes"),
        consumer_assignors=tuple(get("group.consumer.assignors")),
    )


class GroupService:
    """One per broker: `broker.group_service`. Handlers call `run`; see the module docstring."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = GroupCoordinator(coordinator_config(broker.config.get), topic_metadata=self._topic_metadata)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._wake: asyncio.Event | None = None
        self._timer: asyncio.Task[None] | None = None
        self._closed = False

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        # Settings as they stand after the broker loaded its stored dynamic configs.
        self.coordinator = GroupCoordinator(
            coordinator_config(self.broker.config.get), topic_metadata=self._topic_metadata
        )
        t = self.broker.topic(CONSUMER_OFFSETS)
        if t is not None:
            now = self.broker.now_ms()
            pairs = await asyncio.to_thread(self._read_all, t.partitions)
            self.coordinator.load(pairs, now)
            if pairs:
                log.info("loaded %d record(s) of %s: %d group(s)", len(pairs), CONSUMER_OFFSETS,
                         len(self.coordinator.groups))
        self._wake = asyncio.Event()
        self._timer = asyncio.create_task(self._timer_loop())

    async def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            try:
                await self._timer
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("group coordinator timer failed")
            self._timer = None
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(CoordinatorUnavailable())
        self._waiting.clear()

    def _read_all(self, partitions: int) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) of __consumer_offsets, partition by partition, oldest first.

        A record that does not decode is logged and left out rather than stopping the broker.
        """
        out: list[tuple[bytes, bytes | None]] = []
        for p in range(partitions):
            plog = self.broker.partition_log(CONSUMER_OFFSETS, p)
            offset, end = plog.log_start_offset, plog.log_end_offset
            while offset < end:
                data = memoryview(plog.read(offset, _REPLAY_READ_BYTES).read_bytes())
                spans = split_batches(data)
                if not spans:
                    break
                for pos, size in spans:
                    h = read_header(data, pos)
                    offset = h.base_offset + h.last_offset_delta + 1
                    if h.is_control:
                        continue
                    try:
                        _, records = decode_batch(data[pos : pos + size])
                    except DecodeError as e:
                        log.error("skipping an unreadable batch at %s-%d offset %d: %s", CONSUMER_OFFSETS, p,
                                  h.base_offset, e)
                        continue
                    for r in records:
                        if r.key is None:
                            continue
                        try:
                            rec.decode((r.key, r.value))
                        except DecodeError as e:
                            log.error("skipping record %s-%d@%d: %s", CONSUMER_OFFSETS, p, r.offset, e)
                            continue
                        out.append((r.key, r.value))
        return out

    # --- requests ------------------------------------------------------------------------------

    async def ensure_topic(self) -> int:
        """The partition count of __consumer_offsets, creating the topic first if need be."""
        t = self.broker.topic(CONSUMER_OFFSETS)
        if t is None:
            t = await self.broker.auto_create_topic(CONSUMER_OFFSETS)
        return t.partitions

    async def run(self, call: Callable[[int], CoordinatorResult[Any]], *, creates: bool = True) -> Any:
        """Call the coordinator with the current time, store and deliver what it did, and return the
        answer (waiting for it when the call was deferred). Raises CoordinatorUnavailable when the
        broker closes first.

        `creates=False` for calls that only read (ListGroups goes to every broker, and must not
        create __consumer_offsets); they can still fire timers, but only of groups that exist,
        and a group exists only after a call that created the topic.
        """
        if self._closed:
            raise CoordinatorUnavailable()
        if creates or self._has_state():
            await self.ensure_topic()
        result = call(self.broker.now_ms())
        self._apply(result.records, result.completions)
        if result.response is not None or result.token is None:
            return result.response
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[result.token] = fut
        try:
            return await fut
        finally:
            self._waiting.pop(result.token, None)

    def _apply(self, records: list[rec.Record], completions: Iterable[Completion]) -> None:
        if records:
            self._append(records)
        for c in completions:
            fut = self._waiting.pop(c.token, None)
            if fut is not None and not fut.done():
                fut.set_result(c.response)
        if self._wake is not None:
            self._wake.set()

    def _append(self, records: list[rec.Record]) -> None:
        t = self.broker.topic(CONSUMER_OFFSETS)
        if t is None:  # deleted under us (it cannot be through the APIs); nothing to keep them in
            log.error("%s is missing; %d group record(s) not stored", CONSUMER_OFFSETS, len(records))
            return
        now = self.broker.now_ms()
        by_partition: dict[int, list[Record]] = {}
        for key, value in records:
            decoded = rec.decode_key(key)
            assert decoded is not None
            part = by_partition.setdefault(rec.offsets_partition(rec.group_of(decoded), t.partitions), [])
            part.append(Record(len(part), now, key, value))
        codec = int(self.broker.config.get("offsets.topic.compression.codec"))
        for p, recs in by_partition.items():
            batch = bytearray(build_batch(recs, compression=codec))
            try:
                self.broker.partition_log(CONSUMER_OFFSETS, p).append(batch, leader_epoch=t.leader_epoch, now_ms=now)
            except LogError as e:
                # Kafka would fail the request; the coordinator has applied it already, so the most
                # useful thing left is to say loudly what a restart would lose.
                log.error("cannot store %d group record(s) in %s-%d: %s", len(recs), CONSUMER_OFFSETS, p, e)

    # --- time ----------------------------------------------------------------------------------

    async def _timer_loop(self) -> None:
        # A plain Event wait with a call_later that sets it: asyncio.wait_for in Python 3.11 can
        # swallow a cancellation that arrives as its inner wait completes, which would hang close().
        wake = self._wake
        assert wake is not None
        loop = asyncio.get_running_loop()
        while True:
            wake.clear()
            deadline = self.coordinator.next_deadline_ms()
            if deadline is not None and deadline <= self.broker.now_ms():
                try:
                    await self.tick()
                except Exception:
                    log.exception("group coordinator timer failed")
                await asyncio.sleep(0.001)  # let everyone else run, even if a timer stays due
                continue
            timer = None if deadline is None else loop.call_later((deadline - self.broker.now_ms()) / 1000, wake.set)
            try:
                await wake.wait()  # the deadline, or a call that may have moved it
            finally:
                if timer is not None:
                    timer.cancel()

    async def tick(self) -> None:
        """Fire every coordinator timer that is due now (the timer task does this on its own)."""
        if self._has_state():
            await self.ensure_topic()
        t = self.coordinator.tick(self.broker.now_ms())
        self._apply(t.records, t.completions)

    def _has_state(self) -> bool:
        return bool(self.coordinator.groups or self.coordinator.offsets)

    # --- what the coordinator asks of the broker -----------------------------------------------

    def _topic_metadata(self) -> Mapping[str, tuple[uuid.UUID, int]]:
        return {t.name: (t.topic_id, t.partitions) for t in self.broker.topics.all()}

    def partition_exists(self, topic: str, partition: int) -> bool:
        t = self.broker.topic(topic)
        return t is not None and 0 <= partition < t.partitions
