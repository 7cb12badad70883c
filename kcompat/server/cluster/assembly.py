"""Cluster mode's assembly: the one place that builds what a broker under Kafka's KRaft controllers
adds, and hands it to the broker's constructors (the ClusterPort of server/cluster_port.py; the
broker imports this module only in cluster mode).

    built with the Broker ─► KRaftBroker (registration, heartbeats, the metadata follower; started
                             later), KRaftMetadata, Envelope forwarding, producer-id blocks and
                             auto topic creation through the active controller, the ISR manager
                             (AlterPartition), the group and transaction coordinators' shards, the
                             transaction markers' and verification's broker channels
    start(broker)         ─► once its logs are open and its listeners bound: the follower
                             fetchers, the replica manager's deltas, then the KRaftBroker
    each image published  ─► ImageLog, the replica manager's delta, the shards, transaction.version
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kcompat.config import BrokerConfig
from kcompat.metadata.image import MetadataImage
from kcompat.quotas.entities import QuotaTable
from kcompat.security.authorizer import Authorizer
from kcompat.security.delegation_tokens import TokenInformation
from kcompat.security.scram import ScramUsers
from kcompat.server.cluster.auto_topic_creation import AutoTopicCreationManager
from kcompat.server.cluster.controller_channel import ControllerChannel, parse_bootstrap
from kcompat.server.cluster.directory_assignments import DirectoryAssignments
from kcompat.server.cluster.forwarding_manager import ForwardingManager
from kcompat.server.cluster.group_shards import GroupShards
from kcompat.server.cluster.image_log import ImageLog
from kcompat.server.cluster.kraft_broker import KRaftBroker
from kcompat.server.cluster.kraft_metadata import KRaftMetadata
from kcompat.server.cluster.producer_id_manager import ControllerProducerIds
from kcompat.server.cluster.replication.alter_partition import IsrManager
from kcompat.server.cluster.replication.partition import Partition
from kcompat.server.cluster.replication.replica_delta import ReplicaDeltaApplier
from kcompat.server.cluster.replication.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from kcompat.server.cluster.replication.replica_selector import selector_named
from kcompat.server.cluster.share_persister import NetworkSharePersister
from kcompat.server.cluster.share_shards import ShareShards
from kcompat.server.cluster.txn_channels import BrokerChannels, TxnMarkerSender, TxnVerifier
from kcompat.server.cluster.txn_shards import TXN_LOG_APPEND_TIMEOUT_MS, TxnShards
from kcompat.server.cluster.txn_writes import ReplicatedTxnWrites
from kcompat.server.cluster_port import StartedBroker
from kcompat.server.groups.group_service import GroupService
from kcompat.server.isr_port import ReadReplicaSelector
from kcompat.server.replica_manager import ReplicaManager
from kcompat.server.share.local_persister import LocalSharePersister
from kcompat.server.share.share_coordinator import ShareCoordinatorService
from kcompat.server.transactions.txn_service import TransactionService
from kcompat.storage.topic_store import CONSUMER_OFFSETS

log = logging.getLogger("kcompat.cluster")


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return [str(v).strip() for v in items if str(v).strip()]


def _from_base64(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


class ClusterAssembly:
    """The ClusterPort of a broker under KRaft controllers; see the module docstring. The parts the
    factories build (ISR manager, shards) are kept here for the life cycle and the images."""

    cluster_mode = True
    transaction_version = 0  # until the image finalizes one (set_transaction_version)

    # Built by the factories the broker's constructors call (isr, group_shards, txn_writes) or by start.
    _isr: IsrManager
    _groups: GroupShards
    _txns: TxnShards
    _shares: ShareShards
    _txn_service: TransactionService
    _replicas: ReplicaManager
    _fetchers: ReplicaFetcherManager
    _applier: ReplicaDeltaApplier

    def __init__(
        self,
        config: BrokerConfig,
        *,
        authorizer: Authorizer | None,
        now_ms: Callable[[], int],
        on_quotas: Callable[[QuotaTable], None] | None = None,
        on_tokens: Callable[[Mapping[str, TokenInformation]], None] | None = None,
        on_scram: Callable[[ScramUsers], None] | None = None,
    ) -> None:
        self._config = config
        self._now_ms = now_ms
        self.node_id = config.node_id
        self.bootstrap = parse_bootstrap(_names(config.get("controller.quorum.bootstrap.servers")))
        self.inter_broker = str(
            config.get("inter.broker.listener.name") or config.advertised_listeners[0].name
        )
        self.member = member = KRaftBroker(
            node_id=self.node_id,
            bootstrap=self.bootstrap,
            rack=config.get("broker.rack"),
            heartbeat_interval_ms=int(config.get("broker.heartbeat.interval.ms")),
            session_timeout_ms=int(config.get("broker.session.timeout.ms")),
            on_image=self._publish,
            before_image=self._before_publish,
        )
        self._image_log = ImageLog(self.node_id)
        # The replicas hosted here, made by the image's deltas; the replica manager reads them.
        self.hosted: dict[tuple[str, int], Partition] = {}

        # Forwarding, producer-id blocks and auto topic creation, all through the active controller.
        def leader() -> tuple[str, int] | None:
            return member.raft_leader

        self.forwarder = ForwardingManager(self.bootstrap, node_id=self.node_id, leader=leader)
        producer_ids = ControllerProducerIds(
            self.bootstrap,
            node_id=self.node_id,
            leader=leader,
            broker_epoch=lambda: member.lifecycle.broker_epoch,
        )
        # the config in force now
        auto_create = AutoTopicCreationManager(self.forwarder, lambda key: self.metadata.config.get(key))
        self.metadata = KRaftMetadata(
            config,
            # the ACLs are the image's (AccessControlEntryRecords)
            on_acls=None if authorizer is None else authorizer.replace,
            on_quotas=on_quotas,  # the client quotas are the image's (ClientQuotaRecords)
            on_tokens=on_tokens,  # and the delegation tokens (DelegationTokenRecords)
            on_scram=on_scram,  # and the SCRAM credentials (UserScramCredentialRecords)
            producer_ids=producer_ids,
            auto_create=auto_create.create,
            create_spec=auto_create.create_spec,
        )
        self._services: list[Any] = [self.forwarder, producer_ids, auto_create]  # closed at shutdown
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def serving(self) -> asyncio.Event:
        return self.member.serving

    def quorum_leader(self) -> tuple[str, int] | None:
        return self.member.raft_leader

    def image(self) -> MetadataImage:
        return self.metadata.image  # the published one (the follower's may be ahead)

    # --- the parts the broker's constructors ask for ----------------------------------------------

    def isr(self, replicas: ReplicaManager) -> IsrManager:
        member, config = self.member, self._config
        self._isr = IsrManager(
            node_id=self.node_id,
            channel=ControllerChannel(
                self.bootstrap, client_id=f"kcompat-broker-{self.node_id}-alter-partition"
            ),
            broker_epoch=lambda: member.lifecycle.broker_epoch,
            image=lambda: member.image,
            quorum_leader=lambda: member.raft_leader,
            partitions=self.hosted,
            waiters=replicas.fetch_waiters,
            lag_max_ms=int(config.get("replica.lag.time.max.ms")),
            now_ms=self._now_ms,
        )
        return self._isr

    def read_replica_selector(self) -> ReadReplicaSelector | None:
        return selector_named(self._config.get("replica.selector.class"))

    def offsets_leader_epoch(self, replicas: ReplicaManager) -> Callable[[int], int]:
        partitions = self.hosted

        def leader_epoch(p: int) -> int:
            part = partitions.get((CONSUMER_OFFSETS, p))
            return -1 if part is None else part.leader_epoch

        return leader_epoch

    def group_shards(self, service: GroupService, replicas: ReplicaManager) -> GroupShards:
        self._groups = GroupShards(
            service,
            partitions=self.hosted,
            waiters=replicas.fetch_waiters,
            topic=self.metadata.topic,
            timeout_ms=lambda: int(self.metadata.config.get("offsets.commit.timeout.ms")),
        )
        return self._groups

    def share_shards(self, service: ShareCoordinatorService, replicas: ReplicaManager) -> ShareShards:
        self._shares = ShareShards(
            service,
            partitions=self.hosted,
            waiters=replicas.fetch_waiters,
            topic=self.metadata.topic,
            timeout_ms=lambda: int(self.metadata.config.get("share.coordinator.write.timeout.ms")),
        )
        return self._shares

    def share_persister(self, coordinator: ShareCoordinatorService) -> NetworkSharePersister:
        """The share-partition leaders' Persister: the coordinator of each share-partition's state
        partition, here or on another broker (a connection per broker of its own)."""
        persister = NetworkSharePersister(
            LocalSharePersister(coordinator),
            BrokerChannels(self.metadata, self.inter_broker, self.node_id),
            self.metadata,
            clock=time.monotonic,
        )
        self._services.append(persister)
        return persister

    def txn_writes(self, service: TransactionService, replicas: ReplicaManager) -> ReplicatedTxnWrites:
        self._txn_service = service
        self._txns = TxnShards(
            service,
            partitions=self.hosted,
            waiters=replicas.fetch_waiters,
            topic=self.metadata.topic,
            timeout_ms=lambda: TXN_LOG_APPEND_TIMEOUT_MS,
        )
        # Connections of their own for markers and for verification: a marker's answer waits for
        # replication, and a produce's check must not queue behind it.
        markers = TxnMarkerSender(
            BrokerChannels(self.metadata, self.inter_broker, self.node_id),
            write_local=service.write_marker,
            partitions=self.hosted,
            waiters=replicas.fetch_waiters,
        )
        verifier = TxnVerifier(BrokerChannels(self.metadata, self.inter_broker, self.node_id))
        return ReplicatedTxnWrites(service, shards=self._txns, markers=markers, verifier=verifier)

    # --- life cycle -------------------------------------------------------------------------------

    def start(self, broker: StartedBroker) -> None:
        """Start registration, heartbeats and the metadata follower for a started Broker."""
        config, member = self._config, self.member
        replicas = self._replicas = broker.replicas
        logs = replicas.logs
        assert logs is not None, "ClusterAssembly.start runs after broker.start()"
        directory_id = _from_base64(next(iter(logs.directory_ids.values())))
        self._fetchers = ReplicaFetcherManager(
            FetcherSettings(
                node_id=self.node_id,
                cluster_id=broker.cluster_id,
                directory_id=directory_id,
                max_wait_ms=int(config.get("replica.fetch.wait.max.ms")),
                partition_max_bytes=int(config.get("replica.fetch.max.bytes")),
                backoff_ms=int(config.get("replica.fetch.backoff.ms")),
            ),
            broker_epoch=lambda: member.lifecycle.broker_epoch,
            topic_id=lambda name: member.image.topic_ids.get(name),
            now_ms=self._now_ms,
            # a follower's high watermark moved: wake consumers long-polling here (KIP-392)
            on_append=lambda p: replicas.fetch_waiters.notify((p.topic, p.index)),
        )
        self._isr.start()
        assignments = DirectoryAssignments(
            self.bootstrap,
            node_id=self.node_id,
            broker_epoch=lambda: member.lifecycle.broker_epoch,
            leader=lambda: member.raft_leader,
            image=lambda: member.image,
            logs=lambda: replicas.logs,
            hosted=self.hosted,
            interval_s=int(config.get("broker.heartbeat.interval.ms")) / 1000,
        )
        member.log_dir_ids, member.offline_log_dirs = assignments.online_dirs, assignments.offline_dirs
        assignments.start()
        self._services.append(assignments)
        self._applier = ReplicaDeltaApplier(
            self.node_id,
            self.metadata,
            replicas,
            self.hosted,
            self._fetchers,
            self.inter_broker,
            self._now_ms,
            caught_up=lambda image: image.offset + 1 >= member.loader.high_watermark > 0,
        )
        self._tasks.append(
            asyncio.create_task(self.forwarder.learn_controller_versions(), name="controller-api-versions")
        )
        member.start(
            broker.cluster_id,
            directory_id,
            # Every advertised listener with its security protocol (the bound port where 0 was advertised).
            [
                (x.name, *broker.endpoints.get(x.name, (x.host, x.port)), x.security_protocol)
                for x in config.advertised_listeners
            ],
        )
        interval_s = int(config.get("replica.high.watermark.checkpoint.interval.ms")) / 1000
        self._tasks.append(
            asyncio.create_task(_checkpoint_high_watermarks(replicas, interval_s), name="hw-checkpoint")
        )
        log.info(
            "cluster mode: broker %d of cluster %s joining the controllers at %s",
            self.node_id,
            broker.cluster_id,
            ",".join(_names(config.get("controller.quorum.bootstrap.servers"))),
        )

    async def shutdown(self, timeout_s: float) -> None:
        """Controlled shutdown through heartbeats, then the controller services, the follower
        fetchers (stopped last but one) and the ISR manager."""
        await self.member.shutdown(timeout_s)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for service in self._services:
            closed = service.close()
            if asyncio.iscoroutine(closed):
                await closed
        await self._fetchers.stop()
        await self._isr.stop()

    # --- each image -------------------------------------------------------------------------------

    async def _before_publish(self, image: MetadataImage) -> None:
        await self._replicas.make_logs(self._applier.new_logs(image))  # off the event loop, before apply

    def _publish(self, image: MetadataImage) -> None:
        self._image_log.publish(image)
        self._applier.apply(image)
        self._groups.on_image()  # group coordinators load and unload with __consumer_offsets leadership
        self._txns.on_image()  # and transaction coordinators with __transaction_state's
        self._shares.on_image()  # and the share coordinator with __share_group_state's
        self._txn_service.set_transaction_version(image.features.get("transaction.version", 0))


async def _checkpoint_high_watermarks(replicas: ReplicaManager, interval_s: float) -> None:
    """Kafka's highwatermark-checkpoint task; the last one is written by the logs' close."""
    while True:
        await asyncio.sleep(interval_s)
        await replicas.checkpoint_high_watermarks()
