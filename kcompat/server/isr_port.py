"""The ISR port: what the replica manager and Fetch need of the leader's ISR changes (cluster mode:
cluster/replication/alter_partition.py's IsrManager, AlterPartition through the controller, given
by cluster/assembly.py), and a single node's, which has none."""

from __future__ import annotations

from typing import Any, Protocol


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
