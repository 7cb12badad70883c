"""The broker properties kcompat understands, with Apache Kafka's names and (where they apply)
Kafka 4.x's defaults.

Deliberate differences from Kafka's defaults, for an embedded single-node broker:
    listeners  PLAINTEXT://127.0.0.1:9092  (Kafka: PLAINTEXT://:9092, all interfaces)
    node.id    1                           (Kafka: required, no default)
    log.dir    ./kcompat-data              (Kafka: /tmp/kafka-logs)

Properties marked `ignored` are accepted so that a Kafka server.properties works unchanged, and
have no effect (one node, one event loop, no controller quorum). `dynamic` marks the properties
Kafka 4.3's DynamicBrokerConfig lets a broker-level AlterConfigs change at run time (DescribeConfigs
reports the others read_only); of those, RESTART_ONLY are refused by kcompat, which cannot re-open
its listeners while running.
"""

from __future__ import annotations

import base64
import binascii

from kcompat.config.definition import (
    DOUBLE_MAX,
    INT_MAX,
    LONG_MAX,
    Check,
    ConfigDef,
    ConfigType,
    Importance,
    ListOf,
    OneOf,
    at_least,
    between,
    table,
)

BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, PASSWORD = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

ONE_NODE = "kcompat is a single node; there is nothing to replicate or elect."
ONE_LOOP = "kcompat serves all connections from one event loop."
NO_QUORUM = "kcompat has no KRaft controller quorum."
NO_SECURITY = "kcompat speaks PLAINTEXT only."


def is_cluster_id(value: str) -> bool:
    """Kafka cluster ids are 16 bytes in URL-safe base64 without padding (22 characters)."""
    if len(value) != 22:
        return False
    try:
        return len(base64.urlsafe_b64decode(value + "==")) == 16 and all(
            c.isalnum() or c in "-_" for c in value
        )
    except (binascii.Error, ValueError):
        return False


def _d(
    name: str,
    type_: ConfigType,
    default: object,
    doc: str,
    importance: Importance = MEDIUM,
    validator: object = None,
    dynamic: bool = False,
    ignored: str | None = None,
) -> ConfigDef:
    return ConfigDef(
        name=name,
        type=type_,
        default=default,
        doc=doc,
        importance=importance,
        validator=validator,  # type: ignore[arg-type]
        dynamic=dynamic,
        ignored=ignored,
    )


BROKER_CONFIGS: dict[str, ConfigDef] = table([
    # --- identity and network ---------------------------------------------------------------
    _d("node.id", INT, 1, "Id of this broker in Metadata responses and leader fields.", HIGH, at_least(0)),
    # Kafka's default -1 means "take node.id"; each of the two names is filled in from the other.
    _d("broker.id", INT, -1, "Older name of node.id; when both are set they must agree.", HIGH, at_least(-1)),
    _d("cluster.id", STRING, None,
       "Cluster id reported to clients. When unset, kcompat generates one on first start and keeps it "
       "in meta.properties in the data directory.", HIGH,
       Check(is_cluster_id, "22 characters of URL-safe base64 (16 bytes), e.g. from `kafka-storage random-uuid`")),
    _d("broker.rack", STRING, None, "Rack reported for this broker in Metadata responses.", MEDIUM),
    _d("listeners", LIST, ["PLAINTEXT://127.0.0.1:9092"],
       "Comma-separated NAME://host:port addresses to accept connections on. An empty host means all "
       "interfaces; listeners named in controller.listener.names are skipped. Dynamic in Kafka; kcompat "
       "changes it only by a restart.", HIGH, dynamic=True),
    _d("advertised.listeners", LIST, None,
       "Addresses handed to clients in Metadata responses, by listener name. Defaults to listeners.",
       HIGH),
    _d("listener.security.protocol.map", STRING,
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
       "Security protocol of each listener name; kcompat serves listeners that map to PLAINTEXT. Dynamic "
       "in Kafka; kcompat changes it only by a restart.", LOW, dynamic=True),
    _d("inter.broker.listener.name", STRING, None, "Listener brokers use among themselves.", MEDIUM,
       ignored=ONE_NODE),
    _d("controller.listener.names", LIST, None,
       "Listener names used by the KRaft controller; such listeners are not opened.", MEDIUM),
    _d("process.roles", LIST, None, "KRaft roles of this process. `broker` with "
       "controller.quorum.bootstrap.servers joins Apache Kafka controllers (cluster mode); otherwise kcompat "
       "runs as its own single node.", HIGH, ListOf(("broker", "controller"))),
    _d("controller.quorum.voters", LIST, [], "Static KRaft voter set (id@host:port); in cluster mode a "
       "broker's node.id must not be one of them.", HIGH),
    _d("controller.quorum.bootstrap.servers", LIST, [], "KRaft controllers (host:port) a cluster-mode "
       "broker registers with and fetches __cluster_metadata from.", HIGH),
    _d("broker.heartbeat.interval.ms", INT, 2000, "Time between a cluster-mode broker's heartbeats to the "
       "controller.", MEDIUM),
    _d("broker.session.timeout.ms", INT, 9000, "How long the controller waits for a heartbeat before fencing "
       "the broker; the broker's retry backoff is capped at half of it.", MEDIUM),
    _d("socket.request.max.bytes", INT, 104857600,
       "Largest request frame accepted; a bigger size prefix closes the connection before anything is "
       "buffered.", HIGH, at_least(1)),
    _d("socket.send.buffer.bytes", INT, 102400, "SO_SNDBUF of client sockets; -1 keeps the OS default.",
       HIGH),
    _d("socket.receive.buffer.bytes", INT, 102400, "SO_RCVBUF of client sockets when set (-1: the OS default); "
       "unset, kcompat leaves it to the kernel's autotuning, which took large produces faster.",
       HIGH),
    _d("socket.listen.backlog.size", INT, 50, "Backlog of pending connections on each listener.", MEDIUM,
       at_least(1)),
    _d("connections.max.idle.ms", LONG, 600000, "Idle client connections are closed after this long.",
       MEDIUM),
    _d("max.connections", INT, INT_MAX, "Most client connections open at once; more are refused.", MEDIUM,
       at_least(0), dynamic=True),
    _d("max.connections.per.ip", INT, INT_MAX, "Most connections from one client address.", MEDIUM,
       at_least(0), dynamic=True),
    _d("queued.max.requests", INT, 500, "Requests buffered per broker before reading pauses.", HIGH,
       at_least(1)),
    _d("num.network.threads", INT, 3, "Network threads.", HIGH, at_least(1), dynamic=True, ignored=ONE_LOOP),
    _d("num.io.threads", INT, 8, "Request handler threads.", HIGH, at_least(1), dynamic=True, ignored=ONE_LOOP),
    _d("background.threads", INT, 10, "Background task threads.", HIGH, at_least(1), dynamic=True,
       ignored=ONE_LOOP),
    _d("num.replica.fetchers", INT, 1, "Replica fetcher threads.", HIGH, dynamic=True, ignored=ONE_NODE),
    _d("num.recovery.threads.per.data.dir", INT, 2, "Threads for log recovery at start-up.", HIGH,
       at_least(1), dynamic=True, ignored=ONE_LOOP),
    # --- storage ------------------------------------------------------------------------------
    _d("log.dirs", LIST, None, "Data directories; kcompat keeps its logs in the first. Overrides log.dir.",
       HIGH),
    _d("log.dir", LIST, ["./kcompat-data"], "Data directory when log.dirs is unset.", HIGH),
    _d("num.partitions", INT, 1, "Partition count of auto-created topics and of CreateTopics requests that "
       "leave it to the broker.", MEDIUM, at_least(1)),
    _d("default.replication.factor", INT, 1, "Replication factor of auto-created topics.", MEDIUM,
       at_least(1)),
    _d("auto.create.topics.enable", BOOLEAN, True,
       "Create a topic when a client asks Metadata for one that does not exist.", HIGH),
    _d("delete.topic.enable", BOOLEAN, True, "Allow DeleteTopics.", HIGH),
    _d("log.segment.bytes", INT, 1073741824, "Size at which the active segment is rolled.", HIGH,
       at_least(1024 * 1024), dynamic=True),
    _d("log.roll.ms", LONG, None, "Age at which the active segment is rolled; overrides log.roll.hours.",
       HIGH, dynamic=True),
    _d("log.roll.hours", INT, 168, "Age in hours at which the active segment is rolled.", HIGH, at_least(1)),
    _d("log.roll.jitter.ms", LONG, None, "Random reduction of the roll age, to spread rolls out; overrides "
       "log.roll.jitter.hours.", HIGH, dynamic=True),
    _d("log.roll.jitter.hours", INT, 0, "Roll jitter in hours.", HIGH, at_least(0)),
    _d("log.retention.ms", LONG, None, "How long data is kept before old segments are deleted; -1 keeps "
       "it forever. Overrides log.retention.minutes and log.retention.hours.", HIGH, dynamic=True),
    _d("log.retention.minutes", INT, None, "Retention in minutes; overrides log.retention.hours.", HIGH),
    _d("log.retention.hours", INT, 168, "Retention in hours.", HIGH),
    _d("log.retention.bytes", LONG, -1, "Partition size above which old segments are deleted; -1: no limit.",
       HIGH, dynamic=True),
    _d("log.retention.check.interval.ms", LONG, 300000, "How often retention is enforced.", MEDIUM,
       at_least(1)),
    _d("log.segment.delete.delay.ms", LONG, 60000, "Delay before a deleted segment's files are removed.",
       HIGH, at_least(0), dynamic=True),
    _d("log.index.interval.bytes", INT, 4096, "Bytes of records between two offset index entries.", MEDIUM,
       at_least(0), dynamic=True),
    _d("log.index.size.max.bytes", INT, 10485760, "Largest offset or time index file of a segment.", MEDIUM,
       at_least(4), dynamic=True),
    _d("log.preallocate", BOOLEAN, False, "Preallocate segment files.", MEDIUM, dynamic=True),
    _d("log.cleanup.policy", LIST, ["delete"], "What happens to old segments: delete, compact, or both.",
       MEDIUM, ListOf(CLEANUP_POLICIES, allow_empty=True), dynamic=True),
    _d("log.cleaner.enable", BOOLEAN, True, "Run the log cleaner for compacted topics.", MEDIUM),
    _d("log.cleaner.threads", INT, 1, "Log cleaner threads.", MEDIUM, at_least(0), dynamic=True),
    _d("log.cleaner.backoff.ms", LONG, 15000, "Sleep of the cleaner when there is nothing to clean.",
       MEDIUM, at_least(0), dynamic=True),
    _d("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5,
       "Share of not-yet-compacted bytes that makes a log eligible for cleaning.", MEDIUM, between(0, 1),
       dynamic=True),
    _d("log.cleaner.delete.retention.ms", LONG, 86400000,
       "How long tombstones are kept in compacted topics.", MEDIUM, at_least(0), dynamic=True),
    _d("log.cleaner.min.compaction.lag.ms", LONG, 0, "Minimum age of a record before it can be compacted.",
       MEDIUM, at_least(0), dynamic=True),
    _d("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX,
       "Maximum age of an uncompacted record before its segment must be cleaned.", MEDIUM, at_least(1),
       dynamic=True),
    _d("log.cleaner.dedupe.buffer.size", LONG, 134217728, "Memory for the cleaner's key map.", MEDIUM,
       dynamic=True),
    _d("log.cleaner.io.buffer.size", INT, 524288, "Cleaner I/O buffer size.", MEDIUM, at_least(0),
       dynamic=True),
    _d("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, "Load factor of the cleaner's key map.", MEDIUM,
       dynamic=True),
    _d("log.cleaner.io.max.bytes.per.second", DOUBLE, DOUBLE_MAX, "Cleaner I/O throttle.", MEDIUM,
       dynamic=True),
    _d("log.flush.interval.messages", LONG, LONG_MAX,
       "Records appended to a partition before it is fsynced; the default leaves it to the OS.", HIGH,
       at_least(1), dynamic=True),
    _d("log.flush.interval.ms", LONG, None, "Longest time appended data stays unsynced; defaults to "
       "log.flush.scheduler.interval.ms.", HIGH, dynamic=True),
    _d("log.flush.scheduler.interval.ms", LONG, LONG_MAX, "How often the flusher checks for due logs.",
       HIGH),
    _d("log.flush.offset.checkpoint.interval.ms", INT, 60000,
       "How often recovery points are checkpointed.", HIGH, at_least(0)),
    _d("log.flush.start.offset.checkpoint.interval.ms", INT, 60000,
       "How often log start offsets are checkpointed.", HIGH, at_least(0)),
    _d("log.message.timestamp.type", STRING, "CreateTime",
       "Whether record timestamps are the producer's (CreateTime) or the broker's append time "
       "(LogAppendTime).", MEDIUM, OneOf(TIMESTAMP_TYPES), dynamic=True),
    _d("log.message.timestamp.before.max.ms", LONG, LONG_MAX,
       "How far in the past a CreateTime timestamp may be before the batch is rejected.", MEDIUM,
       at_least(0), dynamic=True),
    _d("log.message.timestamp.after.max.ms", LONG, 3600000,
       "How far in the future a CreateTime timestamp may be before the batch is rejected.", MEDIUM,
       at_least(0), dynamic=True),
    _d("log.local.retention.ms", LONG, -2, "Local retention for tiered storage.", MEDIUM, dynamic=True,
       ignored="kcompat has no tiered storage."),
    _d("log.local.retention.bytes", LONG, -2, "Local size limit for tiered storage.", MEDIUM, dynamic=True,
       ignored="kcompat has no tiered storage."),
    _d("metadata.log.dir", STRING, None, "Directory of the KRaft metadata log.", HIGH, ignored=NO_QUORUM),
    # --- records ------------------------------------------------------------------------------
    _d("message.max.bytes", INT, 1048588, "Largest record batch a topic accepts (after compression).",
       HIGH, at_least(0), dynamic=True),
    _d("compression.type", STRING, "producer",
       "Codec batches are stored with; producer keeps whatever the producer sent.", HIGH,
       OneOf(COMPRESSION_TYPES), dynamic=True),
    _d("compression.gzip.level", INT, -1, "gzip level when the broker compresses (-1: codec default).",
       MEDIUM, Check(lambda v: v == -1 or 1 <= v <= 9, "-1 or a level in [1, 9]"), dynamic=True),
    _d("compression.lz4.level", INT, 9, "lz4 level when the broker compresses.", MEDIUM, between(1, 17),
       dynamic=True),
    _d("compression.zstd.level", INT, 3, "zstd level when the broker compresses.", MEDIUM,
       between(-131072, 22), dynamic=True),
    _d("fetch.max.bytes", INT, 57671680, "Most bytes one Fetch response carries.", MEDIUM, at_least(1024)),
    _d("replica.fetch.max.bytes", INT, 1048576, "Bytes per partition a replica fetch asks for.", MEDIUM,
       ignored=ONE_NODE),
    _d("replica.fetch.wait.max.ms", INT, 500, "Longest a follower's Fetch waits at the leader.", HIGH,
       ignored=ONE_NODE),
    _d("replica.fetch.backoff.ms", INT, 1000, "Pause of a follower's fetcher after a failed Fetch.", MEDIUM,
       ignored=ONE_NODE),
    _d("replica.lag.time.max.ms", LONG, 30000, "Lag after which a follower leaves the ISR.", HIGH,
       ignored=ONE_NODE),
    _d("min.insync.replicas", INT, 1, "In-sync replicas an acks=all produce needs.", HIGH, at_least(1),
       dynamic=True),
    _d("unclean.leader.election.enable", BOOLEAN, False, "Allow out-of-sync replicas to lead.", HIGH,
       dynamic=True, ignored=ONE_NODE),
    _d("auto.leader.rebalance.enable", BOOLEAN, True, "Move leadership back to preferred replicas.", HIGH,
       ignored=ONE_NODE),
    _d("max.incremental.fetch.session.cache.slots", INT, 1000, "Fetch sessions kept at once.", MEDIUM,
       at_least(0)),
    # --- groups and offsets -------------------------------------------------------------------
    _d("group.initial.rebalance.delay.ms", INT, 3000,
       "Wait for more members before the first rebalance of an empty classic group.", MEDIUM),
    _d("group.min.session.timeout.ms", INT, 6000, "Smallest session timeout a member may ask for.", MEDIUM),
    _d("group.max.session.timeout.ms", INT, 1800000, "Largest session timeout a member may ask for.",
       MEDIUM),
    _d("group.max.size", INT, INT_MAX, "Most members of one classic group.", MEDIUM, at_least(1)),
    _d("group.coordinator.rebalance.protocols", LIST, ["classic", "consumer"],
       "Group protocols offered: classic (JoinGroup/SyncGroup) and consumer (KIP-848 heartbeats).", MEDIUM,
       ListOf(("classic", "consumer", "share", "streams"))),
    _d("group.consumer.assignors", LIST, ["uniform", "range", "roundrobin"],
       "Server-side assignors of consumer-protocol groups; a member picks one with group.remote.assignor, "
       "and the first is the default.", MEDIUM, ListOf(("uniform", "range", "roundrobin"))),
    _d("offset.metadata.max.bytes", INT, 4096, "Most bytes of metadata a committed offset may carry.", HIGH,
       at_least(0)),
    _d("group.consumer.session.timeout.ms", INT, 45000, "Session timeout of consumer-protocol members.",
       MEDIUM, at_least(1)),
    _d("group.consumer.heartbeat.interval.ms", INT, 5000, "Heartbeat interval given to consumer-protocol "
       "members.", MEDIUM, at_least(1)),
    _d("group.consumer.max.size", INT, INT_MAX, "Most members of one consumer-protocol group.", MEDIUM,
       at_least(1)),
    _d("offsets.retention.minutes", INT, 10080,
       "How long committed offsets of an empty group are kept.", HIGH, at_least(1)),
    _d("offsets.retention.check.interval.ms", LONG, 600000, "How often expired offsets are removed.", HIGH,
       at_least(1)),
    _d("offsets.topic.num.partitions", INT, 50, "Partitions of the __consumer_offsets topic; fixed once "
       "the topic exists.", HIGH, at_least(1)),
    _d("offsets.topic.replication.factor", SHORT, 3, "Replication factor of __consumer_offsets.", HIGH,
       at_least(1), ignored=ONE_NODE),
    _d("offsets.topic.segment.bytes", INT, 104857600, "Segment size of __consumer_offsets.", HIGH,
       at_least(1)),
    _d("offsets.topic.compression.codec", INT, 0, "Codec of offset commit records (0 none ... 4 zstd).",
       HIGH, between(0, 4)),
    _d("offsets.load.buffer.size", INT, 5242880, "Read size when loading offsets at start-up.", HIGH,
       at_least(1)),
    _d("offsets.commit.timeout.ms", INT, 5000, "Longest wait for an offset commit to be stored.", HIGH,
       at_least(1)),
    # --- producers and transactions -----------------------------------------------------------
    _d("producer.id.expiration.ms", INT, 86400000,
       "How long an idle producer id's sequence state is kept.", LOW, at_least(1), dynamic=True),
    _d("transactional.id.expiration.ms", INT, 604800000, "How long an idle transactional id is kept.",
       HIGH, at_least(1)),
    _d("transaction.max.timeout.ms", INT, 900000, "Largest transaction timeout a producer may ask for.",
       HIGH, at_least(1)),
    _d("transaction.state.log.num.partitions", INT, 50, "Partitions of __transaction_state.", HIGH,
       at_least(1)),
    _d("transaction.state.log.replication.factor", SHORT, 3, "Replication factor of __transaction_state.",
       HIGH, at_least(1), ignored=ONE_NODE),
    _d("transaction.state.log.min.isr", INT, 2, "min.insync.replicas of __transaction_state.", HIGH,
       at_least(1), ignored=ONE_NODE),
    _d("transaction.state.log.segment.bytes", INT, 104857600, "Segment size of __transaction_state.", HIGH,
       at_least(1)),
])

# Dynamic in Kafka (it re-binds listeners at run time), changed in kcompat only by a restart.
RESTART_ONLY = frozenset({"listeners", "listener.security.protocol.map"})

# Families of properties (security, metrics, quotas ...) accepted without effect: Kafka files and
# container environments routinely carry them.
IGNORED_PREFIXES: dict[str, str] = {
    "ssl.": NO_SECURITY,
    "sasl.": NO_SECURITY,
    "listener.name.": NO_SECURITY,
    "security.": NO_SECURITY,
    "authorizer.": "kcompat has no ACLs.",
    "super.users": "kcompat has no ACLs.",
    "metric.": "kcompat exports no JMX metrics.",
    "metrics.": "kcompat exports no JMX metrics.",
    "kafka.metrics.": "kcompat exports no JMX metrics.",
    "controller.": NO_QUORUM,
    "metadata.": NO_QUORUM,
    "quota.": "kcompat applies no quotas.",
    "replica.": ONE_NODE,
    "leader.imbalance.": ONE_NODE,
    "remote.log.": "kcompat has no tiered storage.",
    "share.": "kcompat has no share groups.",
    "group.share.": "kcompat has no share groups.",
    "zookeeper.": "Kafka 4 has no ZooKeeper mode.",
}

__all__ = ["BROKER_CONFIGS", "CLEANUP_POLICIES", "COMPRESSION_TYPES", "IGNORED_PREFIXES", "RESTART_ONLY",
           "TIMESTAMP_TYPES", "is_cluster_id"]
