"""Which partitions of a coordinator's state topic this broker serves, in cluster mode (the group
coordinator's `__consumer_offsets`, the transaction coordinator's `__transaction_state`: both place a
key by the same hash, `abs(hash(key)) % partitions`).

Kafka's CoordinatorRuntime keeps one shard per `__consumer_offsets` partition the broker leads:
`onElection` loads it by replaying the partition's log, `onResignation` unloads it. A group is
served by the shard of its partition (`offsets_partition`, as FindCoordinator answers), so a request
for a group whose shard is not here gets NOT_COORDINATOR, and one whose shard is still loading
COORDINATOR_LOAD_IN_PROGRESS; both are retriable for clients (they ask FindCoordinator again).

The table only decides; replaying records and answering the requests waiting in an unloaded shard
is the server's (server/cluster/coordinator_shards.py). States, per partition:

    (absent) --elect(epoch)--> LOADING --loaded(epoch)--> ACTIVE
    LOADING/ACTIVE --elect(other epoch)--> LOADING      (a new leadership: unload, load again)
    LOADING/ACTIVE --resign--> (absent)
"""

from __future__ import annotations

from enum import Enum

from kcompat.coordinator.record_pair import offsets_partition
from kcompat.wire.error_codes import ErrorCode


class ShardState(Enum):
    LOADING = "Loading"
    ACTIVE = "Active"


# What a request for a group of the shard gets in each state (absent: NOT_COORDINATOR).
ANSWER = {ShardState.LOADING: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ShardState.ACTIVE: ErrorCode.NONE}


class ShardTable:
    def __init__(self) -> None:
        self.shards: dict[int, tuple[ShardState, int]] = {}  # partition -> (state, leader epoch)
        self.num_partitions = 0  # of the state topic; 0 until it exists

    def elect(self, partition: int, leader_epoch: int) -> bool:
        """This broker leads `partition` at `leader_epoch`: True when a load must start (it was not
        loaded, or loaded under another leadership; the caller unloads that first)."""
        now = self.shards.get(partition)
        if now is not None and now[1] == leader_epoch:
            return False
        self.shards[partition] = (ShardState.LOADING, leader_epoch)
        return True

    def loaded(self, partition: int, leader_epoch: int) -> bool:
        """A load finished: True when it is still the one wanted (else its state is thrown away)."""
        if self.shards.get(partition) != (ShardState.LOADING, leader_epoch):
            return False
        self.shards[partition] = (ShardState.ACTIVE, leader_epoch)
        return True

    def resign(self, partition: int) -> bool:
        """This broker no longer leads `partition`: True when it had a shard to unload."""
        return self.shards.pop(partition, None) is not None

    def epoch(self, partition: int) -> int | None:
        now = self.shards.get(partition)
        return None if now is None else now[1]

    def partition(self, group_id: str) -> int:
        return offsets_partition(group_id, self.num_partitions)

    def error(self, group_id: str) -> ErrorCode:
        """NONE when this broker serves `group_id` now, else the error Kafka answers with."""
        if self.num_partitions <= 0:
            return ErrorCode.NOT_COORDINATOR
        return self.partition_error(self.partition(group_id))

    def partition_error(self, partition: int) -> ErrorCode:
        """NONE when the shard of `partition` is loaded here now, else the error Kafka answers with."""
        now = self.shards.get(partition)
        return ErrorCode.NOT_COORDINATOR if now is None else ANSWER[now[0]]

    def owns(self, partition: int) -> bool:
        return partition in self.shards
