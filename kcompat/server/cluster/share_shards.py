"""Cluster mode: the share coordinator's shards, one per `__share_group_state` partition this broker
leads (Kafka's ShareCoordinatorService on the CoordinatorRuntime: onElection / onResignation).
Leadership, loading and waiting for replication are CoordinatorShards'; a shard here is the
share-partitions whose state lives in one partition:

    loaded   ─► the partition's ShareSnapshot/ShareUpdate records replayed into the
                ShareCoordinatorShard (what a single node does for the whole topic at start-up)
    unloaded ─► its share-partitions leave the shard; their calls get NOT_COORDINATOR, and the
                share-partition leaders ask FindCoordinator (key type 2) again

Writes are appended as the partition's leader and answered once replicated (Kafka's
share.coordinator.write.timeout.ms, then COORDINATOR_NOT_AVAILABLE); an append refused for a short
ISR (acks=all) or failing reloads the shard from its log, so no state the log lacks stays.
"""

from __future__ import annotations

import logging
from typing import Protocol

from kcompat.coordinator.shards import ANSWER, ShardState
from kcompat.server.cluster.coordinator_shards import CoordinatorShards
from kcompat.server.share.state_log import StateRecord
from kcompat.storage.topic_store import SHARE_GROUP_STATE
from kcompat.wire.error_codes import ErrorCode


class ShareCoordinatorService(Protocol):
    """What the shards need of the broker's ShareCoordinatorService (share/share_coordinator.py)."""

    def read_partition(self, p: int) -> list[StateRecord]: ...
    def replay(self, p: int, records: list[StateRecord]) -> int: ...
    def unload(self, p: int) -> None: ...


log = logging.getLogger("kcompat.server.share")


class ShareShards(CoordinatorShards[ShareCoordinatorService]):
    topic_name = SHARE_GROUP_STATE
    log = log
    loads_at_start = False

    def _read(self, p: int) -> list[StateRecord]:
        return self.service.read_partition(p)

    def _replay(self, p: int, records: list[StateRecord]) -> str:
        return f"{self.service.replay(p, records)} record(s)"

    def _drop(self, p: int) -> None:
        self.service.unload(p)

    # --- the ShareShardsPort (share/shards.py) -----------------------------------------------------

    async def admit(self, p: int) -> ErrorCode:
        if p < 0:  # __share_group_state is still being created by the controller
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        now = self.table.shards.get(p)
        return ErrorCode.NOT_COORDINATOR if now is None else ANSWER[now[0]]

    def served(self, num_partitions: int) -> list[int]:
        return sorted(p for p, (state, _) in self.table.shards.items() if state is ShardState.ACTIVE)

    def short_isr(self, p: int) -> bool:
        return bool(self.below_min_isr({p}))
