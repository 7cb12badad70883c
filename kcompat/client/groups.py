"""Consumer groups: ListGroups, DescribeGroups, ConsumerGroupDescribe, OffsetFetch, OffsetCommit,
OffsetDelete and DeleteGroups.

A KIP-848 group (group.protocol=consumer) is not a classic group: DescribeGroups answers
GROUP_ID_NOT_FOUND for it (Kafka 4.x) or names it a consumer-protocol group, so describe_group
falls back to ConsumerGroupDescribe, whose members carry their assignment as topic partitions.

A classic group's member assignment is a ConsumerProtocolAssignment blob (version int16, then the
body), decoded with kcompat.wire's declaration of it. Committed offsets come from OffsetFetch
asked for every topic (topics=None), in the v8+ batched shape or the older single-group one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kcompat.client.cluster import Cluster, retry_coordinator
from kcompat.client.errors import KafkaError, check
from kcompat.wire.codec import MessageCodec
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.consumer_protocol import CONSUMER_PROTOCOL_ASSIGNMENT
from kcompat.wire.primitives import Reader

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
OFFSET_DELETE = 47
CONSUMER_GROUP_DESCRIBE = 69

_VERSION = struct.Struct(">h")
_assignment = MessageCodec(CONSUMER_PROTOCOL_ASSIGNMENT)


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: dict[str, list[int]] = field(default_factory=dict)


@dataclass(slots=True)
class Group:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[Member]


def decode_assignment(blob: bytes | None) -> dict[str, list[int]]:
    """topic -> partitions from a consumer-protocol assignment ({} for an empty or foreign blob)."""
    if not blob or len(blob) < 2:
        return {}
    version = _VERSION.unpack_from(blob, 0)[0]
    version = min(max(version, 0), 3)  # newer versions keep v3's fields first, as Kafka reads them
    try:
        body = _assignment.decoder(version)(Reader(memoryview(blob)[2:]))
    except Exception:
        return {}
    out: dict[str, list[int]] = {}
    for tp in body.assigned_partitions:
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return {t: sorted(ps) for t, ps in out.items()}


def list_groups(cluster: Cluster) -> list[tuple[str, str, str, str]]:
    """(group id, state, protocol type, group type) for every group of every broker."""
    meta = cluster.metadata([])
    seen: dict[str, tuple[str, str, str, str]] = {}
    for node in sorted(meta.brokers):
        _, answer = cluster.node(node).request(LIST_GROUPS, {"states_filter": [], "types_filter": []})
        check(answer.error_code, f"broker {node}: ListGroups")
        for g in answer.groups:
            seen[g.group_id] = (
                g.group_id,
                getattr(g, "group_state", "") or "",
                g.protocol_type or "",
                getattr(g, "group_type", "") or "",
            )
    return [seen[k] for k in sorted(seen)]


def describe_group(cluster: Cluster, group: str) -> Group:
    """A classic group from DescribeGroups, a KIP-848 one from ConsumerGroupDescribe."""
    return retry_coordinator(cluster, lambda: _describe_group(cluster, group))


def _describe_group(cluster: Cluster, group: str) -> Group:
    coordinator = cluster.coordinator(group)
    _, answer = coordinator.request(
        DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False}
    )
    g = answer.groups[0]
    # DescribeGroups v6+ answers GROUP_ID_NOT_FOUND for a consumer-protocol group (KIP-1043); older
    # versions describe it as a Dead group without members.
    maybe_modern = g.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (
        not g.error_code and g.group_state == "Dead"
    )
    if maybe_modern and CONSUMER_GROUP_DESCRIBE in coordinator.api_versions:
        modern = _consumer_group_describe(coordinator, group)
        if modern is not None:
            return modern
    check(g.error_code, f"group {group}: DescribeGroups")
    members = [
        Member(
            m.member_id,
            getattr(m, "group_instance_id", None),
            m.client_id,
            m.client_host,
            decode_assignment(bytes(m.member_assignment)) if g.protocol_type == "consumer" else {},
        )
        for m in g.members
    ]
    return Group(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members)


def _consumer_group_describe(conn: object, group: str) -> Group | None:
    """The group as ConsumerGroupDescribe sees it; None when it is not a consumer-protocol group."""
    _, answer = conn.request(  # type: ignore[attr-defined]
        CONSUMER_GROUP_DESCRIBE, {"group_ids": [group], "include_authorized_operations": False}
    )
    g = answer.groups[0]
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    check(g.error_code, f"group {group}: ConsumerGroupDescribe", g.error_message)
    members = []
    for m in g.members:
        assignment: dict[str, list[int]] = {}
        for tp in m.assignment.topic_partitions:
            assignment.setdefault(tp.topic_name, []).extend(tp.partitions)
        members.append(
            Member(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                {t: sorted(ps) for t, ps in assignment.items()},
            )
        )
    return Group(g.group_id, g.group_state, "consumer", g.assignor_name or "", members)


def delete_offsets(
    cluster: Cluster, group: str, partitions: dict[str, list[int]]
) -> dict[tuple[str, int], int]:
    """OffsetDelete: (topic, partition) -> error code (0: the commit is gone)."""
    body = {
        "group_id": group,
        "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in partitions.items()
        ],
    }
    _, answer = cluster.coordinator(group).request(OFFSET_DELETE, body)
    if answer.error_code:
        raise KafkaError(answer.error_code, f"group {group}: OffsetDelete")
    return {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}


def committed_offsets(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> committed offset, for every partition the group has a commit on."""
    return retry_coordinator(cluster, lambda: _committed_offsets(cluster, group))


def _committed_offsets(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    conn = cluster.coordinator(group)
    version = conn.version_for(OFFSET_FETCH)
    body = {
        "group_id": group,
        "topics": None,
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}],
        "require_stable": False,
    }
    _, answer = conn.request(OFFSET_FETCH, body, version)
    if version >= 8:
        g = answer.groups[0]
        check(g.error_code, f"group {group}: OffsetFetch")
        topics = g.topics
    else:
        check(getattr(answer, "error_code", 0), f"group {group}: OffsetFetch")
        topics = answer.topics
    out: dict[tuple[str, int], int] = {}
    for t in topics:
        for p in t.partitions:
            check(p.error_code, f"group {group} {t.name}[{p.partition_index}]: OffsetFetch")
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = p.committed_offset
    return out


def commit_offsets(cluster: Cluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit as an admin does: generation -1 and no member id, which a broker accepts only for an
    empty group (a live group answers UNKNOWN_MEMBER_ID or REBALANCE_IN_PROGRESS)."""
    by_topic: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        )
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
    _, answer = cluster.coordinator(group).request(OFFSET_COMMIT, body)
    for t in answer.topics:
        for p in t.partitions:
            check(p.error_code, f"group {group} {t.name}[{p.partition_index}]: OffsetCommit")


def delete_groups(cluster: Cluster, groups: list[str]) -> dict[str, int]:
    out = {}
    for group in groups:
        _, answer = cluster.coordinator(group).request(DELETE_GROUPS, {"groups_names": [group]})
        out.update({r.group_id: r.error_code for r in answer.results})
    return out
