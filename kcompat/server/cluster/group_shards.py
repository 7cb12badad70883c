"""Cluster mode: the group coordinator's shards, one per `__consumer_offsets` partition this broker
leads (Kafka's CoordinatorRuntime driven by the metadata image: onElection / onResignation).

    image published ──on_image──► for each __consumer_offsets partition hosted here:
        led at epoch e, not loaded at e ─► unload the old shard (if any), LOADING, replay the
                                            partition's log in a worker thread ─► ACTIVE
        no longer led                    ─► unload: its groups and offsets leave the coordinator,
                                            JoinGroup/SyncGroup waiting in them get NOT_COORDINATOR

The decisions are the pure ShardTable's (coordinator/shards.py). Writes: the GroupService appends
a call's records as leader (the partition's leader epoch stamped), then `replicated` waits until
the high watermark passes them, as Kafka's coordinator writes with acks=all and completes on the
high watermark; errors map as Kafka's GroupCoordinatorService maps them (leadership lost or a
storage error: NOT_COORDINATOR, and the shard is dropped or loaded again from the log so that no
state the log does not hold stays; not replicated in offsets.commit.timeout.ms:
COORDINATOR_NOT_AVAILABLE, the records stay in the leader's log as in Kafka). Reads of committed
offsets first wait for the partition's high watermark to reach its log end (`settled`), so an
OffsetFetch never shows an offset a failover could take back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

import kcompat.coordinator.share.share_group_records as share_rec
from kcompat.coordinator.record_pair import Record
from kcompat.server.cluster.coordinator_shards import CoordinatorShards
from kcompat.storage.topic_store import CONSUMER_OFFSETS
from kcompat.wire.error_codes import ErrorCode

if TYPE_CHECKING:
    from kcompat.coordinator import GroupCoordinator
    from kcompat.server.groups.offsets_topic import OffsetsTopic


class GroupService(Protocol):
    """What the shards need of the broker's GroupService (group_service.py)."""

    @property
    def offsets_topic(self) -> OffsetsTopic: ...

    @property
    def coordinator(self) -> GroupCoordinator: ...
    def now_ms(self) -> int: ...
    def wake(self) -> None: ...
    def fail_waiting(self, tokens: Iterable[int]) -> None: ...


log = logging.getLogger("kcompat.server.groups")

Pairs = list[tuple[bytes, bytes | None]]
Loaded = tuple[Pairs, dict[int, Pairs]]  # a partition's records, and its open transactions' apart


class GroupShards(CoordinatorShards[GroupService]):
    topic_name = CONSUMER_OFFSETS
    log = log
    coordinates_all = False

    # --- the GroupShardsPort (groups/shard_port.py) ------------------------------------------------

    async def admit(self, group: str | None, *, creates: bool, committed: bool) -> ErrorCode:
        """A call on one group runs only while its shard is loaded here; `committed` reads wait
        until what was written to the group's partition is replicated. __consumer_offsets is the
        controller's to create."""
        if group is None:
            return ErrorCode.NONE
        code = self.error(group)
        if code == ErrorCode.NONE and committed:
            code = await self.settled(group)
        return code

    def short_isr(self, records: list[Record]) -> list[int]:
        return self.below_min_isr(self._partitions_of(records))

    def reload_for(self, records: list[Record]) -> None:
        for p in self._partitions_of(records):
            self.reload(p)

    def _partitions_of(self, records: list[Record]) -> set[int]:
        """The __consumer_offsets partitions `records` go to."""
        return {self.table.partition(share_rec.group_of_key(key)) for key, _ in records}

    # --- what a shard is -------------------------------------------------------------------------

    def _read(self, p: int) -> Loaded:
        return self.service.offsets_topic.read_partition_txn(p)

    def _replay(self, p: int, loaded: Loaded) -> str:
        records, pending = loaded
        coordinator = self.service.coordinator
        before = len(coordinator.groups)
        coordinator.load(records, self.service.now_ms())
        for producer_id, txn in pending.items():  # this partition's open transactions only
            coordinator.txn_offsets.replay(producer_id, txn)
        self.service.wake()
        return f"{len(records)} record(s), {len(coordinator.groups) - before} group(s)"

    def _drop(self, p: int) -> None:
        """Its groups and offsets leave the coordinator; JoinGroup/SyncGroup waiting in them get
        NOT_COORDINATOR."""
        tokens = self.service.coordinator.unload(lambda g: self.table.partition(g) == p)
        self.service.fail_waiting(tokens)
