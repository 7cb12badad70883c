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

from kcompat.config.broker_group_properties import GROUP_PROPERTIES, TRANSACTION_PROPERTIES
from kcompat.config.broker_kafka_properties import KAFKA_PROPERTIES, RESTART_ONLY_SECURITY
from kcompat.config.broker_log_properties import RECORD_PROPERTIES, STORAGE_PROPERTIES
from kcompat.config.broker_share_properties import SHARE_COORDINATOR_PROPERTIES, SHARE_PROPERTIES
from kcompat.config.definition import INT_MAX, Check, ConfigDef, ListOf, OneOf, at_least, table
from kcompat.config.shorthand import (
    BOOLEAN,
    HIGH,
    INT,
    LIST,
    LONG,
    LOW,
    MEDIUM,
    NO_JMX,
    NO_QUORUM,
    NO_TIERED_STORAGE,
    ONE_LOOP,
    ONE_NODE,
    PASSWORD,
    STRING,
    prop,
)


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


def admin_address(value: str) -> tuple[str, int] | None:
    """admin.listener as (host, port); None when it is empty (switched off). ValueError when malformed."""
    text = value.strip()
    text = text.removeprefix("http://")
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r} is not host:port")
    return host.strip("[]"), int(port)


def _is_admin_address(value: str) -> bool:
    try:
        admin_address(value)
    except ValueError:
        return False
    return True


NETWORK_PROPERTIES: list[ConfigDef] = [
    prop("node.id", INT, 1, "Id of this broker in Metadata responses and leader fields.", HIGH, at_least(0)),
    # Kafka's default -1 means "take node.id"; each of the two names is filled in from the other.
    prop(
        "broker.id", INT, -1, "Older name of node.id; when both are set they must agree.", HIGH, at_least(-1)
    ),
    prop(
        "cluster.id",
        STRING,
        None,
        "Cluster id reported to clients. When unset, kcompat generates one on first start and keeps it "
        "in meta.properties in the data directory.",
        HIGH,
        Check(
            is_cluster_id,
            "22 characters of URL-safe base64 (16 bytes), e.g. from `kafka-storage random-uuid`",
        ),
    ),
    prop(
        "broker.rack",
        STRING,
        None,
        "Rack reported for this broker in Metadata responses and registered with the controller; "
        "the rack-aware replica selector sends consumers of the same client.rack to it.",
        MEDIUM,
    ),
    prop(
        "replica.selector.class",
        STRING,
        None,
        "Cluster mode: how a partition leader picks the replica a consumer should read from (KIP-392). "
        "Unset: the leader serves every consumer. org.apache.kafka.common.replica.RackAwareReplicaSelector "
        "(or rack-aware): an in-sync replica in the consumer's client.rack.",
        MEDIUM,
        OneOf(("org.apache.kafka.common.replica.RackAwareReplicaSelector", "rack-aware")),
    ),
    prop(
        "listeners",
        LIST,
        ["PLAINTEXT://127.0.0.1:9092"],
        "Comma-separated NAME://host:port addresses to accept connections on. An empty host means all "
        "interfaces; listeners named in controller.listener.names are skipped. Dynamic in Kafka; kcompat "
        "changes it only by a restart.",
        HIGH,
        dynamic=True,
    ),
    prop(
        "advertised.listeners",
        LIST,
        None,
        "Addresses handed to clients in Metadata responses, by listener name. Defaults to listeners.",
        HIGH,
    ),
    prop(
        "listener.security.protocol.map",
        STRING,
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "Security protocol of each listener name. Dynamic in Kafka; kcompat changes it only by a restart.",
        LOW,
        dynamic=True,
    ),
    prop(
        "inter.broker.listener.name",
        STRING,
        None,
        "Listener brokers use among themselves.",
        MEDIUM,
        ignored=ONE_NODE,
    ),
    prop(
        "controller.listener.names",
        LIST,
        None,
        "Listener names used by the KRaft controller; such listeners are not opened.",
        MEDIUM,
    ),
    prop(
        "process.roles",
        LIST,
        None,
        "KRaft roles of this process. `broker` with "
        "controller.quorum.bootstrap.servers joins Apache Kafka controllers (cluster mode); otherwise kcompat "
        "runs as its own single node.",
        HIGH,
        ListOf(("broker", "controller")),
    ),
    prop(
        "controller.quorum.voters",
        LIST,
        [],
        "Static KRaft voter set (id@host:port); in cluster mode a broker's node.id must not be one of them.",
        HIGH,
    ),
    prop(
        "controller.quorum.bootstrap.servers",
        LIST,
        [],
        "KRaft controllers (host:port) a cluster-mode "
        "broker registers with and fetches __cluster_metadata from.",
        HIGH,
    ),
    prop(
        "broker.heartbeat.interval.ms",
        INT,
        2000,
        "Time between a cluster-mode broker's heartbeats to the controller.",
        MEDIUM,
    ),
    prop(
        "broker.session.timeout.ms",
        INT,
        9000,
        "How long the controller waits for a heartbeat before fencing "
        "the broker; the broker's retry backoff is capped at half of it.",
        MEDIUM,
    ),
    prop(
        "socket.request.max.bytes",
        INT,
        104857600,
        "Largest request frame accepted; a bigger size prefix closes the connection before anything is "
        "buffered.",
        HIGH,
        at_least(1),
    ),
    prop(
        "socket.send.buffer.bytes", INT, 102400, "SO_SNDBUF of client sockets; -1 keeps the OS default.", HIGH
    ),
    prop(
        "socket.receive.buffer.bytes",
        INT,
        102400,
        "SO_RCVBUF of client sockets when set (-1: the OS default); "
        "unset, kcompat leaves it to the kernel's autotuning, which took large produces faster.",
        HIGH,
    ),
    prop(
        "socket.listen.backlog.size",
        INT,
        50,
        "Backlog of pending connections on each listener.",
        MEDIUM,
        at_least(1),
    ),
    prop(
        "connections.max.idle.ms", LONG, 600000, "Idle client connections are closed after this long.", MEDIUM
    ),
    prop(
        "max.connections",
        INT,
        INT_MAX,
        "Most client connections open at once; more are refused.",
        MEDIUM,
        at_least(0),
        dynamic=True,
    ),
    prop(
        "max.connections.per.ip",
        INT,
        INT_MAX,
        "Most connections from one client address.",
        MEDIUM,
        at_least(0),
        dynamic=True,
    ),
    prop(
        "queued.max.requests",
        INT,
        500,
        "Requests buffered per broker before reading pauses.",
        HIGH,
        at_least(1),
    ),
    prop(
        "num.network.threads", INT, 3, "Network threads.", HIGH, at_least(1), dynamic=True, ignored=ONE_LOOP
    ),
    prop(
        "num.io.threads",
        INT,
        8,
        "Request handler threads.",
        HIGH,
        at_least(1),
        dynamic=True,
        ignored=ONE_LOOP,
    ),
    prop(
        "background.threads",
        INT,
        10,
        "Background task threads.",
        HIGH,
        at_least(1),
        dynamic=True,
        ignored=ONE_LOOP,
    ),
    prop("num.replica.fetchers", INT, 1, "Replica fetcher threads.", HIGH, dynamic=True, ignored=ONE_NODE),
    prop(
        "num.recovery.threads.per.data.dir",
        INT,
        2,
        "Threads for log recovery at start-up.",
        HIGH,
        at_least(1),
        dynamic=True,
        ignored=ONE_LOOP,
    ),
    # --- kcompat's own: the HTTP admin listener and the log lines ------------------------------
    prop(
        "admin.listener",
        STRING,
        "127.0.0.1:9644",
        "host:port of the HTTP admin listener (Prometheus /metrics), Redpanda's admin port by default; "
        "empty switches it off. When the default port is taken, the broker starts without it (said in "
        "the log); a port set here that cannot be bound stops start-up.",
        MEDIUM,
        Check(_is_admin_address, "host:port (an empty host: every interface), or empty to switch it off"),
    ),
    prop(
        "admin.console.token",
        PASSWORD,
        None,
        "A secret that logs in to the web console's actions as User:console (besides the broker's "
        "own SASL users); unset: only those users. Grant User:console ACLs or list it in super.users.",
        MEDIUM,
    ),
    prop(
        "log.segment.descriptors.max",
        INT,
        0,
        "Most descriptors kept open for segment .log files (active and sealed), across all "
        "partitions: more are opened when appended to or read, and the least recently used closed, so "
        "an idle partition holds none. 0: half the open file limit (raised to the hard limit at start); "
        "at most that limit less 64, kept for connections and index maps.",
        MEDIUM,
        at_least(0),
    ),
    prop(
        "log.close.timeout.ms",
        INT,
        10000,
        "Longest a clean stop spends closing the logs (final index entries, producer snapshots, one "
        "sync of each log dir). Past it the process exits without marking the logs cleanly shut down, "
        "as after a crash, and the next start recovers them from their recovery points: a stop stays "
        "prompt when the disk is far behind (thousands of partitions just filled).",
        MEDIUM,
        at_least(0),
    ),
    prop(
        "log.format",
        STRING,
        "plain",
        "Form of the broker's log lines on stderr: `plain` text or `json`, one object a line.",
        LOW,
        OneOf(("plain", "json")),
    ),
]

# ACLs (kcompat.security.authorizer): on when authorizer.class.name names Kafka's StandardAuthorizer.
AUTHORIZER_PROPERTIES: list[ConfigDef] = [
    prop(
        "authorizer.class.name",
        STRING,
        "",
        "Empty: no ACLs (every principal may do everything; the ACL APIs answer SECURITY_DISABLED). "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer: ACLs are checked on every request.",
        LOW,
        Check(
            lambda v: v in ("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
            "empty (no ACLs) or org.apache.kafka.metadata.authorizer.StandardAuthorizer (Kafka's KRaft authorizer)",
        ),
    ),
    prop(
        "super.users",
        STRING,
        "",
        "Principals allowed everything whatever the ACLs say, separated by semicolons: User:admin;User:ops.",
        LOW,
    ),
    prop(
        "allow.everyone.if.no.acl.found",
        BOOLEAN,
        False,
        "Allow every principal an action on a resource that has no ACL at all (of anyone).",
        LOW,
    ),
]

# Client quotas (kcompat.server.quotas): the windowed rate each quota is measured over.
QUOTA_PROPERTIES = [
    prop("quota.window.num", INT, 11, "Samples a client quota's rate is measured over.", LOW, at_least(1)),
    prop(
        "quota.window.size.seconds",
        INT,
        1,
        "Length of each sample of a client quota's rate.",
        LOW,
        at_least(1),
    ),
]

BROKER_CONFIGS: dict[str, ConfigDef] = table(
    [
        *NETWORK_PROPERTIES,
        *AUTHORIZER_PROPERTIES,
        *QUOTA_PROPERTIES,
        *STORAGE_PROPERTIES,
        *RECORD_PROPERTIES,
        *GROUP_PROPERTIES,
        *SHARE_PROPERTIES,
        *TRANSACTION_PROPERTIES,
        *SHARE_COORDINATOR_PROPERTIES,
    ]
)
# The rest of Kafka's properties, accepted and reported (those kcompat's tables define win).
BROKER_CONFIGS.update((d.name, d) for d in KAFKA_PROPERTIES if d.name not in BROKER_CONFIGS)

# Dynamic in Kafka (it re-binds listeners at run time), changed in kcompat only by a restart.
RESTART_ONLY = frozenset({"listeners", "listener.security.protocol.map"}) | RESTART_ONLY_SECURITY

# Families of properties (security, metrics, quotas ...) accepted without effect: Kafka files and
# container environments routinely carry them.
IGNORED_PREFIXES: dict[str, str] = {
    "metric.": NO_JMX,
    "metrics.": NO_JMX,
    "kafka.metrics.": NO_JMX,
    "controller.": NO_QUORUM,
    "metadata.": NO_QUORUM,
    "replica.": ONE_NODE,
    "leader.imbalance.": ONE_NODE,
    "remote.log.": NO_TIERED_STORAGE,
    # Share groups: the settings kcompat implements are defined (broker_share_properties); the
    # others (the share coordinator's state topic, persister class ...) have no effect here yet.
    "share.": "kcompat keeps share-group state without Kafka's share coordinator settings.",
    "group.share.": "kcompat does not implement this share group setting.",
    "zookeeper.": "Kafka 4 has no ZooKeeper mode.",
}

# In cluster mode (process.roles=broker under Kafka's controllers) there is replication, leadership
# and a quorum: what a single node ignores for their want is used, except what these name (a key,
# or a prefix ending in "."), which cluster mode ignores for another reason.
CONTROLLERS_SETTING = "a KRaft controller's setting: the Kafka controllers apply their own."
NO_METADATA_LOG = "a kcompat broker keeps no metadata log of its own: it reads the controllers' at start-up."
CLUSTER_IGNORED: dict[str, str] = {
    "auto.leader.rebalance.enable": CONTROLLERS_SETTING,
    "leader.imbalance.": CONTROLLERS_SETTING,
    "controller.": CONTROLLERS_SETTING,
    "num.replica.fetchers": "kcompat runs one replica fetcher per leader broker, on its event loop.",
    "replica.": "kcompat's replica fetcher has no such setting.",
    "metadata.": NO_METADATA_LOG,
    "metadata.log.dir": NO_METADATA_LOG,
}

__all__ = [
    "BROKER_CONFIGS",
    "CLUSTER_IGNORED",
    "IGNORED_PREFIXES",
    "RESTART_ONLY",
    "admin_address",
    "is_cluster_id",
]
