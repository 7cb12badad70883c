"""Broker properties of share groups (KIP-932): membership, the share-partitions' acquisition locks,
delivery counts and in-flight windows, share sessions. Kafka 4.3.1's names, defaults and bounds; a
group config (`share.*`, ConfigResource type 32) overrides the per-group ones."""

from __future__ import annotations

from kcompat.config.definition import ConfigDef, ListOf, at_least, between
from kcompat.config.shorthand import INT, LIST, MEDIUM, prop

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
