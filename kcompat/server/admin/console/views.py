"""What the console shows, read from the running broker as plain data (no HTML here).

    brokers(broker)          this node: id, endpoint, rack, cluster id; in cluster mode every
                             registered broker from the metadata image, with its state
    controllers(broker)      cluster mode: the KRaft controllers (registered in the image, else the
                             controller.quorum.bootstrap.servers), the active one marked
    topics(broker)           every topic: partitions, records (end - start summed), bytes on disk
    topic(broker, name)      its partitions (start, end, size, segments; in cluster mode leader,
                             replicas and ISR from the image) and configs with their source
    groups(broker)           every group: type, state, members, total lag
    group(broker, id)        its members with their partitions, and every assigned or committed
                             partition with committed offset, log start/end and lag (end - committed)

Lag is computed as kafka-consumer-groups and `kcompat group describe` do: against the high
watermark, `None` where the group has committed nothing for an assigned partition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kcompat.coordinator.classic_group import ClassicGroup
from kcompat.coordinator.consumer_group import ConsumerGroup
from kcompat.coordinator.consumer_protocol import decode_assignment
from kcompat.metadata.image import MetadataImage
from kcompat.security.authorizer import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kcompat.wire.errors import DecodeError

if TYPE_CHECKING:
    from kcompat.coordinator.group_store import Group
    from kcompat.server.broker import Broker


@dataclass(slots=True)
class PartitionRow:
    partition: int
    start: int
    end: int
    size: int
    segments: int
    leader: int | None = None  # cluster mode: from the image's PartitionRegistration
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()


@dataclass(slots=True)
class TopicRow:
    name: str
    partitions: int
    records: int
    size: int
    internal: bool


@dataclass(slots=True)
class MemberRow:
    member_id: str
    client_id: str
    host: str
    partitions: list[tuple[str, int]]


@dataclass(slots=True)
class LagRow:
    topic: str
    partition: int
    committed: int | None
    start: int
    end: int
    lag: int | None
    member: str


@dataclass(slots=True)
class GroupRow:
    group_id: str
    kind: str  # "classic", "consumer" (KIP-848) or "streams" (KIP-1071)
    state: str
    protocol: str
    members: list[MemberRow] = field(default_factory=list)
    partitions: list[LagRow] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(r.lag for r in self.partitions if r.lag is not None)


def _image(broker: Broker) -> MetadataImage | None:
    """The KRaft metadata image in cluster mode; None on a single node."""
    return broker.cluster.image()


def brokers(broker: Broker) -> list[dict[str, object]]:
    image = _image(broker)
    if image is None:
        return [
            {
                "node_id": broker.node_id,
                "host": broker.advertised_host,
                "port": broker.advertised_port,
                "rack": broker.rack or "",
                "cluster_id": broker.cluster_id,
                "state": "running",
                "this": True,
            }
        ]
    out: list[dict[str, object]] = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        ep = next(
            (e for e in b.endpoints if e.name in broker.endpoints), b.endpoints[0] if b.endpoints else None
        )
        state = "controlled shutdown" if b.in_controlled_shutdown else "fenced" if b.fenced else "unfenced"
        out.append(
            {
                "node_id": b.broker_id,
                "host": ep.host if ep else "",
                "port": ep.port if ep else 0,
                "rack": b.rack or "",
                "cluster_id": broker.cluster_id,
                "state": state,
                "epoch": b.epoch,
                "this": b.broker_id == broker.node_id,
            }
        )
    return out


def controllers(broker: Broker) -> list[dict[str, object]]:
    image = _image(broker)
    if image is None:
        return []
    active = broker.quorum_leader()
    rows: list[dict[str, object]] = [
        {"node_id": c.controller_id, "host": e.host, "port": e.port, "active": active == (e.host, e.port)}
        for c in sorted(image.controllers.values(), key=lambda c: c.controller_id)
        for e in c.endpoints[:1]
    ]
    if not rows:  # a static quorum (kraft.version 0) registers no controllers: the configured ones
        bootstrap = str(broker.config.get("controller.quorum.bootstrap.servers") or "")
        for item in filter(None, (x.strip() for x in bootstrap.split(","))):
            host, _, port = item.rpartition(":")
            rows.append(
                {
                    "node_id": "?",
                    "host": host,
                    "port": int(port) if port.isdigit() else 0,
                    "active": active == (host, int(port) if port.isdigit() else 0),
                }
            )
    return rows


def _partitions(broker: Broker, name: str, count: int) -> list[PartitionRow]:
    logs = broker.replicas.logs
    image = _image(broker)
    t = image.topic(name) if image is not None else None
    rows = []
    for p in range(count):
        plog = logs.get(name, p) if logs is not None else None
        if plog is None:
            row = PartitionRow(p, 0, 0, 0, 0)
        else:
            row = PartitionRow(p, plog.log_start_offset, plog.high_watermark, plog.size, len(plog.segments))
        reg = t.partitions.get(p) if t is not None else None
        if reg is not None:
            row.leader, row.replicas, row.isr = reg.leader, tuple(reg.replicas), tuple(reg.isr)
        rows.append(row)
    return rows


def topics(broker: Broker) -> list[TopicRow]:
    out = []
    for t in sorted(broker.metadata.topics.all(), key=lambda t: (t.internal, t.name)):
        parts = _partitions(broker, t.name, t.partitions)
        out.append(
            TopicRow(
                t.name,
                t.partitions,
                sum(p.end - p.start for p in parts),
                sum(p.size for p in parts),
                t.internal,
            )
        )
    return out


def topic(
    broker: Broker, name: str
) -> tuple[TopicRow, list[PartitionRow], list[tuple[str, str, str]]] | None:
    t = broker.metadata.topic(name)
    if t is None:
        return None
    parts = _partitions(broker, t.name, t.partitions)
    row = TopicRow(
        t.name, t.partitions, sum(p.end - p.start for p in parts), sum(p.size for p in parts), t.internal
    )
    configs = [
        (e.name, "" if e.sensitive else (e.value or ""), e.source.name)
        for e in broker.metadata.describe_topic_configs(t)
    ]
    return row, parts, configs


def _members(broker: Broker, group: Group) -> list[MemberRow]:
    rows = []
    if isinstance(group, ClassicGroup):
        for m in group.members.values():
            parts: list[tuple[str, int]] = []
            if m.protocol_type == "consumer" and m.assignment:
                try:
                    parts = [(t, p) for t, ps in decode_assignment(m.assignment).items() for p in ps]
                except DecodeError:
                    parts = []
            rows.append(MemberRow(m.member_id, m.client_id, m.client_host, sorted(parts)))
    elif isinstance(group, ConsumerGroup):
        for cm in group.members.values():
            named = []
            for topic_id, ps in cm.assigned.items():
                t = broker.metadata.topics.by_id(topic_id)
                named += [(t.name if t is not None else str(topic_id), p) for p in ps]
            rows.append(MemberRow(cm.member_id, cm.client_id, cm.client_host, sorted(named)))
    else:  # a streams group's members run tasks, not partitions
        rows.extend(
            MemberRow(sm.member_id, sm.client_id, sm.client_host, []) for sm in group.members.values()
        )
    return rows


def _row(
    broker: Broker, group_id: str, group: Group | None, committed: Mapping[tuple[str, int], int]
) -> GroupRow:
    if group is None:  # only committed offsets are left (a simple consumer's, or an emptied group's)
        row = GroupRow(group_id, "classic", "EMPTY", "")
    elif isinstance(group, ClassicGroup):
        # An empty group keeps its protocol type but has no protocol: "consumer", not "consumer/".
        protocol = "/".join(p for p in (group.protocol_type, group.protocol_name) if p)
        row = GroupRow(group_id, "classic", group.state.name, protocol)
    elif isinstance(group, ConsumerGroup):
        row = GroupRow(group_id, "consumer", group.state().name, "consumer")
    else:
        row = GroupRow(group_id, "streams", group.state().name, "streams")
    if group is not None:
        row.members = _members(broker, group)
    owner = {tp: m.member_id for m in row.members for tp in m.partitions}
    logs = broker.replicas.logs
    for topic_name, partition in sorted(set(owner) | set(committed)):
        plog = logs.get(topic_name, partition) if logs is not None else None
        if plog is None:
            continue  # deleted since
        offset = committed.get((topic_name, partition))
        end = plog.high_watermark
        row.partitions.append(
            LagRow(
                topic_name,
                partition,
                offset,
                plog.log_start_offset,
                end,
                None if offset is None else max(end - offset, 0),
                owner.get((topic_name, partition), ""),
            )
        )
    return row


def groups(broker: Broker) -> list[GroupRow]:
    read = broker.group_service.snapshot()
    all_groups, offsets = read.groups, read.committed
    return [
        _row(broker, g, all_groups.get(g), offsets.get(g, {})) for g in sorted(set(all_groups) | set(offsets))
    ]


def group(broker: Broker, group_id: str) -> GroupRow | None:
    read = broker.group_service.snapshot()
    all_groups, offsets = read.groups, read.committed
    if group_id not in all_groups and group_id not in offsets:
        return None
    return _row(broker, group_id, all_groups.get(group_id), offsets.get(group_id, {}))


def may_describe_cluster(broker: Broker, principal: str | None, host: str, operation: AclOperation) -> bool:
    """What DescribeAcls, DescribeUserScramCredentials (DESCRIBE) and a broker's DescribeConfigs
    (DESCRIBE_CONFIGS) ask of the CLUSTER resource: with an authorizer, the console's pages that
    show the same ask the same of the logged-in user (no session: refused)."""
    auth = broker.authorizer
    if auth is None:
        return True
    return principal is not None and auth.authorize(
        principal, host, operation, ResourceType.CLUSTER, CLUSTER_NAME
    )


def acls(broker: Broker) -> list[tuple[str, str, str, str, str, str, str]] | None:
    """Every ACL as kafka-acls lists it (resource type, name, pattern, principal, host, operation,
    permission); None without an authorizer."""
    auth = broker.authorizer
    if auth is None:
        return None
    return sorted(
        (
            ResourceType(b.resource_type).name,
            b.name,
            PatternType(b.pattern).name,
            b.principal,
            b.host,
            AclOperation(b.operation).name,
            AclPermissionType(b.permission).name,
        )
        for b in auth.acls()
    )


def users(broker: Broker) -> list[tuple[str, list[tuple[str, int]]]]:
    """The SCRAM users and, per mechanism, its iterations (the salted keys are not shown)."""
    return [
        (user, sorted((m, c.iterations) for m, c in broker.scram.mechanisms_of(user).items()))
        for user in broker.scram.users()
    ]


def broker_configs(broker: Broker) -> list[tuple[str, str, str]]:
    """This broker's configs as DescribeConfigs gives them (sensitive values hidden), with their source."""
    return [
        (e.name, "(sensitive)" if e.sensitive else (e.value or ""), e.source.name)
        for e in broker.metadata.config.describe(None, include_synonyms=False, include_documentation=False)
    ]
