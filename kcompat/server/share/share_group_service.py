"""The broker's side of share groups: the group coordinator's share groups (membership, the simple
assignor, session expiry on a timer) and the share-partitions this broker leads, wired together so
that a member that leaves, or whose session times out, gives back the records it holds.

    ShareGroupHeartbeat ──► ShareGroups (kcompat.coordinator.share, pure) ──► answer
    member gone (leave, expiry) ──► its share sessions closed, its acquired records released

Membership lives in memory on a single node (the ShareGroup* records of __consumer_offsets are
the durable form, not written yet): after a restart members rejoin with epoch 0 on their next
heartbeat (UNKNOWN_MEMBER_ID makes them), and the share-partition state comes back from the persister.
Cluster mode: a group lives where its __consumer_offsets partition is led; when that moved away the
group is forgotten here (its members rejoin the new coordinator), never expired: expiring would
release records that members still alive elsewhere hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kcompat.coordinator.share.share_group import HeartbeatResult, ShareGroup, ShareGroups, ShareGroupTiming
from kcompat.server.share.memory_persister import InMemoryPersister
from kcompat.server.share.persister import Persister, SharePartitionKey
from kcompat.server.share.share_partition_manager import SharePartitionManager
from kcompat.storage.topic_store import TopicInfo
from kcompat.wire.error_codes import ErrorCode

log = logging.getLogger("kcompat.server.share")


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
        coordinates: Callable[[str], bool] = lambda group_id: True,
    ) -> None:
        self.now_ms = now_ms
        self._setting = setting
        self._topic = topic
        # group id -> the group configs set on that group (features' group config resources)
        self.group_overrides = group_overrides
        # group id -> whether this broker coordinates it now (cluster mode: leads its offsets partition)
        self.coordinates = coordinates
        self.groups = ShareGroups()
        # share-partitions whose state this coordinator knows to be initialized (or did initialize)
        self._initialized: set[tuple[str, uuid.UUID, int]] = set()
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
        if self._wake is not None:
            self._wake.set()
        if result.assignment:
            await self._initialize(group_id, result.assignment)
        # A member leaving keeps its share session: clients send the leave heartbeat before their
        # final ShareAcknowledge (epoch -1), whose acknowledgements must still count; that final
        # request, or the lock timing out, releases what the member still holds.
        return result, timing.heartbeat_interval_ms

    async def _initialize(self, group_id: str, assignment: Mapping[uuid.UUID, Any]) -> None:
        """As Kafka's group coordinator does on assignment: a share-partition with no state yet is
        initialized (start offset -1: its leader applies share.auto.offset.reset), so that a leader
        of any kind (an Apache Kafka broker refuses to read state never initialized) can load it.
        A failure is retried on the member's next assignment; kcompat's leaders initialize too."""
        persister = self.partitions.persister
        for topic_id, partitions in assignment.items():
            for p in partitions:
                k = (group_id, topic_id, p)
                if k in self._initialized:
                    continue
                key = SharePartitionKey(group_id, topic_id.bytes, p)
                summary = await persister.read_summary(key, -1)
                if summary.error_code != ErrorCode.NONE:
                    continue
                if (
                    summary.start_offset >= 0
                    or await persister.initialize_state(key, 0, -1) == ErrorCode.NONE
                ):
                    self._initialized.add(k)

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
        err = await self.partitions.delete_group(group_id)
        if err == ErrorCode.NONE:
            del self.groups.groups[group_id]
            self._initialized = {k for k in self._initialized if k[0] != group_id}
        return err

    def forget_elsewhere(self) -> None:
        """Drop the groups another broker coordinates now, without releasing their members' records."""
        for gid in [g for g in self.groups.groups if not self.coordinates(g)]:
            del self.groups.groups[gid]
            log.info("share group %s: coordinated by another broker now, forgotten here", gid)

    async def member_gone(self, group_id: str, member_id: str) -> None:
        self.partitions.sessions.remove_member(group_id, member_id)
        await self.partitions.release_member(group_id, member_id)

    async def _expiry_loop(self) -> None:
        assert self._wake is not None
        while not self._closed:  # a cancel that wait_for swallowed (3.11) still ends the loop
            self._wake.clear()
            deadline = self.groups.next_deadline_ms()
            delay = None if deadline is None else max(0.0, (deadline - self.now_ms()) / 1000)
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
                continue
            except TimeoutError:
                pass
            self.forget_elsewhere()
            for gid, mid in self.groups.expire(self.now_ms(), self.partitions_of):
                log.info("share group %s: member %s left (session timed out)", gid, mid)
                try:
                    await self.member_gone(gid, mid)
                except Exception:
                    log.exception("share group %s: releasing the records of member %s failed", gid, mid)
