"""The broker's side of share groups: the group coordinator's share groups (membership, the simple
assignor, session expiry on a timer) and the share-partitions this broker leads, wired together so
that a member that leaves, or whose session times out, gives back the records it holds.

    ShareGroupHeartbeat ──► ShareGroups (kcompat.coordinator.share, pure) ──► answer
    member gone (leave, expiry) ──► its share sessions closed, its acquired records released

The groups are the group coordinator's (GroupCoordinator.share_groups): every change is written to
__consumer_offsets as the ShareGroup* records (share_group_records.py) through the GroupService, in
the same step as the change, and they are replayed with the rest of the partition at start-up and on
a shard load, so the group epoch, the members' epochs and assignments survive a restart or a
failover and a member heartbeating with its epoch just continues. Cluster mode: a group lives where
its __consumer_offsets partition is led; the shard's unload forgets it here, never expires it:
expiring would release records that members still alive elsewhere hold.

A share-partition is assigned only once its share state is initialized (Kafka's order): the
heartbeat that finds subscribed partitions not yet initialized writes them as initializing,
initializes their state through the Persister (InitializeShareGroupState), writes them as
initialized with the group epoch bumped, and answers with the assignment that includes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from kcompat.coordinator.result import CoordinatorResult
from kcompat.coordinator.share.share_group import (
    LEAVE_EPOCH,
    HeartbeatResult,
    ShareGroup,
    ShareGroups,
    ShareGroupTiming,
)
from kcompat.coordinator.share.share_group_records import changes, image
from kcompat.server.share.memory_persister import InMemoryPersister
from kcompat.server.share.persister import Persister, SharePartitionKey
from kcompat.server.share.share_partition_manager import SharePartitionManager
from kcompat.storage.topic_store import TopicInfo
from kcompat.wire.error_codes import ErrorCode

log = logging.getLogger("kcompat.server.share")
T = TypeVar("T")


class GroupLog(Protocol):
    """What the share groups need of the GroupService: the groups, and a write to their partition."""

    @property
    def share_groups(self) -> ShareGroups: ...

    def share_deadline_ms(self) -> int | None:
        """When a share member's session is next due, without building a coordinator not yet used."""

    async def run(
        self,
        call: Callable[[int], CoordinatorResult[Any]],
        *,
        group: str | None = None,
        refuse: Callable[[ErrorCode], Any] | None = None,
    ) -> Any: ...


def no_overrides(group_id: str) -> Mapping[str, str]:
    return {}


class ShareService:
    """Share groups on this broker: `groups` (the coordinator's side) and `partitions` (the leader's)."""

    def __init__(
        self,
        *,
        now_ms: Callable[[], int],
        setting: Callable[[str], Any],
        topic: Callable[[str], TopicInfo | None],
        by_id: Callable[[uuid.UUID], TopicInfo | None],
        partition_log: Callable[[str, int], Any],
        leader_epoch: Callable[[TopicInfo, int], int],
        notify: Callable[[str, int], None],
        persister: Persister | None = None,
        group_overrides: Callable[[str], Mapping[str, str]] = no_overrides,
        group_log: GroupLog | None = None,
    ) -> None:
        self.now_ms = now_ms
        self._setting = setting
        self._topic = topic
        # group id -> the group configs set on that group (features' group config resources)
        self.group_overrides = group_overrides
        self._by_id = by_id
        # None: the groups live here, in memory only (tests of the share-partitions alone)
        self._log = group_log
        self._own_groups = ShareGroups()
        self.partitions = SharePartitionManager(
            now_ms=now_ms,
            setting=setting,
            persister=persister if persister is not None else InMemoryPersister(),
            partition_log=partition_log,
            by_id=by_id,
            leader_epoch=leader_epoch,
            notify=notify,
            group_overrides=lambda group_id: self.group_overrides(group_id),
        )
        self._wake: asyncio.Event | None = None
        self._timer: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def groups(self) -> ShareGroups:
        return self._own_groups if self._log is None else self._log.share_groups

    def partitions_of(self, topic: str) -> list[tuple[uuid.UUID, int]]:
        t = self._topic(topic)
        return [] if t is None else [(t.topic_id, p) for p in range(t.partitions)]

    def timing(self, group_id: str) -> ShareGroupTiming:
        o = self.group_overrides(group_id)

        def num(group_key: str, broker_key: str) -> int:
            v = o.get(group_key)
            return int(v) if v is not None else int(self._setting(broker_key))

        return ShareGroupTiming(
            session_timeout_ms=num("share.session.timeout.ms", "group.share.session.timeout.ms"),
            heartbeat_interval_ms=num("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms"),
            max_size=int(self._setting("group.share.max.size")),
        )

    # --- life cycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self.partitions.start()
        self._wake = asyncio.Event()
        self._timer = asyncio.create_task(self._expiry_loop())

    async def close(self) -> None:
        self._closed = True
        if self._wake is not None:
            self._wake.set()
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None
        await self.partitions.close()

    # --- membership ------------------------------------------------------------------------------

    async def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        rack_id: str | None,
        subscribed: list[str] | None,
        client_id: str,
        client_host: str,
    ) -> tuple[HeartbeatResult, int]:
        """One ShareGroupHeartbeat; the result and the heartbeat interval to give the member."""
        timing = self.timing(group_id)

        def act() -> HeartbeatResult:
            new = group_id not in self.groups.groups
            group = self.groups.get_or_create(group_id)
            result = group.heartbeat(
                self.now_ms(),
                member_id,
                member_epoch,
                rack_id=rack_id,
                subscribed=subscribed,
                client_id=client_id,
                client_host=client_host,
                timing=timing,
                partitions_of=self.partitions_of,
            )
            if new and not group.members:
                del self.groups.groups[group_id]  # a refused join leaves no group behind
            return result

        result = await self._write(group_id, act, lambda code: HeartbeatResult(code))
        if self._wake is not None:
            self._wake.set()
        if result.error_code == ErrorCode.NONE and result.member_epoch != LEAVE_EPOCH:
            result = await self._initialize(group_id, member_id) or result
        # A member leaving keeps its share session: clients send the leave heartbeat before their
        # final ShareAcknowledge (epoch -1), whose acknowledgements must still count; that final
        # request, or the lock timing out, releases what the member still holds.
        return result, timing.heartbeat_interval_ms

    async def _write(self, group_id: str, act: Callable[[], T], refuse: Callable[[ErrorCode], T]) -> T:
        """Run `act`, which changes the group, and write the records of what it changed, with no
        await in between (so the log has the changes in the order they were made). `refuse(code)`
        when this broker may not write the group's records (not its coordinator, closing)."""
        if self._log is None:
            return act()

        def call(now_ms: int) -> CoordinatorResult[T]:
            g = self.groups.groups.get(group_id)
            before = None if g is None else image(g)
            answer = act()
            g = self.groups.groups.get(group_id) or g
            after = image(g) if group_id in self.groups.groups and g is not None else None
            names = {} if g is None else g.topic_names
            return CoordinatorResult(response=answer, records=changes(group_id, before, after, names))

        result: T = await self._log.run(call, group=group_id, refuse=refuse)
        return result

    async def _initialize(self, group_id: str, member_id: str) -> HeartbeatResult | None:
        """As Kafka's group coordinator does before assigning: the subscribed share-partitions with no
        state yet are initialized (start offset -1: the leader applies share.auto.offset.reset), so
        that a leader of any kind (an Apache Kafka broker refuses to read state never initialized)
        can load every partition assigned. The member's answer once they are assigned; None when
        nothing was initialized. A failure is tried again on a later heartbeat."""
        g = self.group(group_id)
        parts = {} if g is None else g.uninitialized(self.partitions_of)
        if g is None or not parts:
            return None
        names = {tid: t.name for tid in parts if (t := self._by_id(tid)) is not None}
        parts = {tid: ps for tid, ps in parts.items() if tid in names}
        if not parts:
            return None
        group = g

        def start() -> bool:
            group.initializing_started(parts, names)
            return True

        if not await self._write(group_id, start, lambda code: False):
            return None
        try:
            done, failed = await self._initialize_state(group_id, parts)
        except Exception:  # the persister's failure: all tried again on a later heartbeat
            log.warning(
                "share group %s: InitializeShareGroupState failed; the partitions are tried again "
                "on a later heartbeat (is the share coordinator of __share_group_state up?)",
                group_id,
            )
            done, failed = {}, dict(parts)

        def finish() -> HeartbeatResult | None:
            if self.group(group_id) is not group:
                return None  # deleted or unloaded meanwhile
            group.initializing_done(failed, False, self.partitions_of)
            group.initializing_done(done, True, self.partitions_of)
            return group.answer(member_id)

        return await self._write(group_id, finish, lambda code: HeartbeatResult(code))

    async def _initialize_state(
        self, group_id: str, parts: Mapping[uuid.UUID, set[int]]
    ) -> tuple[dict[uuid.UUID, set[int]], dict[uuid.UUID, set[int]]]:
        """InitializeShareGroupState for each share-partition not initialized yet: (done, failed)."""
        persister = self.partitions.persister
        done: dict[uuid.UUID, set[int]] = {}
        failed: dict[uuid.UUID, set[int]] = {}
        for topic_id, partitions in parts.items():
            for p in sorted(partitions):
                key = SharePartitionKey(group_id, topic_id.bytes, p)
                summary = await persister.read_summary(key, -1)
                ok = summary.error_code == ErrorCode.NONE and (
                    summary.start_offset >= 0
                    or await persister.initialize_state(key, 0, -1) == ErrorCode.NONE
                )
                (done if ok else failed).setdefault(topic_id, set()).add(p)
        return done, failed

    async def offsets_set(
        self, group_id: str, topic_id: uuid.UUID, name: str, partitions: set[int] | None
    ) -> None:
        """Alter/DeleteShareGroupOffsets (of an empty group) initialized `partitions` of a topic, or
        deleted the state of all of them (None): the group's records say so, as Kafka's do."""
        g = self.group(group_id)
        if g is None:
            return

        def change() -> bool:
            if partitions is None:
                g.initialized.pop(topic_id, None)
            else:
                g.initialized.setdefault(topic_id, set()).update(partitions)
                g.topic_names[topic_id] = name
            return True

        await self._write(group_id, change, lambda code: False)

    def group(self, group_id: str) -> ShareGroup | None:
        return self.groups.groups.get(group_id)

    def is_member(self, group_id: str, member_id: str) -> bool:
        g = self.groups.groups.get(group_id)
        return g is not None and member_id in g.members

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: only when it has no members; its share-partition state goes too."""
        g = self.groups.groups.get(group_id)
        if g is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if g.members:
            return ErrorCode.NON_EMPTY_GROUP

        # As Kafka: the topics are written as deleting, their share state deleted, then the
        # group's tombstones written.
        def deleting() -> bool:
            g.deleting.update(set(g.initialized) | set(g.initializing))
            return True

        if not await self._write(group_id, deleting, lambda code: False):
            return ErrorCode.NOT_COORDINATOR
        err = await self.partitions.delete_group(group_id)
        if err != ErrorCode.NONE:
            await self._write(group_id, g.deleting.clear, lambda code: None)
            return err

        def drop() -> ErrorCode:
            if self.groups.groups.get(group_id) is g and not g.members:
                del self.groups.groups[group_id]
                return ErrorCode.NONE
            return ErrorCode.NON_EMPTY_GROUP  # a member joined while the state was deleted

        return await self._write(group_id, drop, lambda code: code)

    async def member_gone(self, group_id: str, member_id: str) -> None:
        self.partitions.sessions.remove_member(group_id, member_id)
        await self.partitions.release_member(group_id, member_id)

    async def _expiry_loop(self) -> None:
        assert self._wake is not None
        while not self._closed:  # a cancel that wait_for swallowed (3.11) still ends the loop
            self._wake.clear()
            deadline = (
                self._own_groups.next_deadline_ms() if self._log is None else self._log.share_deadline_ms()
            )
            delay = None if deadline is None else max(0.0, (deadline - self.now_ms()) / 1000)
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
                continue
            except TimeoutError:
                pass
            await self._expire(self.now_ms())

    async def _expire(self, now: int) -> None:
        """Remove the members whose session timed out, writing the group's records, and release
        what they hold."""
        for g in list(self.groups.groups.values()):
            gone = g.expired(now)
            if not gone:
                continue

            def remove(g: ShareGroup = g, gone: list[str] = gone) -> bool:
                for mid in gone:
                    g.remove(mid, self.partitions_of)
                return True

            if not await self._write(g.group_id, remove, lambda code: False):
                for mid in gone:  # not written (closing, or no longer coordinated): look again later
                    if (m := g.members.get(mid)) is not None:
                        m.deadline_ms = now + self.timing(g.group_id).session_timeout_ms
                continue
            for mid in gone:
                log.info("share group %s: member %s left (session timed out)", g.group_id, mid)
                try:
                    await self.member_gone(g.group_id, mid)
                except Exception:
                    log.exception(
                        "share group %s: releasing the records of member %s failed", g.group_id, mid
                    )
