"""The broker: wires its parts together and runs their life cycle (Kafka's BrokerServer).

    frame ──► broker.handle = RequestDispatcher.handle (dispatcher.py: decode, route, encode)
          ──► handler(RequestContext, request) ──► body ──► [chunks]

    RequestContext (context.py) ──.services──► BrokerServices, built here once:
        .metadata ─────► MetadataView (metadata_view.py): LocalMetadata on one node, in cluster
                         mode KRaftMetadata (cluster/, imported only then)
        .replicas ─────► ReplicaManager (replica_manager.py): logs, parked fetches
        .groups ───────► GroupService (group_service.py): the group coordinator
        .transactions ─► TransactionService (txn_service.py): the transaction coordinator
        .share_services ► ShareServices (share/services.py): the share coordinator (__share_group_state)
                         and the share groups, built by the first share request
        .identity ─────► BrokerIdentity: node id, cluster id, advertised endpoints, rack
        .access, .scram, .stats, .fetch_sessions, .clock

What Kafka does with a request it cannot serve (UNSUPPORTED_VERSION for ApiVersions, a closed
connection otherwise) is the dispatcher's (CloseConnection); ApiError is errors.py's.

What cluster mode adds is built with the broker and handed to the constructors below, through the
ClusterPort (cluster_port.py): SingleNode's parts on one node, cluster/assembly.py's under KRaft
controllers (the only import of kcompat.server.cluster outside it, made only then).

Handlers run on the event loop. Appends and reads of the page cache are fast enough to stay there;
blocking work that can be long (retention, fsync on close) runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from kcompat.config import BrokerConfig, new_cluster_id
from kcompat.config.errors import ConfigError
from kcompat.kafka_uuid import random_uuid
from kcompat.log.manager import META_PROPERTIES, check_meta_properties, open_file_limit, read_properties
from kcompat.log.segment_files import SEGMENT_FILES, bound_for
from kcompat.metadata.features import TRANSACTION_VERSION
from kcompat.security.authorizer import Authorizer
from kcompat.security.scram import CredentialProvider, ScramCredential, ScramCredentials
from kcompat.server.auth.delegation_tokens import DelegationTokenManager
from kcompat.server.broker_stats import BrokerStats
from kcompat.server.client_telemetry import ClientTelemetry
from kcompat.server.cluster_port import ClusterPort, SingleNode
from kcompat.server.context import Access, BrokerIdentity, BrokerServices, CachedSetting, RequestContext
from kcompat.server.dispatcher import CloseConnection, RequestDispatcher
from kcompat.server.fetch_session import FetchManager, FetchSessionCache
from kcompat.server.groups.group_configs import GroupConfigs
from kcompat.server.groups.group_service import GroupService
from kcompat.server.groups.offsets_topic import OffsetsTopic
from kcompat.server.metadata_view import MetadataView
from kcompat.server.network.peer import Client
from kcompat.server.quotas.client_quota_manager import QuotaManagers
from kcompat.server.replica_manager import ReplicaManager
from kcompat.server.share.services import ShareServices
from kcompat.server.transactions.txn_service import TransactionService
from kcompat.storage.acl_store import AclStore
from kcompat.storage.delegation_token_store import DelegationTokenStore
from kcompat.storage.quota_store import QuotaStore
from kcompat.storage.scram_credentials import FILE_NAME as SCRAM_FILE
from kcompat.storage.scram_credentials import ScramCredentialStore
from kcompat.storage.topic_store import SHARE_GROUP_STATE

if TYPE_CHECKING:  # built on first use (Broker.faults, Broker.captures, the share services)
    from kcompat.capture import CaptureEngine
    from kcompat.faults import FaultEngine
    from kcompat.server.share.persister import Persister
    from kcompat.server.share.share_coordinator import ShareCoordinatorService
    from kcompat.server.share.share_group_service import ShareService
    from kcompat.telemetry.client_metrics import ClientMetricsManager

log = logging.getLogger("kcompat.server")

__all__ = ["Broker"]


def is_cluster_member(config: BrokerConfig) -> bool:
    """Cluster mode: a broker under Kafka's KRaft controllers (process.roles=broker and a quorum)."""
    return bool(
        config.get("process.roles") == ["broker"] and config.get("controller.quorum.bootstrap.servers")
    )


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        # Node id, cluster id (set at start), log dirs, rack, advertised endpoints by listener.
        self.identity = BrokerIdentity(config)
        cluster_member = is_cluster_member(config)
        # SCRAM credentials (salted keys, never passwords): a single node's file (--add-scram users
        # are stored at start), a cluster member's metadata image (UserScramCredentialRecords).
        self.scram_store = None if cluster_member else ScramCredentialStore(self.log_dirs[0])
        self.scram: ScramCredentials = self.scram_store or CredentialProvider()
        self.initial_scram_users: list[tuple[str, str, ScramCredential]] = []
        # ACLs: None without authorizer.class.name (then every check is one `is None` test).
        self.authorizer: Authorizer | None = None
        self.acl_store = AclStore(self.log_dirs[0])
        if config.get("authorizer.class.name"):
            super_users = [u.strip() for u in str(config.get("super.users") or "").split(";") if u.strip()]
            self.authorizer = Authorizer(super_users, bool(config.get("allow.everyone.if.no.acl.found")))
        # Client quotas: a single node's in a file beside the ACLs, cluster mode's from the image.
        self.quotas = QuotaManagers(
            int(config.get("quota.window.num")),
            int(config.get("quota.window.size.seconds")),
            None if cluster_member else QuotaStore(self.log_dirs[0]),
            clock,
        )
        # Delegation tokens (KIP-48): a single node keeps them in a file, a cluster member has the image's.
        self.tokens = DelegationTokenManager(
            config,
            None if cluster_member else DelegationTokenStore(self.log_dirs[0]),
            clock,
        )
        self.cluster: ClusterPort
        if cluster_member:
            # Cluster mode, under Kafka's KRaft controllers: the one import of cluster/ (its assembly).
            from kcompat.server.cluster.assembly import ClusterAssembly

            self.cluster = ClusterAssembly(
                config,
                authorizer=self.authorizer,
                now_ms=self.now_ms,
                on_quotas=self.quotas.replace,
                on_tokens=self.tokens.replace,
                on_scram=self.scram.replace if isinstance(self.scram, CredentialProvider) else None,
            )
        else:
            # Topics, producer ids, dynamic configs in kcompat.storage files; metadata changes open,
            # delete and reconfigure the replica manager's logs.
            self.cluster = SingleNode(config, self.log_dirs[0], logs=lambda: self.replicas)
        cluster = self.cluster
        self.metadata: MetadataView = cluster.metadata
        # (host, port) of the KRaft quorum leader once known (None on a single node).
        self.quorum_leader: Callable[[], tuple[str, int] | None] = cluster.quorum_leader
        # The partition logs and the fetches parked on them; one append path wakes those fetches.
        self.replicas = ReplicaManager(
            topic=self.metadata.topic,
            log_config=self.metadata.log_config,
            cluster_mode=cluster.cluster_mode,
            isr=cluster.isr,
            hosted=cluster.hosted,
            read_replica=cluster.read_replica_selector(),
        )
        self.fetch_sessions = FetchManager(
            FetchSessionCache(int(config.get("max.incremental.fetch.session.cache.slots")))
        )
        # The configs set on each group (ConfigResource 32), read by consumer and share groups alike.
        group_configs = GroupConfigs(self.metadata)
        # Consumer groups and committed offsets, through narrow ports (no reference back to the broker).
        self.group_service = GroupService(
            now_ms=self.now_ms,
            setting=config.get,
            offsets_topic=OffsetsTopic(
                lookup=self.metadata.topic,
                create=self.metadata.auto_create_topic,
                partition_log=self.replicas.log_now,
                append=self.replicas.append,
                setting=config.get,
                leader_epoch=cluster.offsets_leader_epoch(self.replicas),
            ),
            topic=self.metadata.topic,
            topics=self.metadata.topics.all,
            shards=lambda service: cluster.group_shards(service, self.replicas),
            configs=group_configs,
        )
        # Transactions: the coordinator of every transactional id, its markers appended through the replicas.
        self.txn_service = TransactionService(
            now_ms=self.now_ms,
            setting=config.get,
            lookup=self.metadata.topic,
            create=self.metadata.auto_create_topic,
            partition_log=self.replicas.log_now,
            append=self.replicas.append,
            new_producer_id=self._new_producer_id,
            groups=self.group_service,
            transaction_version=cluster.transaction_version,
            writes=lambda service: cluster.txn_writes(service, self.replicas),
        )
        # Share groups and their durable state, built by the first share request (share/services.py).
        self.share_services = ShareServices(
            now_ms=self.now_ms,
            setting=lambda name: self.config.get(name),
            coordinator_setting=config.get,
            metadata=self.metadata,
            replicas=self.replicas,
            cluster=cluster,
            group_overrides=group_configs.overrides,
            group_log=self.group_service,
        )
        if cluster.cluster_mode:  # shards of __share_group_state load as their leadership arrives
            self.share_services.build()
        self._background: list[asyncio.Task[None]] = []
        self.closing = False
        # What is counted as requests are served (plain ints; the admin listener's /metrics reads them).
        self.stats = BrokerStats()
        # Client telemetry (KIP-714): what clients push, shown by the admin listener.
        self.client_telemetry = ClientTelemetry(
            lambda: int(self.config.get("telemetry.max.bytes")), random_uuid
        )
        # What handlers see, built once and shared by every request's RequestContext.
        self.services = BrokerServices(
            identity=self.identity,
            metadata=self.metadata,
            replicas=self.replicas,
            groups=self.group_service,
            transactions=self.txn_service,
            share_services=self.share_services,
            access=Access(self.authorizer, self.acl_store),
            scram=self.scram,
            stats=self.stats,
            fetch_sessions=self.fetch_sessions,
            clock=clock,
            fetch_max_bytes=CachedSetting(self.metadata, "fetch.max.bytes"),
            forwarded_versions=cluster.forwarder.versions,
            quotas=self.quotas,
            tokens=self.tokens,
            telemetry=self.client_telemetry,
        )
        # Requests: decoded, routed to their handler with a RequestContext, encoded.
        self.dispatcher = RequestDispatcher(
            partial(RequestContext, self.services), self.stats, cluster.forwarder, quotas=self.quotas
        )
        self.handle = self.dispatcher.handle
        self._faults: FaultEngine | None = None
        self._captures: CaptureEngine | None = None

    @property
    def faults(self) -> FaultEngine:
        """The fault rules set at run time (kcompat/faults), built when first asked for (the admin
        listener's /faults, its metrics); with no rule set a request pays one test."""
        if self._faults is None:
            from kcompat.faults import FaultEngine
            from kcompat.server.fault_hook import FaultHook

            self._faults = FaultEngine()
            self.dispatcher.set_faults(
                FaultHook(self._faults, self.node_id, CloseConnection, self._topic_name)
            )
        return self._faults

    @property
    def captures(self) -> CaptureEngine:
        """The traffic captures started at run time (kcompat/capture), built when first asked for
        (the admin listener's /captures, its metrics); with none running a request pays one test."""
        if self._captures is None:
            from kcompat.capture import CaptureEngine
            from kcompat.server.capture_hook import CaptureHook

            self._captures = CaptureEngine(self.log_dirs[0] / "captures", self._topic_name)
            self.dispatcher.set_capture(CaptureHook(self._captures, self.node_id))
        return self._captures

    @property
    def telemetry(self) -> ClientMetricsManager:
        """What clients pushed (KIP-714), built on first use (client_telemetry.py)."""
        return self.client_telemetry.manager

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.metadata.topics.by_id(topic_id)
        return topic.name if topic is not None else None

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # The share services, built on first use (tests read them here).
    @property
    def share_coordinator(self) -> ShareCoordinatorService:
        return self.share_services.coordinator

    @property
    def share_persister(self) -> Persister:
        return self.share_services.persister

    @property
    def share_service(self) -> ShareService:
        return self.share_services.service

    def client_disconnected(self, client: Client) -> None:
        """A client connection closed: the share sessions it opened end (fetch sessions outlive it)."""
        self.share_services.connection_closed(client.connection_id)
        self.quotas.mutes.pop(client.connection_id, None)  # a throttle it had not waited out
        self.client_telemetry.connection_closed(client.connection_id)

    def _new_producer_id(self) -> int:
        ids = self.metadata.producer_ids
        assert ids is not None
        return ids.next_id()

    def bound(self, listener: str, port: int) -> None:
        """The transport bound `listener` to `port`: an advertised port 0 becomes that port."""
        self.identity.bound(listener, port)

    @property
    def config(self) -> BrokerConfig:
        """The broker's config, dynamic values included (they change with AlterConfigs)."""
        return self.metadata.config

    # Identity, read by the cluster assembly, serve.py and the console (handlers: ctx.identity).
    @property
    def node_id(self) -> int:
        return self.identity.node_id

    @property
    def cluster_id(self) -> str:
        return self.identity.cluster_id

    @property
    def log_dirs(self) -> list[Path]:
        return self.identity.log_dirs

    @property
    def advertised_host(self) -> str:
        return self.identity.advertised_host

    @property
    def advertised_port(self) -> int:
        return self.identity.advertised_port

    @property
    def endpoints(self) -> dict[str, tuple[str, int]]:
        return self.identity.endpoints

    @property
    def rack(self) -> str | None:
        return self.identity.rack

    # --- life cycle ----------------------------------------------------------------------------

    def _no_local_scram_users(self) -> None:
        """Cluster mode: SCRAM users are the metadata log's, so none is taken from this node."""
        how = "add them with kafka-configs --alter --entity-type users (or kafka-storage format --add-scram on the controllers)"
        if (self.log_dirs[0] / SCRAM_FILE).exists():
            log.warning(
                "%s is not read in cluster mode: SCRAM users live in __cluster_metadata; %s, then delete the file",
                self.log_dirs[0] / SCRAM_FILE,
                how,
            )
        if self.initial_scram_users:
            raise ConfigError(
                f"--add-scram is for a single node: in cluster mode SCRAM users live in __cluster_metadata; {how}"
            )

    async def start(self) -> None:
        if self.scram_store is None:
            self._no_local_scram_users()
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.identity.cluster_id = self._load_cluster_id()
        for d in self.log_dirs:  # before anything is written: a dir of another cluster or node is refused
            check_meta_properties(d, self.cluster_id, self.node_id)
        self.metadata.load()
        if not self.cluster.cluster_mode:  # the level kafka-features left this node at
            self.txn_service.set_transaction_version(
                self.metadata.features().finalized.get(TRANSACTION_VERSION, 0)
            )
        if self.scram_store is not None:
            self.scram_store.load()
        self.tokens.load()
        if self.authorizer is not None and not is_cluster_member(self.config):
            for acl in self.acl_store.load():
                self.authorizer.add(acl)
        if self.scram_store is not None and self.initial_scram_users:
            for user, mechanism, credential in self.initial_scram_users:
                self.scram_store.upsert(user, mechanism, credential)
            self.scram_store.save()
        SEGMENT_FILES.set_bound(
            bound_for(int(self.config.get("log.segment.descriptors.max")), open_file_limit())
        )
        await self.replicas.start(
            self.log_dirs,
            self.metadata.default_log_config(),
            cluster_id=self.cluster_id,
            node_id=self.node_id,
            topic_configs=self.metadata.log_configs(),
            clock=self.now_ms,
            topics=self.metadata.topics.all(),
            recovery_threads=int(self.config.get("num.recovery.threads.per.data.dir")),
        )
        interval = int(self.config.get("log.retention.check.interval.ms"))
        self._background.append(asyncio.create_task(self._maintenance_loop(interval / 1000)))
        if self.config.get("log.cleaner.enable"):
            self._background.append(asyncio.create_task(self._cleaner_loop()))
        if self.tokens.sweeps:
            self._background.append(asyncio.create_task(self.tokens.run_expiry_checks()))
        await self.group_service.start()  # replays __consumer_offsets
        # replays __transaction_state (its markers settle group offsets); none: built on first use
        await self.txn_service.start(load=self.cluster.cluster_mode)
        # Share state to load (__share_group_state), or share members to time out: built now.
        state = self.metadata.topic(SHARE_GROUP_STATE) is not None
        await self.share_services.start(load=state or self.group_service.share_deadline_ms() is not None)
        log.info(
            "broker %d of cluster %s started with %d topic(s)",
            self.node_id,
            self.cluster_id,
            len(self.metadata.topics),
        )

    def _load_cluster_id(self) -> str:
        """The configured cluster.id, else the one in meta.properties, else a new one (persisted by
        the LogManager in meta.properties of every log dir)."""
        configured = self.config.cluster_id
        if configured:
            return configured
        for d in self.log_dirs:
            path = d / META_PROPERTIES
            if path.exists():
                cid = read_properties(path).get("cluster.id")
                if cid:
                    return cid
        return new_cluster_id()

    async def begin_shutdown(self) -> None:
        """Answer what is parked (long-polling Fetches, JoinGroup/SyncGroup waits) now, so that the
        transport's grace period is spent finishing requests rather than waiting out timeouts."""
        self.replicas.begin_shutdown()
        await self.share_services.close()
        await self.txn_service.close()
        await self.group_service.close()

    async def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        await self.begin_shutdown()
        for task in self._background:
            task.cancel()
        for task in self._background:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("background task failed while closing")
        if self._captures is not None:
            self._captures.close()  # capture files: what is queued is written
        await self.replicas.close(int(self.config.get("log.close.timeout.ms")) / 1000)

    async def _maintenance_loop(self, interval_s: float) -> None:
        """Retention, flushes by flush.ms, compaction, checkpoints: in a worker thread."""
        while True:
            await asyncio.sleep(interval_s)
            await self.run_maintenance()

    async def _cleaner_loop(self) -> None:
        """Kafka's CleanerThread: clean what is due, and back off log.cleaner.backoff.ms when nothing was."""
        while True:
            if not await self.replicas.run_cleaner(self.now_ms()):
                await asyncio.sleep(int(self.config.get("log.cleaner.backoff.ms")) / 1000)

    async def run_maintenance(self) -> None:
        await self.replicas.run_maintenance(self.now_ms())
