"""Broker properties of the share coordinator (KIP-932): `__share_group_state` and its records.
Kafka 4.3's names and defaults (ShareCoordinatorConfig); the other `share.` properties are accepted
and ignored (broker_properties.IGNORED_PREFIXES)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcompat.config.definition import ConfigDef, at_least, between
from kcompat.config.shorthand import HIGH, INT, MEDIUM, ONE_NODE, SHORT, prop

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
