"""Broker properties of share groups (KIP-932), Kafka 4.3.1's names, defaults and bounds:
membership, the share-partitions' acquisition locks, delivery counts and in-flight windows, share
sessions (a group config, `share.*` ConfigResource type 32, overrides the per-group ones); and the
share coordinator's `__share_group_state` and its records (ShareCoordinatorConfig)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcompat.config.definition import ConfigDef, ListOf, at_least, between
from kcompat.config.shorthand import HIGH, INT, LIST, MEDIUM, ONE_NODE, SHORT, prop

SHARE_PROPERTIES: list[ConfigDef] = [
    prop(
        "group.share.session.timeout.ms",
        INT,
        45000,
        "Session timeout of share group members.",
        MEDIUM,
        at_least(1),
    ),
    prop(
        "group.share.heartbeat.interval.ms",
        INT,
        5000,
        "Heartbeat interval given to share group members.",
        MEDIUM,
        at_least(1),
    ),
    prop(
        "group.share.min.heartbeat.interval.ms",
        INT,
        5000,
        "Lowest share.heartbeat.interval.ms a group config may set.",
        MEDIUM,
        at_least(1),
    ),
    prop(
        "group.share.max.heartbeat.interval.ms",
        INT,
        15000,
        "Highest share.heartbeat.interval.ms a group config may set.",
        MEDIUM,
        at_least(1),
    ),
    prop("group.share.max.size", INT, 200, "Most members of one share group.", MEDIUM, between(1, 1000)),
    prop(
        "group.share.assignors",
        LIST,
        ["simple"],
        "Server-side assignors of share groups.",
        MEDIUM,
        ListOf(("simple",)),
    ),
    prop(
        "group.share.record.lock.duration.ms",
        INT,
        30000,
        "How long a share consumer holds the records it acquired before they are made available again.",
        MEDIUM,
        between(1000, 3600000),
    ),
    prop(
        "group.share.min.record.lock.duration.ms",
        INT,
        15000,
        "Lowest share.record.lock.duration.ms a group config may set.",
        MEDIUM,
        between(1000, 30000),
    ),
    prop(
        "group.share.max.record.lock.duration.ms",
        INT,
        60000,
        "Highest share.record.lock.duration.ms a group config may set.",
        MEDIUM,
        between(30000, 3600000),
    ),
    prop(
        "group.share.delivery.count.limit",
        INT,
        5,
        "Deliveries of a record after which it is archived instead of made available again.",
        MEDIUM,
        between(2, 10),
    ),
    prop(
        "group.share.partition.max.record.locks",
        INT,
        2000,
        "Most records of one share-partition in flight (acquired or awaiting redelivery).",
        MEDIUM,
        between(100, 10000),
    ),
    prop(
        "group.share.max.share.sessions",
        INT,
        2000,
        "Most share sessions the broker keeps.",
        MEDIUM,
        at_least(1),
    ),
]

SHARE_COORDINATOR_PROPERTIES: list[ConfigDef] = [
    prop(
        "share.coordinator.state.topic.num.partitions",
        INT,
        50,
        "Partitions of __share_group_state.",
        HIGH,
        at_least(1),
    ),
    prop(
        "share.coordinator.state.topic.replication.factor",
        SHORT,
        3,
        "Replication factor of __share_group_state.",
        HIGH,
        at_least(1),
        ignored=ONE_NODE,
    ),
    prop(
        "share.coordinator.state.topic.min.isr",
        SHORT,
        2,
        "min.insync.replicas of __share_group_state.",
        HIGH,
        at_least(1),
        ignored=ONE_NODE,
    ),
    prop(
        "share.coordinator.state.topic.segment.bytes",
        INT,
        104857600,
        "Segment size of __share_group_state.",
        HIGH,
        at_least(1),
    ),
    prop(
        "share.coordinator.snapshot.update.records.per.snapshot",
        INT,
        500,
        "The number of ShareUpdate records written for a share-partition between two of its ShareSnapshot records.",
        MEDIUM,
        between(0, 500),
    ),
    prop(
        "share.coordinator.cold.partition.snapshot.interval.ms",
        INT,
        300000,
        "How often share-partitions whose newest ShareSnapshot is this old get a fresh one, so that "
        "older records can be pruned.",
        MEDIUM,
        at_least(1),
    ),
    prop(
        "share.coordinator.state.topic.prune.interval.ms",
        INT,
        300000,
        "How often the records of __share_group_state that no share-partition needs are deleted.",
        MEDIUM,
        at_least(1),
    ),
    prop(
        "share.coordinator.write.timeout.ms",
        INT,
        5000,
        "How long a write to __share_group_state waits for its replicas before it fails.",
        HIGH,
        at_least(1),
    ),
]


def share_state_topic_configs(setting: Callable[[str], Any]) -> dict[str, str]:
    """The topic configs Kafka gives __share_group_state: delete, not compact (KIP-932), since the
    ShareUpdate records of a share-partition share one key and each one is needed."""
    return {
        "cleanup.policy": "delete",
        "compression.type": "producer",
        "segment.bytes": str(setting("share.coordinator.state.topic.segment.bytes")),
    }
