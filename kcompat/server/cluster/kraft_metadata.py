"""KRaftMetadata: the MetadataView of a cluster-mode broker, read from the KRaft MetadataImage
(Kafka's KRaftMetadataCache).

Topics, partitions, topic ids and topic configs come from the latest published image; nothing is
stored here. Each topic's TopicInfo and TopicConfig is built once per change of that topic (the
image shares unchanged TopicImages between versions, so identity tells what changed).

What a cluster broker cannot do by itself raises ApiError: topic admin (CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs) is the controller's, reached by forwarding; producer ids come in
blocks from the controller (AllocateProducerIds). Both are outside this module.

Brokers as Metadata names them (KRaftMetadataCache.getAliveBrokerNodes): registered, unfenced, with
an endpoint for the listener the request came in on. A partition's offline replicas are those on a
broker that is not registered, fenced, or without that listener.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NoReturn

from kcompat.config import BrokerConfig, ConfigError, TopicConfig, topic_config
from kcompat.log.config import LogConfig
from kcompat.metadata.features import CLUSTER_SUPPORTED, KRAFT_VERSION, Features
from kcompat.metadata.image import TOPIC_RESOURCE, MetadataImage, PartitionRegistration, TopicImage
from kcompat.quotas.entities import QuotaTable
from kcompat.security.authorizer import AclBinding
from kcompat.security.delegation_tokens import TokenInformation
from kcompat.security.scram import ScramUsers
from kcompat.server.errors import ApiError
from kcompat.server.metadata_view import BrokerEndpoint, ConfigReads, PartitionDescription, ProducerIds
from kcompat.storage.topic_store import TopicInfo
from kcompat.wire.error_codes import ErrorCode

log = logging.getLogger("kcompat.cluster")

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class _Topic:
    image: TopicImage
    info: TopicInfo
    config: TopicConfig
    log_config: LogConfig


class ImageTopics:
    """The TopicsView over the current image."""

    def __init__(self, owner: KRaftMetadata) -> None:
        self._owner = owner

    def get(self, name: str) -> TopicInfo | None:
        return self._owner.topic(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        t = self._owner.image.topics_by_id.get(topic_id)
        return None if t is None else self._owner.topic(t.name)

    def names(self) -> list[str]:
        return sorted(self._owner.image.topic_ids)

    def all(self) -> list[TopicInfo]:
        return [t for name in self.names() if (t := self._owner.topic(name)) is not None]

    def __contains__(self, name: object) -> bool:
        return name in self._owner.image.topic_ids

    def __len__(self) -> int:
        return len(self._owner.image.topic_ids)


class _NoProducerIds:
    def next_id(self) -> int:
        raise ApiError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, "producer id blocks from the controller are not yet fetched"
        )


_NO_CONFIGS: Mapping[str, str] = MappingProxyType({})


class KRaftMetadata(ConfigReads):
    """The cluster-mode MetadataView (metadata_view.py); see the module docstring."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        on_acls: Callable[[list[AclBinding]], None] | None = None,
        on_quotas: Callable[[QuotaTable], None] | None = None,
        on_tokens: Callable[[Mapping[str, TokenInformation]], None] | None = None,
        on_scram: Callable[[ScramUsers], None] | None = None,
        producer_ids: ProducerIds | None = None,
        auto_create: Callable[[str], None] | None = None,
        create_spec: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """`on_acls` is given each new ACL set of the image (the broker's authorizer, when one is
        configured). Producer ids come in blocks from the KRaft controller, and a topic that
        auto.create.topics.enable creates is asked of the controller (answered LEADER_NOT_AVAILABLE
        meanwhile), as Kafka's RPCProducerIdManager and AutoTopicCreationManager do (assembly.py
        gives both; without them, COORDINATOR_NOT_AVAILABLE and no auto-creation)."""
        self._config = config
        self.node_id = config.node_id
        self.image = MetadataImage()
        self._topics: dict[str, _Topic] = {}
        self._view = ImageTopics(self)
        self.on_acls = on_acls
        self.on_quotas = on_quotas
        self.on_tokens = on_tokens
        self.on_scram = on_scram
        self._producer_ids: ProducerIds = _NoProducerIds() if producer_ids is None else producer_ids
        self._auto_create = auto_create
        self._create_spec = create_spec  # a CreatableTopic to ask the controller for

    def load(self) -> None:
        """Nothing is stored locally: the image arrives from the controllers."""

    def update_features(self, levels: Mapping[str, int]) -> None:
        raise AssertionError("cluster mode forwards UpdateFeatures to the controller")

    def features(self) -> Features:
        """The image's finalized levels at its offset (Kafka's KRaftMetadataCache.features),
        with the quorum's kraft.version, never the local config."""
        image = self.image
        levels = dict(image.features)
        levels[KRAFT_VERSION] = image.kraft_version
        return Features(CLUSTER_SUPPORTED, MappingProxyType(levels), max(image.offset, 0))

    def set_image(self, image: MetadataImage) -> None:
        previous, self.image = self.image, image
        if image.acls is not previous.acls and self.on_acls is not None:
            self.on_acls(list(image.acls.values()))  # the broker's authorizer takes the new set
        if image.client_quotas is not previous.client_quotas and self.on_quotas is not None:
            self.on_quotas(image.client_quotas)  # the broker's quota managers take the new table
        if image.delegation_tokens is not previous.delegation_tokens and self.on_tokens is not None:
            self.on_tokens(image.delegation_tokens)  # the broker's token manager takes them
        if image.scram is not previous.scram and self.on_scram is not None:
            self.on_scram(image.scram)  # SCRAM logins and Describe read the new credentials
        stale = [
            n
            for n, t in self._topics.items()
            if image.topics_by_id.get(t.info.topic_id) is not t.image
            or image.configs.get((TOPIC_RESOURCE, n)) is not previous.configs.get((TOPIC_RESOURCE, n))
        ]
        for name in stale:
            del self._topics[name]  # built again on first use (a changed topic or topic config)

    def _entry(self, name: str) -> _Topic | None:
        cached = self._topics.get(name)
        if cached is not None:
            return cached
        image = self.image.topic(name)
        if image is None:
            return None
        tc = self._topic_config_in(self.image, name)
        info = TopicInfo(name, image.topic_id, len(image.partitions), tc.overrides)
        entry = self._topics[name] = _Topic(image, info, tc, tc.log_config())
        return entry

    def _topic_config_in(self, image: MetadataImage, name: str, *, quiet: bool = False) -> TopicConfig:
        overrides = dict(image.configs.get((TOPIC_RESOURCE, name), {}))
        try:
            return topic_config(self._config, overrides)
        except ConfigError as e:  # a config Kafka knows and kcompat does not: its defaults, said once
            if not quiet:
                log.warning("topic %s: ignoring its configs (%s)", name, e)
            return topic_config(self._config)

    def log_config_in(self, image: MetadataImage, name: str) -> LogConfig:
        """The log config topic `name` will have once `image` is set (its logs made beforehand)."""
        return self._topic_config_in(image, name, quiet=True).log_config()

    # --- reads ---

    @property
    def topics(self) -> ImageTopics:
        return self._view

    @property
    def auto_create_topics(self) -> bool:
        # asked of the controller (AutoTopicCreationManager), once forwarding is wired
        return self._auto_create is not None and bool(self._config.get("auto.create.topics.enable"))

    def topic(self, name: str) -> TopicInfo | None:
        e = self._entry(name)
        return None if e is None else e.info

    def registration(self, name: str, partition: int) -> PartitionRegistration | None:
        e = self._entry(name)
        return None if e is None else e.image.partitions.get(partition)

    def leader_and_epoch(self, t: TopicInfo, partition: int) -> tuple[int, int]:
        p = self.registration(t.name, partition)
        return (NO_LEADER, -1) if p is None else (p.leader, p.leader_epoch)

    def describe_partition(self, t: TopicInfo, partition: int, listener: str) -> PartitionDescription:
        p = self.registration(t.name, partition)
        if p is None:
            return PartitionDescription(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), NO_LEADER, -1, [], [], [])
        live = {b.node_id for b in self.live_brokers(listener)}
        offline = [r for r in p.replicas if r not in live]
        error = 0 if p.leader in live else int(ErrorCode.LEADER_NOT_AVAILABLE)
        return PartitionDescription(
            error,
            p.leader,
            p.leader_epoch,
            list(p.replicas),
            list(p.isr),
            offline,
            list(p.elr),
            list(p.last_known_elr),
        )

    def partitions_stamp(self, t: TopicInfo) -> object:
        # Images are immutable and replaced on change: a topic's registrations and the brokers'
        # liveness (offline replicas, LEADER_NOT_AVAILABLE) are all a description reads.
        return (self.image.topic(t.name), self.image.brokers)

    def live_brokers(self, listener: str) -> list[BrokerEndpoint]:
        return self._brokers(listener, fenced=False)

    def fenced_brokers(self, listener: str) -> list[BrokerEndpoint]:
        return self._brokers(listener, fenced=True)

    def _brokers(self, listener: str, *, fenced: bool) -> list[BrokerEndpoint]:
        out = []
        for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id):
            if b.fenced != fenced:
                continue
            ep = next((e for e in b.endpoints if e.name == listener), None)
            if ep is not None:
                out.append(BrokerEndpoint(b.broker_id, ep.host, ep.port, b.rack))
        return out

    def broker_endpoint(self, node_id: int, listener: str) -> BrokerEndpoint | None:
        b = self.image.brokers.get(node_id)
        ep = None if b is None else next((e for e in b.endpoints if e.name == listener), None)
        return None if b is None or ep is None else BrokerEndpoint(node_id, ep.host, ep.port, b.rack)

    def controller_id(self, listener: str) -> int:
        """What Metadata names as controller: a live broker (KRaft brokers hide the controllers)."""
        brokers = self.live_brokers(listener)
        return self.node_id if not brokers else brokers[0].node_id

    def topic_config(self, t: TopicInfo) -> TopicConfig:
        e = self._entry(t.name)
        return topic_config(self._config) if e is None else e.config

    def log_config(self, t: TopicInfo) -> LogConfig:
        e = self._entry(t.name)
        return topic_config(self._config).log_config() if e is None else e.log_config

    @property
    def producer_ids(self) -> ProducerIds:
        return self._producer_ids

    # --- topic admin: the controller's ---

    def _controllers_only(self, what: str) -> NoReturn:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"cluster mode: {what} is done by the KRaft controller (send it with --bootstrap-controller)",
        )

    async def create_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str | None] | None = None,
        *,
        validate_only: bool = False,
        internal_ok: bool = False,
    ) -> TopicInfo:
        self._controllers_only("CreateTopics")

    @contextlib.asynccontextmanager
    async def topic_batch(self) -> AsyncIterator[None]:
        yield  # nothing to batch: create_topic refuses (CreateTopics is forwarded before any handler)

    async def create_internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        """Asked of the controller (a CreateTopics in an Envelope); not awaited: it is there once
        the image has it."""
        if self._create_spec is None:
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "cluster mode: topics are created by the controller"
            )
        rf = (
            replication_factor
            if replication_factor > 0
            else int(self._config.get("default.replication.factor"))
        )
        topic_configs = [{"name": k, "value": v} for k, v in configs.items()]
        self._create_spec(
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": rf,
                "assignments": [],
                "configs": topic_configs,
            }
        )

    async def auto_create_topic(self, name: str) -> TopicInfo:
        existing = self.topic(name)
        if existing is not None:
            return existing
        if self._auto_create is None:
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "cluster mode: topics are created by the controller"
            )
        self._auto_create(name)
        raise ApiError(ErrorCode.LEADER_NOT_AVAILABLE, f"topic {name} is being created by the controller")

    async def delete_topic(self, name: str) -> None:
        self._controllers_only("DeleteTopics")

    async def add_partitions(self, name: str, count: int) -> None:
        self._controllers_only("CreatePartitions")

    def alter_topic_configs(self, t: TopicInfo, overrides: dict[str, str]) -> None:
        self._controllers_only("AlterConfigs")

    def resource_configs(self, resource_type: int, name: str) -> Mapping[str, str]:
        """ConfigRecords of the image (a group's, a client-metrics subscription's)."""
        return self.image.configs.get((resource_type, name), _NO_CONFIGS)

    def resource_names(self, resource_type: int) -> list[str]:
        return sorted(name for rtype, name in self.image.configs if rtype == resource_type)

    def alter_resource_configs(self, resource_type: int, name: str, configs: Mapping[str, str]) -> None:
        self._controllers_only("group and client-metrics configs")

    def alter_broker_config(self, config: BrokerConfig) -> None:
        self._controllers_only("AlterConfigs")
