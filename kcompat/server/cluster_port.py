"""What the broker's construction and life cycle need from cluster mode, and a single node's answers.

    Broker.__init__ ──► ClusterPort: the MetadataView, the ISR port, the forwarder, the group
                        coordinator's shards, the transaction coordinator's writes, ...
        ├── SingleNode (here): LocalMetadata, no ISR changes, nothing forwarded, every group and
        │   transactional id coordinated here with synchronous appends
        └── ClusterAssembly (cluster/assembly.py, imported by the broker only in cluster mode):
            KRaftMetadata, AlterPartition, Envelope forwarding, shards following leadership

Each part is handed to the constructor that needs it; a part built from the object under
construction (the ISR port watches the replica manager's partitions, shards replay into the
service that holds them) is given as a factory that constructor calls. Nothing is set on a built
object afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from kcompat.config import BrokerConfig
from kcompat.server.dispatcher import NO_FORWARDING, Forwarder
from kcompat.server.groups.shard_port import AllGroupsHere, GroupShardsPort
from kcompat.server.isr_port import HostedReplica, IsrPort, NoIsrChanges, ReadReplicaSelector
from kcompat.server.local_metadata import LocalMetadata
from kcompat.server.metadata_view import MetadataView, PartitionLogs
from kcompat.server.replica_manager import ReplicaManager
from kcompat.server.transactions.txn_writes import LocalTxnWrites, TxnWrites

if TYPE_CHECKING:
    from kcompat.metadata.image import MetadataImage  # cluster mode only: not loaded on a single node
    from kcompat.server.groups.group_service import GroupService
    from kcompat.server.share.persister import Persister
    from kcompat.server.share.shards import ShareShardsPort
    from kcompat.server.share.share_coordinator import ShareCoordinatorService
    from kcompat.server.transactions.txn_service import TransactionService


class StartedBroker(Protocol):
    """What cluster mode reads of the broker once its logs are open and its listeners bound."""

    @property
    def cluster_id(self) -> str: ...
    @property
    def endpoints(self) -> dict[str, tuple[str, int]]: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def replicas(self) -> ReplicaManager: ...


class ClusterPort(Protocol):
    @property
    def cluster_mode(self) -> bool: ...
    @property
    def transaction_version(self) -> int:
        """The transaction.version finalized at start (cluster mode: the image's, once it comes)."""

    @property
    def metadata(self) -> MetadataView: ...
    @property
    def forwarder(self) -> Forwarder: ...
    @property
    def hosted(self) -> Mapping[tuple[str, int], HostedReplica]:
        """The replicas this broker hosts, leader or follower (empty on a single node), filled by
        cluster mode as images arrive and read by the replica manager, Produce and Fetch."""

    @property
    def serving(self) -> asyncio.Event:
        """Set once the listeners may be served (cluster mode: this broker is unfenced)."""

    def isr(self, replicas: ReplicaManager) -> IsrPort: ...
    def read_replica_selector(self) -> ReadReplicaSelector | None:
        """`replica.selector.class` (cluster mode; None: consumers read from the leader only)."""

    def offsets_leader_epoch(self, replicas: ReplicaManager) -> Callable[[int], int] | None:
        """The leader epoch to stamp on `__consumer_offsets` partition p (None: the topic's)."""

    def group_shards(self, service: GroupService, replicas: ReplicaManager) -> GroupShardsPort: ...
    def txn_writes(self, service: TransactionService, replicas: ReplicaManager) -> TxnWrites: ...
    def share_shards(self, service: ShareCoordinatorService, replicas: ReplicaManager) -> ShareShardsPort: ...
    def share_persister(self, coordinator: ShareCoordinatorService) -> Persister: ...
    def quorum_leader(self) -> tuple[str, int] | None:
        """(host, port) of the KRaft quorum leader once known."""

    def image(self) -> MetadataImage | None:
        """The KRaft metadata image the broker serves from (None on a single node)."""

    def start(self, broker: StartedBroker) -> None:
        """After the broker started (its logs open, its listeners bound)."""

    async def shutdown(self, timeout_s: float) -> None: ...


class SingleNode:
    """The ClusterPort of a broker alone: its metadata in kcompat.storage files."""

    cluster_mode = False
    transaction_version = 2  # transactions v2 on one node
    forwarder = NO_FORWARDING
    # A single node hosts no replicas; a Mapping, never written: each broker reads its own empty one.
    hosted: Mapping[tuple[str, int], HostedReplica] = MappingProxyType({})

    def __init__(self, config: BrokerConfig, directory: Path, logs: Callable[[], PartitionLogs]) -> None:
        self.metadata = LocalMetadata(config, directory, logs)
        self.serving = asyncio.Event()
        self.serving.set()

    def isr(self, replicas: ReplicaManager) -> IsrPort:
        return NoIsrChanges()

    def read_replica_selector(self) -> ReadReplicaSelector | None:
        return None  # the only replica is the leader

    def offsets_leader_epoch(self, replicas: ReplicaManager) -> Callable[[int], int] | None:
        return None

    def group_shards(self, service: GroupService, replicas: ReplicaManager) -> GroupShardsPort:
        return AllGroupsHere(service)

    def txn_writes(self, service: TransactionService, replicas: ReplicaManager) -> TxnWrites:
        return LocalTxnWrites(service)

    def share_shards(self, service: ShareCoordinatorService, replicas: ReplicaManager) -> ShareShardsPort:
        from kcompat.server.share.shards import AllSharesHere  # share groups: built on first use

        return AllSharesHere(service)

    def share_persister(self, coordinator: ShareCoordinatorService) -> Persister:
        from kcompat.server.share.local_persister import LocalSharePersister

        return LocalSharePersister(coordinator)

    def quorum_leader(self) -> tuple[str, int] | None:
        return None

    def image(self) -> MetadataImage | None:
        return None

    def start(self, broker: StartedBroker) -> None:
        pass

    async def shutdown(self, timeout_s: float) -> None:
        pass
