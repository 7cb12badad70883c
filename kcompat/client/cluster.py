"""The cluster as the tools see it: bootstrap, Metadata, and a connection per broker.

Bootstrap tries each `host:port` in turn; the first that answers ApiVersions serves Metadata.
Requests that must go to a partition leader or a group coordinator find it here and reuse one
connection per node id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kcompat.client.connection import Connection
from kcompat.client.errors import CannotConnect, KafkaError, check
from kcompat.client.security import ClientSecurity
from kcompat.wire.error_codes import ErrorCode

DEFAULT_BROKERS = "127.0.0.1:9092"
_RETRIABLE_COORDINATOR = (
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
)
T = TypeVar("T")


def retry_coordinator(cluster: Cluster, call: Callable[[], T]) -> T:
    """call(), asked again while the group coordinator is moving or loading (until the timeout):
    those answers are transient, as Kafka's clients treat them."""
    deadline = time.monotonic() + cluster.timeout
    while True:
        try:
            return call()
        except KafkaError as e:
            if e.code not in _RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


METADATA = 3
FIND_COORDINATOR = 10
GROUP_KEY = 0


def parse_brokers(text: str) -> list[tuple[str, int]]:
    """'h1:9092,h2:9093' -> [(h1, 9092), (h2, 9093)]; a bare host means port 9092; [v6]:port works."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        item = item.split("://", 1)[-1]  # PLAINTEXT://host:port as listeners write it
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port_text = rest.removeprefix(":") or "9092"
        elif item.count(":") == 1:
            host, port_text = item.split(":")
        else:
            host, port_text = item, "9092"
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"bad broker address {item!r}: the port must be a number") from None
        if not 0 < port < 65536:
            raise ValueError(f"bad broker address {item!r}: port {port} is out of range")
        out.append((host or "127.0.0.1", port))
    if not out:
        raise ValueError("no broker address given")
    return out


@dataclass(slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error_code: int


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: Any
    internal: bool
    error_code: int
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


@dataclass(slots=True)
class Metadata:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, tuple[str, int, str | None]]
    topics: dict[str, TopicInfo]


class Cluster:
    """Connections to a cluster, opened on demand; close() ends them all."""

    def __init__(
        self,
        brokers: str = DEFAULT_BROKERS,
        *,
        timeout: float = 10.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.addresses = parse_brokers(brokers)
        self.timeout = timeout
        self.security = security or ClientSecurity()
        self._bootstrap: Connection | None = None
        self._nodes: dict[int, Connection] = {}
        self._broker_addresses: dict[int, tuple[str, int]] = {}

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in {id(c): c for c in [self._bootstrap, *self._nodes.values()] if c}.values():
            conn.close()
        self._nodes.clear()
        self._bootstrap = None

    @property
    def bootstrap(self) -> Connection:
        if self._bootstrap is None:
            failures = []
            for host, port in self.addresses:
                try:
                    self._bootstrap = Connection(host, port, timeout=self.timeout, security=self.security)
                    break
                except CannotConnect as e:
                    failures.append(str(e))
            else:
                raise CannotConnect("; ".join(failures))
        return self._bootstrap

    def metadata(self, topics: list[str] | None = None, *, auto_create: bool = False) -> Metadata:
        """Metadata for `topics` (None: every topic). A topic's error code is left to the caller."""
        conn = self.bootstrap
        wanted = None if topics is None else [{"name": t} for t in topics]
        _, answer = conn.request(METADATA, {"topics": wanted, "allow_auto_topic_creation": auto_create})
        brokers = {b.node_id: (b.host, b.port, b.rack) for b in answer.brokers}
        self._broker_addresses.update({n: (h, p) for n, (h, p, _) in brokers.items()})
        out: dict[str, TopicInfo] = {}
        for t in answer.topics:
            info = TopicInfo(
                t.name, getattr(t, "topic_id", None), bool(getattr(t, "is_internal", False)), t.error_code
            )
            for p in t.partitions:
                info.partitions[p.partition_index] = PartitionInfo(
                    p.partition_index,
                    p.leader_id,
                    getattr(p, "leader_epoch", -1),
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    list(getattr(p, "offline_replicas", None) or []),
                    p.error_code,
                )
            out[t.name] = info
        return Metadata(
            getattr(answer, "cluster_id", None), getattr(answer, "controller_id", -1), brokers, out
        )

    def topic(self, name: str) -> TopicInfo:
        """One existing topic's metadata, or KafkaError(UNKNOWN_TOPIC_OR_PARTITION)."""
        info = self.metadata([name]).topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name}")
        check(info.error_code, f"topic {name}")
        return info

    def node(self, node_id: int) -> Connection:
        """The connection to broker `node_id` (the bootstrap one when it is that broker)."""
        conn = self._nodes.get(node_id)
        if conn is not None:
            return conn
        if node_id not in self._broker_addresses:
            self.metadata([])
        address = self._broker_addresses.get(node_id)
        if address is None:
            raise KafkaError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"broker {node_id}", "not in the cluster's metadata"
            )
        boot = self.bootstrap
        if (boot.host, boot.port) == address:
            conn = boot
        else:
            conn = Connection(*address, timeout=self.timeout, security=self.security)
        self._nodes[node_id] = conn
        return conn

    def any_node(self) -> Connection:
        return self.bootstrap

    def coordinator(self, group: str) -> Connection:
        """The group coordinator's connection. A broker still creating __consumer_offsets or loading
        the group answers COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS: asked again
        until the timeout, as Kafka's clients do."""
        return retry_coordinator(self, lambda: self._find_coordinator(group))

    def _find_coordinator(self, group: str) -> Connection:
        """FindCoordinator v4+ batches keys; older ones take one."""
        conn = self.bootstrap
        version = conn.version_for(FIND_COORDINATOR)
        body = {"key": group, "key_type": GROUP_KEY, "coordinator_keys": [group]}
        _, answer = conn.request(FIND_COORDINATOR, body, version)
        if version >= 4:
            c = answer.coordinators[0]
            check(c.error_code, f"group {group}: FindCoordinator", c.error_message)
            node, host, port = c.node_id, c.host, c.port
        else:
            check(
                answer.error_code, f"group {group}: FindCoordinator", getattr(answer, "error_message", None)
            )
            node, host, port = answer.node_id, answer.host, answer.port
        self._broker_addresses.setdefault(node, (host, port))
        return self.node(node)

    def leaders(self, topic: TopicInfo, partitions: list[int] | None = None) -> dict[int, list[int]]:
        """node id -> the partitions of `topic` it leads (all partitions, or those given)."""
        chosen = sorted(topic.partitions) if partitions is None else partitions
        out: dict[int, list[int]] = {}
        for p in chosen:
            info = topic.partitions.get(p)
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic.name}[{p}]")
            if info.leader < 0:
                raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic.name}[{p}]")
            out.setdefault(info.leader, []).append(p)
        return out
