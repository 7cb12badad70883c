"""The MetadataView port: what handlers and the broker's parts read and change of the cluster
metadata (Kafka's MetadataCache, and for topic admin its controller), with the value types it
answers in. Two implementations, neither importing the other:

    handlers ──ctx.metadata──► MetadataView (Protocol, here)
                                  ├── LocalMetadata (local_metadata.py): kcompat.storage files, one node
                                  └── KRaftMetadata (cluster/kraft_metadata.py): the KRaft MetadataImage
    LocalMetadata ──changes──► PartitionLogs port (the ReplicaManager): open, delete, reconfigure

`ConfigReads` is what both read the same way from the broker config and a topic's TopicConfig.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

from kcompat.config import BrokerConfig, ConfigEntry, TopicConfig, topic_config
from kcompat.log.config import LogConfig
from kcompat.metadata.features import Features
from kcompat.storage.topic_store import TopicInfo
from kcompat.wire import compression as codecs

COMPRESSION_CODECS = {
    "uncompressed": codecs.NONE,
    "gzip": codecs.GZIP,
    "snappy": codecs.SNAPPY,
    "lz4": codecs.LZ4,
    "zstd": codecs.ZSTD,
}


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """A partition as Metadata and DescribeTopicPartitions describe it."""

    error_code: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    # KIP-966, cluster mode: the image's eligible leader replicas (never counted as ISR) and the
    # last-known ELR; empty on a single node, as Kafka sends them without ELR.
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)


class TopicsView(Protocol):
    """The topics as handlers read them (TopicStore's queries)."""

    def get(self, name: str) -> TopicInfo | None: ...
    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...
    def names(self) -> list[str]: ...
    def all(self) -> list[TopicInfo]: ...
    def __contains__(self, name: object) -> bool: ...
    def __len__(self) -> int: ...


class ProducerIds(Protocol):
    """Producer ids for InitProducerId (Kafka's ProducerIdManager): never one handed out twice."""

    def next_id(self) -> int: ...


class MetadataView(Protocol):
    """What handlers and the broker's parts read and change of the cluster metadata."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def topics(self) -> TopicsView: ...
    @property
    def auto_create_topics(self) -> bool: ...
    @property
    def default_partitions(self) -> int: ...
    @property
    def default_replication_factor(self) -> int: ...
    def load(self) -> None: ...
    def default_log_config(self) -> LogConfig: ...
    def log_configs(self) -> dict[str, LogConfig]: ...
    def topic(self, name: str) -> TopicInfo | None: ...
    def leader_and_epoch(self, t: TopicInfo, partition: int) -> tuple[int, int]: ...
    def describe_partition(self, t: TopicInfo, partition: int, listener: str) -> PartitionDescription: ...
    def partitions_stamp(self, t: TopicInfo) -> object:
        """Equal while every describe_partition of t (on any listener) is unchanged: what lets
        Metadata reuse a topic's partition rows (it is compared with ==, identity first)."""

    def live_brokers(self, listener: str) -> list[BrokerEndpoint] | None:
        """Every broker a client may use (None: this broker alone, as it advertises itself)."""

    def fenced_brokers(self, listener: str) -> list[BrokerEndpoint]:
        """The registered brokers the controllers hold fenced (none on a single node)."""

    def controller_id(self, listener: str) -> int | None: ...
    def topic_config(self, t: TopicInfo) -> TopicConfig: ...
    def log_config(self, t: TopicInfo) -> LogConfig: ...
    def topic_compression(self, t: TopicInfo) -> int | None: ...
    def describe_topic_configs(
        self,
        t: TopicInfo,
        names: list[str] | None = None,
        *,
        synonyms: bool = False,
        documentation: bool = False,
    ) -> list[ConfigEntry]: ...
    @property
    def producer_ids(self) -> ProducerIds: ...
    async def create_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str | None] | None = None,
        *,
        validate_only: bool = False,
        internal_ok: bool = False,
    ) -> TopicInfo: ...
    async def auto_create_topic(self, name: str) -> TopicInfo: ...
    async def create_internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        """Create a topic a group coordinator needs (a streams group's internal topics); in cluster
        mode it is asked of the controller and not waited for."""

    def topic_batch(self) -> AbstractAsyncContextManager[None]: ...
    async def delete_topic(self, name: str) -> None: ...
    async def add_partitions(self, name: str, count: int) -> None: ...
    def alter_topic_configs(self, t: TopicInfo, overrides: dict[str, str]) -> None: ...
    def alter_broker_config(self, config: BrokerConfig) -> None: ...
    def features(self) -> Features:
        """The feature levels ApiVersions reports (cluster mode: the image's, at its offset)."""

    def update_features(self, levels: Mapping[str, int]) -> None:
        """A single node's UpdateFeatures, persisted (cluster mode forwards it: never called)."""

    def resource_configs(self, resource_type: int, name: str) -> Mapping[str, str]:
        """The configs set on a group (32) or client-metrics (16) resource; empty when none."""

    def resource_names(self, resource_type: int) -> list[str]:
        """Every resource of that type with configs set (ListConfigResources)."""

    def alter_resource_configs(self, resource_type: int, name: str, configs: Mapping[str, str]) -> None:
        """Replace a resource's configs (validated). Single node: persisted; cluster mode never
        gets here (AlterConfigs is forwarded to the controller, which writes ConfigRecords)."""


class PartitionLogs(Protocol):
    """Where metadata changes land (the ReplicaManager), as Kafka's ReplicaManager applies a delta."""

    def open_partition(self, t: TopicInfo, partition: int) -> object: ...
    def reserve_partitions(self, count: int) -> None: ...
    def release_partitions(self, count: int) -> None: ...
    def create_partitions_later(self, t: TopicInfo, partitions: range) -> None: ...
    async def delete_partitions(self, topic: str, partitions: int) -> None: ...
    def set_config(self, topic: str, config: LogConfig) -> None: ...
    def set_default_config(self, config: LogConfig) -> None: ...


class ConfigReads:
    """The reads both MetadataViews answer alike: broker settings, and a topic's configs as its
    TopicConfig (which each builds and caches in its own way, `topic_config`) says them."""

    _config: BrokerConfig

    @property
    def config(self) -> BrokerConfig:
        return self._config

    @property
    def default_partitions(self) -> int:
        return int(self._config.get("num.partitions"))

    @property
    def default_replication_factor(self) -> int:
        return int(self._config.get("default.replication.factor"))

    @property
    def topics(self) -> TopicsView:
        raise NotImplementedError

    def topic_config(self, t: TopicInfo) -> TopicConfig:
        raise NotImplementedError

    def log_config(self, t: TopicInfo) -> LogConfig:
        raise NotImplementedError

    def default_log_config(self) -> LogConfig:
        return topic_config(self._config).log_config()

    def log_configs(self) -> dict[str, LogConfig]:
        """Every topic's log config (the LogManager opens the logs with them)."""
        return {t.name: self.log_config(t) for t in self.topics.all()}

    def topic_compression(self, t: TopicInfo) -> int | None:
        """The codec a topic stores batches with, or None for `producer` (keep the producer's)."""
        name = self.topic_config(t).get("compression.type")
        return None if name == "producer" else COMPRESSION_CODECS[name]

    def describe_topic_configs(
        self,
        t: TopicInfo,
        names: list[str] | None = None,
        *,
        synonyms: bool = False,
        documentation: bool = False,
    ) -> list[ConfigEntry]:
        return self.topic_config(t).describe(
            names, include_synonyms=synonyms, include_documentation=documentation
        )
