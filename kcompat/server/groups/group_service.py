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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kcompat.coordinator.config import CoordinatorConfig
from kcompat.log.errors import LogError
from kcompat.server.groups.group_log import log_rebalances
from kcompat.server.groups.offsets_topic import OffsetsTopic
from kcompat.server.groups.shard_port import AllGroupsHere, GroupShardsPort
from kcompat.storage.topic_store import CONSUMER_OFFSETS, TopicInfo
from kcompat.wire.error_codes import ErrorCode

if TYPE_CHECKING:
    from kcompat.coordinator.coordinator import GroupCoordinator
    from kcompat.coordinator.group_store import Group
    from kcompat.coordinator.records import Record
    from kcompat.coordinator.result import Completion, CoordinatorResult
    from kcompat.coordinator.share.share_group import ShareGroup, ShareGroups
    from kcompat.server.groups.group_configs import GroupConfigs

log = logging.getLogger("kcompat.server.groups")


class CoordinatorUnavailable(Exception):
    """The broker is closing: a deferred JoinGroup/SyncGroup will not be answered by the coordinator."""


class NotCoordinator(Exception):
    """Cluster mode: the shard of a waiting JoinGroup/SyncGroup was unloaded (group_shards.py)."""


@dataclass(frozen=True, slots=True)
class GroupsSnapshot:
    """What the admin listener (console pages, /metrics) reads of the groups, and never changes:
    the groups this broker coordinates (the coordinator's own table: read it before the next await)
    and a copy of each group's committed offsets by (topic, partition)."""

    groups: Mapping[str, Group]
    committed: Mapping[str, Mapping[tuple[str, int], int]]


def _refused(refuse: Callable[[ErrorCode], Any] | None, code: ErrorCode) -> Any:
    if refuse is None:
        raise CoordinatorUnavailable()
    return refuse(code)


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
        streams_initial_rebalance_delay_ms=num("group.streams.initial.rebalance.delay.ms"),
        streams_assignment_interval_ms=num("group.streams.assignment.interval.ms"),
    )


class GroupService:
    """One per broker: `broker.group_service`. Handlers call `run`; see the module docstring.

    It sees the broker only through narrow ports: `now_ms` (the clock), `setting` (broker configs by
    name), `offsets_topic` (`__consumer_offsets`), `topic` and `topics` (the topic table, for
    KIP-848 assignments and for rejecting commits to unknown partitions), and `shards`: which
    groups it coordinates and when a write is durable (shard_port.py), built from this service.
    """

    def __init__(
        self,
        *,
        now_ms: Callable[[], int],
        setting: Callable[[str], Any],
        offsets_topic: OffsetsTopic,
        topic: Callable[[str], TopicInfo | None],
        topics: Callable[[], Iterable[TopicInfo]],
        shards: Callable[[GroupService], GroupShardsPort] = AllGroupsHere,
        configs: GroupConfigs | None = None,
    ) -> None:
        self.now_ms = now_ms
        # The configs set on each group (ConfigResource 32); read on every heartbeat, so a change
        # applies at once to a running group.
        self.configs = configs
        self._setting = setting
        self.offsets_topic = offsets_topic
        self._topic = topic
        self._topics = topics
        self._config: CoordinatorConfig | None = None
        self._coordinator: GroupCoordinator | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._wake: asyncio.Event | None = None
        self._timer: asyncio.Task[None] | None = None
        self._closed = False
        # A single node serves every group; cluster mode the shards it leads (cluster/group_shards.py).
        self.shards = shards(self)

    @property
    def share_groups(self) -> ShareGroups:
        """The share groups (kcompat.server.share drives them; their records are replayed here)."""
        return self.coordinator.share_groups

    def share_group(self, group_id: str) -> ShareGroup | None:
        """The share group of that id, for the other groups' handlers (builds no share service)."""
        return self.coordinator.share_groups.groups.get(group_id)

    def share_deadline_ms(self) -> int | None:
        c = self._coordinator
        return None if c is None else c.share_groups.next_deadline_ms()

    def _share_session_timeout_ms(self, group_id: str) -> int:
        value = (
            None if self.configs is None else self.configs.overrides(group_id).get("share.session.timeout.ms")
        )
        return int(value if value is not None else self._setting("group.share.session.timeout.ms"))

    @property
    def coordinator(self) -> GroupCoordinator:
        """Built, and its package loaded, on first use: the first group request, or the replay of
        an existing __consumer_offsets at start (a broker without groups never loads it)."""
        if self._coordinator is None:
            assert self._config is not None, "GroupService.start() reads the coordinator's config"
            from kcompat.coordinator.coordinator import GroupCoordinator

            self._coordinator = GroupCoordinator(
                self._config,
                topic_metadata=self._topic_metadata,
                group_overrides=None if self.configs is None else self.configs.overrides,
                share_session_timeout_ms=self._share_session_timeout_ms,
            )
            self.wake()  # the timer task now has deadlines to watch
        return self._coordinator

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        # Read here, once: the settings as they stand after the broker loaded its stored dynamic
        # configs. The coordinator itself is built on first use (the `coordinator` property).
        self._config = coordinator_config(self._setting)
        if self.offsets_topic.exists():
            now = self.now_ms()
            pairs = await asyncio.to_thread(self.offsets_topic.read_all)
            self.coordinator.load(pairs, now)
            for producer_id, txn_pairs in self.offsets_topic.pending_txn.items():
                self.coordinator.txn_offsets.replay(producer_id, txn_pairs)
            if pairs:
                log.info(
                    "loaded %d record(s) of %s: %d group(s)",
                    len(pairs),
                    CONSUMER_OFFSETS,
                    len(self.coordinator.groups),
                )
        self._wake = asyncio.Event()
        self._timer = asyncio.create_task(self._timer_loop())

    async def close(self) -> None:
        self._closed = True
        await self.shards.close()
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

    # --- requests ------------------------------------------------------------------------------

    async def ensure_topic(self) -> int:
        """The partition count of __consumer_offsets, creating the topic first if need be."""
        return await self.offsets_topic.ensure()

    async def run(
        self,
        call: Callable[[int], CoordinatorResult[Any]],
        *,
        creates: bool = True,
        producer: tuple[int, int] | None = None,
        group: str | None = None,
        refuse: Callable[[ErrorCode], Any] | None = None,
        committed: bool = False,
    ) -> Any:
        """Call the coordinator with the current time, store and deliver what it did, and return the
        answer (waiting for it when the call was deferred). When the broker closes first:
        `refuse(COORDINATOR_NOT_AVAILABLE)`, as Kafka answers once its coordinator is not active
        (CoordinatorUnavailable without `refuse`).

        `creates=False` for calls that only read (ListGroups goes to every broker, and must not
        create __consumer_offsets); they can still fire timers, but only of groups that exist,
        and a group exists only after a call that created the topic. `producer` (id, epoch): the
        records go in that producer's transactional batches (TxnOffsetCommit).

        Cluster mode: `group` is the one group the call acts on; when this broker does not serve it
        (now), `refuse(error)` is the answer (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), as it
        is when the call's records fail to replicate. `committed`: the call reads committed offsets,
        so what was written before it is replicated first. Without `refuse`, a failure closes the
        connection (CoordinatorUnavailable).
        """
        if self._closed:  # Kafka's coordinator, no longer active, answers COORDINATOR_NOT_AVAILABLE
            return _refused(refuse, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        code = await self.shards.admit(group, creates=creates, committed=committed)
        if code != ErrorCode.NONE:
            return _refused(refuse, code)
        result = call(self.now_ms())
        code = await self._apply(result.records, result.completions, producer)
        if code != ErrorCode.NONE:
            return _refused(refuse, code)
        if result.response is not None or result.token is None:
            return result.response
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[result.token] = fut
        try:
            return await fut
        except (NotCoordinator, CoordinatorUnavailable):  # unloaded, or every shard is at close
            return _refused(refuse, ErrorCode.NOT_COORDINATOR)
        finally:
            self._waiting.pop(result.token, None)

    async def _apply(
        self,
        records: list[Record],
        completions: Iterable[Completion],
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode:
        """Store `records`, then (cluster mode: once they are replicated) hand the completions over."""
        code = ErrorCode.NONE
        if records and (short := self.shards.short_isr(records)):
            # Kafka's coordinator appends with acks=all: NOT_ENOUGH_REPLICAS, which it answers as
            # COORDINATOR_NOT_AVAILABLE, nothing stored; the state the call changed is rolled back
            # by loading the shard again (its JoinGroup/SyncGroup waiting get NOT_COORDINATOR).
            log.warning(
                "%s partition(s) %s: ISR below min.insync.replicas; %d group record(s) refused",
                CONSUMER_OFFSETS,
                short,
                len(records),
            )
            for p in short:
                self.shards.reload(p)
            records, code = [], ErrorCode.COORDINATOR_NOT_AVAILABLE
        if records:
            try:
                written = self.offsets_topic.append(records, self.now_ms(), producer)
            except LogError as e:  # cluster mode only (single node logs and goes on)
                log.error("cannot store %d group record(s) in %s: %s", len(records), CONSUMER_OFFSETS, e)
                written, code = {}, ErrorCode.NOT_COORDINATOR
                self.shards.reload_for(records)
            log_rebalances(records)
            if written:
                code = await self.shards.replicated(written)
        for c in completions:
            fut = self._waiting.pop(c.token, None)
            if fut is not None and not fut.done():
                fut.set_result(c.response)
        self.wake()
        return code

    def wake(self) -> None:
        """The timers may have moved: the timer task looks again."""
        if self._wake is not None:
            self._wake.set()

    def fail_waiting(self, tokens: Iterable[int]) -> None:
        """Their shard was unloaded: the JoinGroup/SyncGroup waiting under `tokens` get NOT_COORDINATOR."""
        for token in tokens:
            fut = self._waiting.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_exception(NotCoordinator())

    # --- time ----------------------------------------------------------------------------------

    async def _timer_loop(self) -> None:
        # A plain Event wait with a call_later that sets it: asyncio.wait_for in Python 3.11 can
        # swallow a cancellation that arrives as its inner wait completes, which would hang close().
        wake = self._wake
        assert wake is not None
        loop = asyncio.get_running_loop()
        while True:
            wake.clear()
            c = self._coordinator
            deadline = None if c is None else c.next_deadline_ms()
            if deadline is not None and deadline <= self.now_ms():
                try:
                    await self.tick()
                except Exception:
                    log.exception("group coordinator timer failed")
                await asyncio.sleep(0.001)  # let everyone else run, even if a timer stays due
                continue
            timer = None if deadline is None else loop.call_later((deadline - self.now_ms()) / 1000, wake.set)
            try:
                await wake.wait()  # the deadline, or a call that may have moved it
            finally:
                if timer is not None:
                    timer.cancel()

    async def tick(self) -> None:
        """Fire every coordinator timer that is due now (the timer task does this on its own)."""
        await self.shards.admit(None, creates=False, committed=False)
        t = self.coordinator.tick(self.now_ms())
        await self._apply(t.records, t.completions)

    def has_state(self) -> bool:
        return self._coordinator is not None and self._coordinator.has_state()

    # --- the read model (admin/: console and /metrics) ------------------------------------------

    def snapshot(self) -> GroupsSnapshot:
        """The groups and their committed offsets now; empty before start()."""
        c = self._coordinator
        if c is None:
            return GroupsSnapshot({}, {})
        return GroupsSnapshot(
            c.groups, {g: {tp: v.offset for tp, v in o.items()} for g, o in c.offsets.items()}
        )

    # --- what the coordinator asks of the broker -----------------------------------------------

    def _topic_metadata(self) -> Mapping[str, tuple[uuid.UUID, int]]:
        return {t.name: (t.topic_id, t.partitions) for t in self._topics()}

    def partition_exists(self, topic: str, partition: int) -> bool:
        t = self._topic(topic)
        return t is not None and 0 <= partition < t.partitions
