"""LocalMetadata: the MetadataView (metadata_view.py) of a single node: topics, partitions, topic
ids, producer ids, dynamic broker configs, and the topic admin that changes them (Kafka's
MetadataCache and, for a single node, its controller), kept in kcompat.storage files.

    LocalMetadata ──changes──► PartitionLogs port (the ReplicaManager): open, delete, reconfigure

Every change is persisted (kcompat.storage) before it is applied, and applied to the partition
logs before the request that made it is answered.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from kcompat.config import (
    BrokerConfig,
    ConfigError,
    TopicConfig,
    topic_config,
    validate_topic_configs,
)
from kcompat.config.broker_share_properties import share_state_topic_configs
from kcompat.kafka_uuid import ZERO_UUID
from kcompat.log.config import LogConfig
from kcompat.log.errors import KafkaStorageError
from kcompat.metadata.features import (
    ELR_VERSION,
    GROUP_VERSION,
    SHARE_VERSION,
    SINGLE_NODE_SUPPORTED,
    STREAMS_VERSION,
    TRANSACTION_VERSION,
    Features,
)
from kcompat.server.errors import ApiError
from kcompat.server.metadata_view import (
    BrokerEndpoint,
    ConfigReads,
    PartitionDescription,
    PartitionLogs,
    ProducerIds,
)
from kcompat.storage.feature_store import FeatureStore
from kcompat.storage.producer_id_store import ProducerIdManager
from kcompat.storage.resource_configs import ResourceConfigStore
from kcompat.storage.topic_store import (
    CONSUMER_OFFSETS,
    INTERNAL_TOPICS,
    SHARE_GROUP_STATE,
    TRANSACTION_STATE,
    InvalidTopic,
    TopicInfo,
    TopicStore,
    validate_name,
)
from kcompat.wire.error_codes import ErrorCode

log = logging.getLogger("kcompat.server")


class LocalMetadata(ConfigReads):
    """The single-node MetadataView: kept in kcompat.storage files in the first log dir."""

    def __init__(self, config: BrokerConfig, directory: Path, logs: Callable[[], PartitionLogs]) -> None:
        self._config = config
        self._node_id = config.node_id  # static; read on every Produce and Fetch partition
        self._topics = TopicStore(directory)
        self._producer_ids = ProducerIdManager(directory)
        self._topic_configs: dict[str, TopicConfig] = {}
        self._log_configs: dict[str, LogConfig] = {}  # each topic's, built once per config change
        # The ReplicaManager, asked for when a change lands (it is built after this, on what this reads).
        self._partition_logs = logs
        self._unsaved: list[tuple[TopicInfo, range]] | None = None  # new logs waiting for the batch's save
        self._resource_configs = ResourceConfigStore(directory)  # groups, client-metrics subscriptions
        self._features = FeatureStore(directory)

    def features(self) -> Features:
        """The levels a single node finalizes, fixed while it runs (epoch 0): those of a Kafka
        4.3.1 broker formatted with defaults, but for metadata.version and kraft.version;
        group.version only while the consumer protocol is enabled."""
        levels = {TRANSACTION_VERSION: 2, SHARE_VERSION: 1, ELR_VERSION: 1, STREAMS_VERSION: 1}
        if "consumer" in self._config.get("group.coordinator.rebalance.protocols"):
            levels[GROUP_VERSION] = 1
        levels |= self._features.levels  # what kafka-features upgraded or downgraded
        return Features(SINGLE_NODE_SUPPORTED, MappingProxyType(levels), self._features.epoch)

    def update_features(self, levels: Mapping[str, int]) -> None:
        self._features.update(levels)

    def load(self) -> None:
        """Read the stored topics, producer ids and dynamic broker configs."""
        self._topics.load()
        self._resource_configs.load()
        self._features.load()
        self._producer_ids.load()
        node, default = self._topics.broker_configs()
        if node or default:
            try:
                cfg = self._config
                if default:
                    cfg = cfg.with_dynamic(default, cluster_default=True)
                if node:
                    cfg = cfg.with_dynamic(node)
                self._set_config(cfg)
            except ConfigError as e:
                log.warning("ignoring stored dynamic broker configs: %s", e)
        for t in self._topics.all():
            self._topic_configs[t.name] = topic_config(self._config, t.configs)

    # --- reads ---------------------------------------------------------------------------------

    @property
    def topics(self) -> TopicStore:
        return self._topics

    @property
    def auto_create_topics(self) -> bool:
        return bool(self._config.get("auto.create.topics.enable"))

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def leader_and_epoch(self, t: TopicInfo, partition: int) -> tuple[int, int]:
        """This broker leads every partition, at the topic's leader epoch."""
        return self._node_id, t.leader_epoch

    def describe_partition(self, t: TopicInfo, partition: int, listener: str) -> PartitionDescription:
        node = self._node_id
        return PartitionDescription(0, node, t.leader_epoch, [node], [node], [])

    def partitions_stamp(self, t: TopicInfo) -> object:
        return (t.topic_id, t.partitions, t.leader_epoch)

    def live_brokers(self, listener: str) -> list[BrokerEndpoint] | None:
        return None

    def fenced_brokers(self, listener: str) -> list[BrokerEndpoint]:
        return []

    def controller_id(self, listener: str) -> int | None:
        return None

    def topic_config(self, t: TopicInfo) -> TopicConfig:
        tc = self._topic_configs.get(t.name)
        if tc is None:
            tc = self._topic_configs[t.name] = topic_config(self._config, t.configs)
        return tc

    def log_config(self, t: TopicInfo) -> LogConfig:
        lc = self._log_configs.get(t.name)
        if lc is None:
            lc = self._log_configs[t.name] = self.topic_config(t).log_config()
        return lc

    @property
    def producer_ids(self) -> ProducerIds:
        return self._producer_ids

    # --- topic admin ---------------------------------------------------------------------------

    def check_new_topic(self, name: str) -> None:
        """Kafka's checks of a name for a topic about to be created (ApiError otherwise)."""
        try:
            validate_name(name)
        except InvalidTopic as e:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
        if name in self._topics:
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        other = self._topics.colliding(name)
        if other is not None:
            raise ApiError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}"
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
        """Create a topic and its partition logs (or only check that it could be, with validate_only)."""
        self.check_new_topic(name)
        if name in INTERNAL_TOPICS and not internal_ok:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited.")
        try:
            overrides = validate_topic_configs(configs or {})
        except ConfigError as e:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(e)) from None
        if validate_only:
            return TopicInfo(name, ZERO_UUID, partitions, overrides)
        try:
            t = self._topics.create(name, partitions, overrides)
        except OSError as e:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record topic {name}: {e}") from None
        self._set_topic_config(name, topic_config(self._config, overrides))
        self._open_logs(t, range(partitions))
        log.info(
            "created topic %s with %d partition(s)%s",
            name,
            partitions,
            f", configs {overrides}" if overrides else "",
        )
        return t

    @contextlib.asynccontextmanager
    async def topic_batch(self) -> AsyncIterator[None]:
        """Topics created inside are recorded with one save at the end (CreateTopics), and their logs
        made after it. If that save fails, they are undone and ApiError KAFKA_STORAGE_ERROR is raised."""
        if self._unsaved is not None:  # nested: the outer batch saves
            yield
            return
        unsaved: list[tuple[TopicInfo, range]] = []
        self._unsaved = unsaved
        undo: list[TopicInfo] = []
        try:
            with self._topics.deferred() as created:
                try:
                    yield
                finally:
                    self._unsaved = None
                undo = [t for t in map(self._topics.get, created) if t is not None]
        except OSError as e:
            for t in undo:
                self._topic_configs.pop(t.name, None)
                self._log_configs.pop(t.name, None)
                await self._logs.delete_partitions(t.name, t.partitions)
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record the new topics: {e}") from None
        finally:
            for t, partitions in unsaved:  # made now if recorded (the body may have raised after some)
                current = self._topics.get(t.name)
                if current is not None and current.topic_id == t.topic_id:
                    self._logs.create_partitions_later(t, partitions)
                else:
                    self._logs.release_partitions(len(partitions))

    async def create_internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        """A single node has one replica of everything: the replication factor asked for is moot."""
        await self.create_topic(name, partitions, dict(configs))

    async def auto_create_topic(self, name: str) -> TopicInfo:
        """Create a topic as auto.create.topics.enable does: broker defaults, or the internal topics' own."""
        if name == CONSUMER_OFFSETS:
            return await self.create_topic(
                name,
                int(self._config.get("offsets.topic.num.partitions")),
                {
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "segment.bytes": str(self._config.get("offsets.topic.segment.bytes")),
                },
                internal_ok=True,
            )
        if name == TRANSACTION_STATE:
            return await self.create_topic(
                name,
                int(self._config.get("transaction.state.log.num.partitions")),
                {
                    "cleanup.policy": "compact",
                    "compression.type": "uncompressed",
                    "segment.bytes": str(self._config.get("transaction.state.log.segment.bytes")),
                },
                internal_ok=True,
            )
        if name == SHARE_GROUP_STATE:  # as Kafka's ShareCoordinatorService configures it (KIP-932)
            return await self.create_topic(
                name,
                int(self._config.get("share.coordinator.state.topic.num.partitions")),
                dict[str, str | None](share_state_topic_configs(self._config.get)),
                internal_ok=True,
            )
        existing = self._topics.get(name)
        if existing is not None:
            return existing
        return await self.create_topic(name, self.default_partitions)

    async def delete_topic(self, name: str) -> None:
        if not self._config.get("delete.topic.enable"):
            raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        t = self._topics.get(name)
        if t is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if t.internal:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Cannot delete internal topic {name}.")
        try:
            self._topics.delete(name)
        except OSError as e:
            raise ApiError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record the deletion of {name}: {e}"
            ) from None
        self._topic_configs.pop(name, None)
        self._log_configs.pop(name, None)
        await self._logs.delete_partitions(name, t.partitions)
        log.info("deleted topic %s", name)

    async def add_partitions(self, name: str, count: int) -> None:
        t = self._topics.get(name)
        if t is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        old = t.partitions
        try:
            self._topics.set_partitions(name, count)
        except OSError as e:
            raise ApiError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record new partitions of {name}: {e}"
            ) from None
        self._open_logs(t, range(old, count))
        log.info("topic %s now has %d partitions", name, count)

    def alter_topic_configs(self, t: TopicInfo, overrides: dict[str, str]) -> None:
        """Replace a topic's overrides (already validated) and apply them to its live logs."""
        try:
            self._topics.set_configs(t.name, overrides)
        except OSError as e:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record configs of {t.name}: {e}") from None
        self._set_topic_config(t.name, topic_config(self._config, overrides))
        self._logs.set_config(t.name, self._log_configs[t.name])

    def resource_configs(self, resource_type: int, name: str) -> Mapping[str, str]:
        return self._resource_configs.get(resource_type, name)

    def resource_names(self, resource_type: int) -> list[str]:
        return self._resource_configs.names(resource_type)

    def alter_resource_configs(self, resource_type: int, name: str, configs: Mapping[str, str]) -> None:
        try:
            self._resource_configs.set(resource_type, name, configs)
        except OSError as e:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record configs of {name}: {e}") from None

    def alter_broker_config(self, config: BrokerConfig) -> None:
        """Adopt a config with changed dynamic values: persist them and refresh every topic's config."""
        try:
            self._topics.set_broker_configs(config.dynamic_values, config.dynamic_default_values)
        except OSError as e:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record broker configs: {e}") from None
        self._set_config(config)
        self._logs.set_default_config(self.default_log_config())
        for t in self._topics.all():
            self._set_topic_config(t.name, topic_config(config, t.configs))
            self._logs.set_config(t.name, self._log_configs[t.name])

    # --- internals -----------------------------------------------------------------------------

    def _open_logs(self, t: TopicInfo, partitions: range) -> None:
        """The topic is recorded (or will be, at the end of the topic_batch): its new logs are made
        after the answer. When the descriptors would run out, KAFKA_STORAGE_ERROR now (the topic
        stays recorded; a partition is created when next used, if it then can be)."""
        try:
            self._logs.reserve_partitions(len(partitions))
        except KafkaStorageError as e:
            log.warning("topic %s: %s", t.name, e)
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from None
        if self._unsaved is not None:
            self._unsaved.append((t, partitions))
        else:
            self._logs.create_partitions_later(t, partitions)

    @property
    def _logs(self) -> PartitionLogs:
        return self._partition_logs()

    def _set_topic_config(self, name: str, tc: TopicConfig) -> None:
        self._topic_configs[name] = tc
        self._log_configs[name] = tc.log_config()

    def _set_config(self, config: BrokerConfig) -> None:
        self._config = config
