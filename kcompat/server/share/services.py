"""Share groups' services, built by their first use (issue 31: a start that has no share state to
load imports none of their modules).

    ShareServices ──first share request──► ShareCoordinatorService (__share_group_state),
                                           the Persister, ShareService (groups, share-partitions)

A handler reaches them through ctx.share and ctx.share_coordinator; the group handlers ask the
GroupService whether a group id is a share group, which builds nothing here. They are built at the
broker's start instead when there is something to load or to time out: cluster mode (partitions
of __share_group_state are loaded as their leadership arrives, so the service must be there),
__share_group_state in the log dir, or share members replayed from __consumer_offsets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcompat.server.cluster_port import ClusterPort
    from kcompat.server.groups.group_service import GroupService
    from kcompat.server.metadata_view import MetadataView
    from kcompat.server.replica_manager import ReplicaManager
    from kcompat.server.share.persister import Persister
    from kcompat.server.share.share_coordinator import ShareCoordinatorService
    from kcompat.server.share.share_group_service import ShareService


class ShareServices:
    """The broker's share coordinator, Persister and ShareService, made on first use."""

    def __init__(
        self,
        *,
        now_ms: Callable[[], int],
        setting: Callable[[str], Any],
        coordinator_setting: Callable[[str], Any],
        metadata: MetadataView,
        replicas: ReplicaManager,
        cluster: ClusterPort,
        group_overrides: Callable[[str], Mapping[str, str]],
        group_log: GroupService,
    ) -> None:
        self._now_ms = now_ms
        self._setting = setting  # the broker's config with its dynamic values
        self._coordinator_setting = coordinator_setting
        self._metadata = metadata
        self._replicas = replicas
        self._cluster = cluster
        self._group_overrides = group_overrides
        self._group_log = group_log
        self._built: tuple[ShareCoordinatorService, Persister, ShareService] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start(): built later, started at once

    @property
    def built(self) -> bool:
        return self._built is not None

    @property
    def coordinator(self) -> ShareCoordinatorService:
        return self._build()[0]

    @property
    def persister(self) -> Persister:
        return self._build()[1]

    @property
    def service(self) -> ShareService:
        return self._build()[2]

    def build(self) -> None:
        """Build them now (cluster mode: before any shard of __share_group_state can arrive)."""
        self._build()

    def _build(self) -> tuple[ShareCoordinatorService, Persister, ShareService]:
        if self._built is not None:
            return self._built
        from kcompat.server.share.share_coordinator import ShareCoordinatorService
        from kcompat.server.share.share_group_service import ShareService

        metadata, replicas, cluster = self._metadata, self._replicas, self._cluster
        coordinator = ShareCoordinatorService(
            now_ms=self._now_ms,
            setting=self._coordinator_setting,
            lookup=metadata.topic,
            create=metadata.auto_create_topic,
            partition_log=replicas.log_now,
            append=replicas.append,
            topic_by_id=metadata.topics.by_id,
            delete_records=replicas.delete_records,
            shards=lambda service: cluster.share_shards(service, replicas),
        )
        persister = cluster.share_persister(coordinator)
        # Membership here (the group coordinator's side) and the share-partitions this broker
        # leads, whose state goes through the Persister before an acknowledgement is answered.
        service = ShareService(
            now_ms=self._now_ms,
            setting=self._setting,
            topic=metadata.topic,
            by_id=lambda topic_id: metadata.topics.by_id(topic_id),
            partition_log=replicas.log_now,
            leader_epoch=lambda t, partition: metadata.leader_and_epoch(t, partition)[1],
            notify=lambda topic, partition: replicas.fetch_waiters.notify((topic, partition)),
            persister=persister,
            group_overrides=self._group_overrides,
            group_log=self._group_log,
        )
        self._built = (coordinator, persister, service)
        if self._loop is not None:  # the broker runs: start them before the request that built them
            if self._loop.is_running():
                coordinator.start_now()
                service.start()
            else:  # between requests of an in-process broker whose loop is idle (tests)
                self._loop.run_until_complete(self._start(coordinator, service))
        return self._built

    @staticmethod
    async def _start(coordinator: ShareCoordinatorService, service: ShareService) -> None:
        await coordinator.start()  # replays __share_group_state
        service.start()  # the share members' session expiry

    async def start(self, *, load: bool) -> None:
        """The broker's start: build and start them now if `load` (or if already built)."""
        if load or self._built is not None:
            coordinator, _, service = self._build()
            await self._start(coordinator, service)
        self._loop = asyncio.get_running_loop()

    def connection_closed(self, connection_id: str) -> None:
        if self._built is not None:
            self._built[2].partitions.connection_closed(connection_id)

    async def close(self) -> None:
        if self._built is not None:
            coordinator, _, service = self._built
            await service.close()
            await coordinator.close()
