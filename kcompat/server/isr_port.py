"""The ISR port: what the replica manager and Fetch need of the leader's ISR changes (cluster mode:
cluster/replication/alter_partition.py's IsrManager, AlterPartition through the controller, given
by cluster/assembly.py), and a single node's, which has none."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kcompat.log.partition_log import PartitionLog


class IsrPort(Protocol):
    """The leader's ISR changes (cluster mode: AlterPartition through the controller, Kafka's
    AlterPartitionManager); a follower's fetch may bring it back into the ISR."""

    isr_shrinks: int
    isr_expands: int

    def maybe_expand(self, p: Any, replica_id: int) -> None: ...


class NoIsrChanges:
    """A single node: the leader is the only replica, its ISR never changes."""

    isr_shrinks = 0
    isr_expands = 0

    def maybe_expand(self, p: Any, replica_id: int) -> None:
        pass


class ReadReplicaSelector(Protocol):
    """The leader's choice of the replica a consumer reads from (KIP-392, `replica.selector.class`;
    cluster/replication/replica_selector.py): the follower's id, or -1 for the leader itself.
    `racks`: each live broker's rack on the client's listener."""

    def __call__(
        self, p: Any, client_rack: str, fetch_offset: int, racks: Mapping[int, str | None], now_ms: int
    ) -> int: ...


class ReplicaRegistration(Protocol):
    """The controller's view of a hosted replica, as the core reads it."""

    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def replicas(self) -> tuple[int, ...]: ...


class HostedReplica(Protocol):
    """One replica a cluster-mode broker hosts (cluster/replication/partition.py's Partition), as
    Produce, Fetch and the replica manager read it; a single node hosts none."""

    @property
    def topic(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def log(self) -> PartitionLog: ...
    @property
    def state(self) -> ReplicaRegistration: ...
    @property
    def min_isr(self) -> int: ...
    @property
    def is_leader(self) -> bool: ...
    @property
    def leader_epoch(self) -> int: ...

    def update_follower(
        self, replica_id: int, fetch_offset: int, broker_epoch: int, now_ms: int, log_start_offset: int = -1
    ) -> bool:
        """A Fetch from a follower at `fetch_offset`: True when the high watermark moved."""

    def maybe_increment_hw(self) -> bool: ...
