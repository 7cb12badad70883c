"""The broker: its state (config, logs, topics, producer ids) and the wiring of its parts.

    frame --> broker.handle = RequestDispatcher.handle (dispatcher.py: decode, route, encode)
          --> handler(RequestContext(broker, client, request), request) --> body --> [chunks]

What Kafka does with a request it cannot serve (UNSUPPORTED_VERSION for ApiVersions, a closed
connection otherwise) is the dispatcher's; CloseConnection and load_handlers are re-exported here.

Handlers run on the event loop. Appends and reads of the page cache are fast enough to stay there;
blocking work that can be long (retention, fsync on close) runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcompat.config import (
    BrokerConfig,
    ConfigEntry,
    ConfigError,
    TopicConfig,
    new_cluster_id,
    topic_config,
    validate_topic_configs,
)
from kcompat.kafka_uuid import ZERO_UUID
from kcompat.log.config import LogConfig
from kcompat.log.errors import KafkaStorageError, LogError
from kcompat.log.manager import META_PROPERTIES, read_properties
from kcompat.server.dispatcher import CloseConnection, RequestDispatcher, load_handlers
from kcompat.server.fetch_session import FetchManager, FetchSessionCache
from kcompat.server.group_service import GroupService
from kcompat.server.log_throttle import LogThrottle
from kcompat.server.offsets_topic import OffsetsTopic
from kcompat.server.producer_ids import ProducerIdManager
from kcompat.server.replica_manager import ReplicaManager
from kcompat.server.topics import (
    CONSUMER_OFFSETS,
    INTERNAL_TOPICS,
    TRANSACTION_STATE,
    InvalidTopic,
    TopicInfo,
    TopicStore,
    validate_name,
)
from kcompat.wire import compression as codecs
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import Request

log = logging.getLogger("kcompat.server")

__all__ = ["ApiError", "Broker", "CloseConnection", "RequestContext", "load_handlers"]


@dataclass(slots=True)
class RequestContext:
    """What a handler sees besides its request body."""

    broker: Broker
    client: Any
    request: Request

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def now_ms(self) -> int:
        return self.broker.now_ms()

    @property
    def replicas(self) -> ReplicaManager:
        """The partition logs and parked fetches (append here: it wakes the fetches)."""
        return self.broker.replicas

    @property
    def groups(self) -> GroupService:
        return self.broker.group_service

    @property
    def config(self) -> BrokerConfig:
        return self.broker.config


class ApiError(Exception):
    """A request-level failure with the Kafka error code (and message) to answer with."""

    def __init__(
        self, error: ErrorCode, message: str | None = None, records: list[tuple[int, str]] | None = None
    ) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message
        self.records = records or []  # KIP-467: (batch_index, message) of each refused record

    @classmethod
    def from_log(cls, e: LogError) -> ApiError:
        """A storage engine failure as the Kafka error it names (the log package has no ErrorCode)."""
        return cls(ErrorCode[e.error_name], e.message)


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        self.node_id: int = config.node_id
        self.cluster_id: str = ""
        # Absolute, as Kafka's LogManager holds them (DescribeLogDirs names them so).
        self.log_dirs: list[Path] = [Path(d).absolute() for d in config.log_dirs]
        listener = config.advertised_listeners[0]
        self.advertised_host: str = listener.host
        self.advertised_port: int = listener.port  # the transport sets the bound port when this is 0
        self.topics: TopicStore = TopicStore(self.log_dirs[0])
        self.producer_ids = ProducerIdManager(self.log_dirs[0])
        # The partition logs and the fetches parked on them; one append path wakes those fetches.
        self.replicas = ReplicaManager(topic=self.topic, log_config=lambda t: self._log_config_of(self.topic_config(t)))
        self.fetch_sessions = FetchManager(FetchSessionCache(int(config.get("max.incremental.fetch.session.cache.slots"))))
        # Consumer groups and committed offsets, through narrow ports (no reference back to the broker).
        self.group_service = GroupService(
            now_ms=self.now_ms,
            setting=self.config.get,
            offsets_topic=OffsetsTopic(
                lookup=self.topic,
                create=self.auto_create_topic,
                partition_log=self.replicas.partition_log,
                append=self.replicas.append,
                setting=self.config.get,
            ),
            topic=self.topic,
            topics=self.topics.all,
        )
        self._topic_configs: dict[str, TopicConfig] = {}
        self._background: list[asyncio.Task[None]] = []
        self._maintenance_lock = asyncio.Lock()
        self._maintenance_errors = LogThrottle(log, interval_s=60)
        self.closing = False
        # Requests: decoded, routed to their handler with a RequestContext, encoded.
        self.dispatcher = RequestDispatcher(lambda client, request: RequestContext(self, client, request))
        self.handle = self.dispatcher.handle

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # --- settings the handlers read ------------------------------------------------------------

    @property
    def rack(self) -> str | None:
        rack = self.config.get("broker.rack")
        return str(rack) if rack else None

    @property
    def auto_create_topics(self) -> bool:
        return bool(self.config.get("auto.create.topics.enable"))

    @property
    def default_partitions(self) -> int:
        return int(self.config.get("num.partitions"))

    @property
    def default_replication_factor(self) -> int:
        return int(self.config.get("default.replication.factor"))

    @property
    def fetch_max_bytes(self) -> int:
        return int(self.config.get("fetch.max.bytes"))

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_cluster_id()
        self.topics.load()
        self.producer_ids.load()
        self._load_dynamic_config()
        for t in self.topics.all():
            self._topic_configs[t.name] = topic_config(self.config, t.configs)
        configs = {name: self._log_config_of(tc) for name, tc in self._topic_configs.items()}
        await self.replicas.start(
            self.log_dirs,
            self._log_config_of(topic_config(self.config)),
            cluster_id=self.cluster_id,
            node_id=self.node_id,
            topic_configs=configs,
            clock=self.now_ms,
            topics=self.topics.all(),
        )
        interval = int(self.config.get("log.retention.check.interval.ms"))
        self._background.append(asyncio.create_task(self._maintenance_loop(interval / 1000)))
        await self.group_service.start()  # replays __consumer_offsets
        log.info("broker %d of cluster %s started with %d topic(s)", self.node_id, self.cluster_id, len(self.topics))

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
        async with self._maintenance_lock:
            await self.replicas.close()

    async def _maintenance_loop(self, interval_s: float) -> None:
        """Retention, flushes by flush.ms, compaction, checkpoints: in a worker thread."""
        while True:
            await asyncio.sleep(interval_s)
            await self.run_maintenance()

    async def run_maintenance(self) -> None:
        async with self._maintenance_lock:
            logs = self.replicas.logs
            if logs is None:
                return
            work = asyncio.ensure_future(asyncio.to_thread(logs.run_maintenance, self.now_ms()))
            try:
                # A cancelled task (close) cannot stop the thread: the lock is held until it is done,
                # so close() never writes the checkpoints while maintenance is still writing them.
                await asyncio.shield(work)
            except asyncio.CancelledError:
                await asyncio.wait([work])
                raise
            except (OSError, KafkaStorageError) as e:  # a full or failing disk: said once in a while, without a traceback
                self._maintenance_errors.log(logging.ERROR, "maintenance", "log maintenance failed: %s", e)
            except Exception:
                log.exception("log maintenance failed")

    # --- topics and partitions -----------------------------------------------------------------

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def topic_config(self, t: TopicInfo) -> TopicConfig:
        tc = self._topic_configs.get(t.name)
        if tc is None:
            tc = self._topic_configs[t.name] = topic_config(self.config, t.configs)
        return tc

    def log_config(self, t: TopicInfo) -> LogConfig:
        return self.replicas.partition_log(t.name, 0).config if t.partitions else self._log_config_of(self.topic_config(t))

    def _log_config_of(self, tc: TopicConfig) -> LogConfig:
        return tc.log_config()  # typed values; tc.broker is self.config (every TopicConfig is rebuilt on a change)

    def topic_compression(self, t: TopicInfo) -> int | None:
        """The codec a topic stores batches with, or None for `producer` (keep the producer's)."""
        name = self.topic_config(t).get("compression.type")
        return None if name == "producer" else COMPRESSION_CODECS[name]

    def describe_topic_configs(
        self, t: TopicInfo, names: list[str] | None = None, *, synonyms: bool = False, documentation: bool = False
    ) -> list[ConfigEntry]:
        return self.topic_config(t).describe(names, include_synonyms=synonyms, include_documentation=documentation)

    def check_new_topic(self, name: str) -> None:
        """Kafka's checks of a name for a topic about to be created (ApiError otherwise)."""
        try:
            validate_name(name)
        except InvalidTopic as e:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
        if name in self.topics:
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        other = self.topics.colliding(name)
        if other is not None:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}")

    async def create_topic(
        self, name: str, partitions: int, configs: dict[str, str | None] | None = None, *, validate_only: bool = False,
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
            t = self.topics.create(name, partitions, overrides)
        except OSError as e:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record topic {name}: {e}") from None
        self._topic_configs[name] = topic_config(self.config, overrides)
        for p in range(partitions):
            self.replicas.open_partition(t, p)
        log.info("created topic %s with %d partition(s)%s", name, partitions, f", configs {overrides}" if overrides else "")
        return t

    async def auto_create_topic(self, name: str) -> TopicInfo:
        """Create a topic as auto.create.topics.enable does: broker defaults, or the internal topics' own."""
        if name == CONSUMER_OFFSETS:
            return await self.create_topic(
                name,
                int(self.config.get("offsets.topic.num.partitions")),
                {
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "segment.bytes": str(self.config.get("offsets.topic.segment.bytes")),
                },
                internal_ok=True,
            )
        if name == TRANSACTION_STATE:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "transactions are not supported")
        existing = self.topics.get(name)
        if existing is not None:
            return existing
        return await self.create_topic(name, self.default_partitions)

    async def delete_topic(self, name: str) -> None:
        if not self.config.get("delete.topic.enable"):
            raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        t = self.topics.get(name)
        if t is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if t.internal:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Cannot delete internal topic {name}.")
        try:
            self.topics.delete(name)
        except OSError as e:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record the deletion of {name}: {e}") from None
        self._topic_configs.pop(name, None)
        async with self._maintenance_lock:
            await self.replicas.delete_partitions(name, t.partitions)
        log.info("deleted topic %s", name)

    async def add_partitions(self, name: str, count: int) -> None:
        t = self.topics.get(name)
        if t is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        old = t.partitions
        try:
            self.topics.set_partitions(name, count)
        except OSError as e:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record new partitions of {name}: {e}") from None
        for p in range(old, count):
            self.replicas.open_partition(t, p)
        log.info("topic %s now has %d partitions", name, count)

    def alter_topic_configs(self, t: TopicInfo, overrides: dict[str, str]) -> None:
        """Replace a topic's overrides (already validated) and apply them to its live logs."""
        try:
            self.topics.set_configs(t.name, overrides)
        except OSError as e:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record configs of {t.name}: {e}") from None
        tc = self._topic_configs[t.name] = topic_config(self.config, overrides)
        self.replicas.set_config(t.name, self._log_config_of(tc))

    # --- dynamic broker configs ----------------------------------------------------------------

    def _load_dynamic_config(self) -> None:
        node, default = self.topics.broker_configs()
        if node or default:
            try:
                cfg = self.config
                if default:
                    cfg = cfg.with_dynamic(default, cluster_default=True)
                if node:
                    cfg = cfg.with_dynamic(node)
                self.config = cfg
            except ConfigError as e:
                log.warning("ignoring stored dynamic broker configs: %s", e)

    def alter_broker_config(self, config: BrokerConfig) -> None:
        """Adopt a config with changed dynamic values: persist them and refresh every topic's config."""
        try:
            self.topics.set_broker_configs(config.dynamic_values, config.dynamic_default_values)
        except OSError as e:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot record broker configs: {e}") from None
        self.config = config
        self.replicas.set_default_config(self._log_config_of(topic_config(config)))
        for t in self.topics.all():
            tc = self._topic_configs[t.name] = topic_config(config, t.configs)
            self.replicas.set_config(t.name, self._log_config_of(tc))


COMPRESSION_CODECS = {
    "uncompressed": codecs.NONE,
    "gzip": codecs.GZIP,
    "snappy": codecs.SNAPPY,
    "lz4": codecs.LZ4,
    "zstd": codecs.ZSTD,
}
