"""What a handler sees besides its request body: the broker's services, narrowed (Kafka's
KafkaApis is given its managers one by one, not the BrokerServer).

    Broker ──builds once──► BrokerServices (frozen: identity, metadata, replicas, groups, ...)
    RequestDispatcher ──per request──► RequestContext(services, client, request) ──► handler

A context is one small allocation of three slots: Produce and Fetch build one per request, so the
services are shared by reference and read through properties, never copied into each context.
Nothing here holds the Broker: a handler reaches only what is named below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcompat.config import BrokerConfig
    from kcompat.security.authorizer import Authorizer
    from kcompat.security.scram import ScramCredentials
    from kcompat.server.auth.delegation_tokens import DelegationTokenManager
    from kcompat.server.broker_stats import BrokerStats
    from kcompat.server.client_telemetry import ClientTelemetry
    from kcompat.server.fetch_session import FetchManager
    from kcompat.server.groups.group_service import GroupService
    from kcompat.server.metadata_view import MetadataView
    from kcompat.server.quotas.client_quota_manager import QuotaManagers
    from kcompat.server.replica_manager import ReplicaManager
    from kcompat.server.share.services import ShareServices
    from kcompat.server.share.share_coordinator import ShareCoordinatorService
    from kcompat.server.share.share_group_service import ShareService
    from kcompat.server.transactions.txn_service import TransactionService
    from kcompat.storage.acl_store import AclStore
    from kcompat.wire.protocol import Request

__all__ = ["Access", "BrokerIdentity", "BrokerServices", "CachedSetting", "RequestContext"]


class BrokerIdentity:
    """Who this broker is to its clients: node id, rack, log dirs, the cluster id (known once the
    broker has started) and the endpoint it advertises on each listener (an advertised port 0
    becomes the port the transport bound, see `bound`)."""

    __slots__ = (
        "advertised_host",
        "advertised_port",
        "cluster_id",
        "endpoints",
        "log_dirs",
        "node_id",
        "rack",
    )

    def __init__(self, config: BrokerConfig) -> None:
        self.node_id: int = config.node_id
        self.cluster_id: str = ""
        # Absolute, as Kafka's LogManager holds them (DescribeLogDirs names them so).
        self.log_dirs: list[Path] = [Path(d).absolute() for d in config.log_dirs]
        listener = config.advertised_listeners[0]
        self.advertised_host: str = listener.host
        self.advertised_port: int = listener.port  # the transport sets the bound port when this is 0
        # Metadata names the endpoint of the listener a request came in on, as Kafka does.
        self.endpoints: dict[str, tuple[str, int]] = {
            x.name: (x.host, x.port) for x in config.advertised_listeners
        }
        rack = config.get("broker.rack")  # read-only (not a dynamic config): fixed for the run
        self.rack: str | None = str(rack) if rack else None

    def bound(self, listener: str, port: int) -> None:
        """The transport bound `listener` to `port`: an advertised port 0 becomes that port."""
        host, advertised = self.endpoints.get(listener, ("", -1))
        if advertised == 0:
            self.endpoints[listener] = (host, port)
            if self.advertised_port == 0 and host == self.advertised_host:
                self.advertised_port = port

    def endpoint(self, listener: str | None) -> tuple[str, int]:
        """(host, port) clients of `listener` are told to use (the first advertised one without)."""
        default = (self.advertised_host, self.advertised_port)
        return self.endpoints.get(listener, default) if listener else default


@dataclass(frozen=True, slots=True)
class Access:
    """ACLs: the authorizer (None without authorizer.class.name, so that each check is one
    `is None` test) and the store CreateAcls/DeleteAcls persist a change to."""

    authorizer: Authorizer | None
    store: AclStore

    def save(self) -> None:
        """Persist the ACL set after CreateAcls/DeleteAcls changed it (atomic; before the answer)."""
        if self.authorizer is not None:
            self.store.save(self.authorizer.acls())


class CachedSetting:
    """A numeric broker setting read on a hot path (fetch.max.bytes on every Fetch): looked up again
    only when the config object changes (AlterConfigs replaces it), not through the property table
    each time (~0.5 us)."""

    __slots__ = ("_config", "_metadata", "_name", "_value")

    def __init__(self, metadata: MetadataView, name: str) -> None:
        self._metadata = metadata
        self._name = name
        self._config: BrokerConfig | None = None
        self._value = 0

    def __call__(self) -> int:
        cfg = self._metadata.config
        if cfg is not self._config:
            self._config, self._value = cfg, int(cfg.get(self._name))
        return self._value


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """The broker's services as handlers use them; built once by the Broker, shared by every context."""

    identity: BrokerIdentity
    metadata: MetadataView  # topics, topic ids, producer ids, dynamic configs, topic admin
    replicas: ReplicaManager  # the partition logs and parked fetches (append here: it wakes them)
    groups: GroupService  # the group coordinator
    transactions: TransactionService  # the transaction coordinator
    # share groups (KIP-932) and the share coordinator (__share_group_state), built on first use
    share_services: ShareServices
    access: Access
    scram: ScramCredentials  # a single node's file, or cluster mode's metadata image
    stats: BrokerStats  # what is counted as requests are served (the admin listener's /metrics)
    fetch_sessions: FetchManager
    clock: Callable[[], float]  # seconds, as time.time
    fetch_max_bytes: Callable[[], int]
    # Cluster mode: the API versions the active controller answers (forwarded to it; ApiVersions
    # lists them); None on a single node.
    forwarded_versions: Callable[[], dict[int, tuple[int, int]]]
    quotas: QuotaManagers  # client quotas: the table and the produce/fetch/request managers
    tokens: DelegationTokenManager  # delegation tokens (KIP-48): the table, its file, their SCRAM
    telemetry: ClientTelemetry  # KIP-714: client instances, subscriptions, pushed metrics


class RequestContext:
    """What a handler sees besides its request body: the services, the client and the request."""

    __slots__ = ("client", "request", "services")

    def __init__(self, services: BrokerServices, client: Any, request: Request[Any]) -> None:
        self.services = services
        self.client = client
        self.request = request

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def listener(self) -> str:
        """The name of the listener the request came in on (Metadata names brokers on it)."""
        return self.client.listener if self.client is not None else ""

    @property
    def endpoint(self) -> tuple[str, int]:
        """(host, port) this broker advertises on the request's listener."""
        return self.services.identity.endpoint(getattr(self.client, "listener", None))

    @property
    def now_ms(self) -> int:
        return int(self.services.clock() * 1000)

    @property
    def clock(self) -> Callable[[], float]:
        return self.services.clock

    @property
    def identity(self) -> BrokerIdentity:
        return self.services.identity

    @property
    def metadata(self) -> MetadataView:
        """Topics, topic ids, producer ids, dynamic configs and topic admin."""
        return self.services.metadata

    @property
    def config(self) -> BrokerConfig:
        """The broker's config, dynamic values included (they change with AlterConfigs)."""
        return self.services.metadata.config

    @property
    def replicas(self) -> ReplicaManager:
        """The partition logs and parked fetches (append here: it wakes the fetches)."""
        return self.services.replicas

    @property
    def groups(self) -> GroupService:
        return self.services.groups

    @property
    def share(self) -> ShareService:
        return self.services.share_services.service

    @property
    def transactions(self) -> TransactionService:
        return self.services.transactions

    @property
    def share_coordinator(self) -> ShareCoordinatorService:
        return self.services.share_services.coordinator

    @property
    def authorizer(self) -> Authorizer | None:
        return self.services.access.authorizer

    @property
    def access(self) -> Access:
        return self.services.access

    @property
    def scram(self) -> ScramCredentials:
        return self.services.scram

    @property
    def tokens(self) -> DelegationTokenManager:
        return self.services.tokens

    @property
    def stats(self) -> BrokerStats:
        return self.services.stats

    @property
    def quotas(self) -> QuotaManagers:
        return self.services.quotas

    @property
    def telemetry(self) -> ClientTelemetry:
        return self.services.telemetry

    @property
    def fetch_sessions(self) -> FetchManager:
        return self.services.fetch_sessions

    @property
    def fetch_max_bytes(self) -> int:
        return self.services.fetch_max_bytes()

    def forwarded_versions(self) -> dict[int, tuple[int, int]]:
        """Cluster mode: the API versions the active controller answers; none on a single node."""
        return self.services.forwarded_versions()
