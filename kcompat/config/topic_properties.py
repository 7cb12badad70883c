"""Topic-level configs and the broker properties that supply their defaults (Kafka's "synonyms").

A topic's value comes from, in order: its own override (CreateTopics / AlterConfigs), then the first
broker synonym set explicitly (dynamically or in the broker's configuration), then the broker
default. Some synonyms are in other units: retention.ms <- log.retention.hours means hours * 3600000.

    topic config                    broker synonyms, first wins
    cleanup.policy                  log.cleanup.policy
    retention.ms                    log.retention.ms, log.retention.minutes, log.retention.hours
    segment.ms                      log.roll.ms, log.roll.hours
    max.message.bytes               message.max.bytes
    ...                             (TOPIC_SYNONYMS below is the full list)
"""

from __future__ import annotations

from dataclasses import dataclass

from kcompat.config.definition import LONG_MAX, Check, ConfigDef, ListOf, OneOf, at_least, between, table
from kcompat.config.shorthand import (
    BOOLEAN,
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    DOUBLE,
    GZIP_LEVEL,
    INT,
    LIST,
    LONG,
    MEDIUM,
    STRING,
    TIMESTAMP_TYPES,
    prop,
)

MS_PER_MINUTE = 60_000
MS_PER_HOUR = 3_600_000


@dataclass(frozen=True)
class Synonym:
    """A broker property that supplies a topic config's default; its value times `scale`."""

    broker_name: str
    scale: int = 1


TOPIC_CONFIGS: dict[str, ConfigDef] = table(
    [
        prop(
            "cleanup.policy",
            LIST,
            ["delete"],
            "delete removes old segments, compact keeps the last record per key; both may be combined.",
            MEDIUM,
            ListOf(CLEANUP_POLICIES, allow_empty=True),
        ),
        prop(
            "compression.type",
            STRING,
            "producer",
            "Codec the topic's batches are stored with; producer keeps the producer's codec.",
            MEDIUM,
            OneOf(COMPRESSION_TYPES),
        ),
        prop(
            "compression.gzip.level", INT, -1, "gzip level when the broker recompresses.", MEDIUM, GZIP_LEVEL
        ),
        prop(
            "compression.lz4.level", INT, 9, "lz4 level when the broker recompresses.", MEDIUM, between(1, 17)
        ),
        prop(
            "compression.zstd.level",
            INT,
            3,
            "zstd level when the broker recompresses.",
            MEDIUM,
            between(-131072, 22),
        ),
        prop(
            "delete.retention.ms",
            LONG,
            86400000,
            "How long tombstones stay readable in a compacted topic.",
            MEDIUM,
            at_least(0),
        ),
        prop(
            "file.delete.delay.ms",
            LONG,
            60000,
            "Delay before a deleted segment's files are removed.",
            MEDIUM,
            at_least(0),
        ),
        prop(
            "flush.messages",
            LONG,
            LONG_MAX,
            "Records between two fsyncs of the partition.",
            MEDIUM,
            at_least(1),
        ),
        prop("flush.ms", LONG, LONG_MAX, "Longest time appended data stays unsynced.", MEDIUM, at_least(0)),
        prop(
            "follower.replication.throttled.replicas",
            LIST,
            [],
            "Replicas throttled on the follower side.",
            MEDIUM,
        ),
        prop(
            "leader.replication.throttled.replicas",
            LIST,
            [],
            "Replicas throttled on the leader side.",
            MEDIUM,
        ),
        prop(
            "index.interval.bytes",
            INT,
            4096,
            "Bytes of records between two offset index entries.",
            MEDIUM,
            at_least(0),
        ),
        prop(
            "local.retention.bytes",
            LONG,
            -2,
            "Local size limit for tiered storage (-2: retention.bytes).",
            MEDIUM,
            at_least(-2),
        ),
        prop(
            "local.retention.ms",
            LONG,
            -2,
            "Local retention for tiered storage (-2: retention.ms).",
            MEDIUM,
            at_least(-2),
        ),
        prop(
            "max.compaction.lag.ms",
            LONG,
            LONG_MAX,
            "Longest a record may stay uncompacted.",
            MEDIUM,
            at_least(1),
        ),
        prop(
            "max.message.bytes",
            INT,
            1048588,
            "Largest record batch the topic accepts (after compression).",
            MEDIUM,
            at_least(0),
        ),
        prop(
            "message.timestamp.after.max.ms",
            LONG,
            3600000,
            "How far in the future a CreateTime timestamp may be.",
            MEDIUM,
            at_least(0),
        ),
        prop(
            "message.timestamp.before.max.ms",
            LONG,
            LONG_MAX,
            "How far in the past a CreateTime timestamp may be.",
            MEDIUM,
            at_least(0),
        ),
        prop(
            "message.timestamp.type",
            STRING,
            "CreateTime",
            "CreateTime keeps the producer's timestamps, "
            "LogAppendTime stamps batches with the broker's clock.",
            MEDIUM,
            OneOf(TIMESTAMP_TYPES),
        ),
        prop(
            "min.cleanable.dirty.ratio",
            DOUBLE,
            0.5,
            "Share of uncompacted bytes that makes the log eligible for cleaning.",
            MEDIUM,
            between(0, 1),
        ),
        prop(
            "min.compaction.lag.ms",
            LONG,
            0,
            "Minimum age of a record before it may be compacted.",
            MEDIUM,
            at_least(0),
        ),
        prop(
            "min.insync.replicas", INT, 1, "In-sync replicas an acks=all produce needs.", MEDIUM, at_least(1)
        ),
        prop("preallocate", BOOLEAN, False, "Preallocate segment files.", MEDIUM),
        prop(
            "remote.storage.enable",
            BOOLEAN,
            False,
            "Tiered storage for the topic (not supported by kcompat).",
            MEDIUM,
            Check(lambda v: v is False, "false (kcompat has no tiered storage)"),
        ),
        # KIP-950's switches of a topic's tiered storage: any value means nothing while
        # remote.storage.enable is false, which is all kcompat accepts (MirrorMaker 2 copies them).
        prop("remote.log.copy.disable", BOOLEAN, False, "Stop copying segments to tiered storage.", MEDIUM),
        prop(
            "remote.log.delete.on.disable",
            BOOLEAN,
            False,
            "Delete the tiered copy when tiered storage is switched off.",
            MEDIUM,
        ),
        prop(
            "retention.bytes",
            LONG,
            -1,
            "Partition size above which old segments are deleted; -1: no limit.",
            MEDIUM,
        ),
        prop(
            "retention.ms",
            LONG,
            604800000,
            "How long records are kept; -1 keeps them forever.",
            MEDIUM,
            at_least(-1),
        ),
        prop(
            "segment.bytes",
            INT,
            1073741824,
            "Size at which a segment is rolled.",
            MEDIUM,
            at_least(1024 * 1024),
        ),
        prop(
            "segment.index.bytes",
            INT,
            10485760,
            "Largest offset or time index file of a segment.",
            MEDIUM,
            at_least(4),
        ),
        prop(
            "segment.jitter.ms",
            LONG,
            0,
            "Random reduction of segment.ms, to spread rolls out.",
            MEDIUM,
            at_least(0),
        ),
        prop(
            "segment.ms",
            LONG,
            604800000,
            "Age at which a segment is rolled even if not full.",
            MEDIUM,
            at_least(1),
        ),
        prop("unclean.leader.election.enable", BOOLEAN, False, "Allow out-of-sync replicas to lead.", MEDIUM),
    ]
)

TOPIC_SYNONYMS: dict[str, tuple[Synonym, ...]] = {
    "cleanup.policy": (Synonym("log.cleanup.policy"),),
    "compression.type": (Synonym("compression.type"),),
    "compression.gzip.level": (Synonym("compression.gzip.level"),),
    "compression.lz4.level": (Synonym("compression.lz4.level"),),
    "compression.zstd.level": (Synonym("compression.zstd.level"),),
    "delete.retention.ms": (Synonym("log.cleaner.delete.retention.ms"),),
    "file.delete.delay.ms": (Synonym("log.segment.delete.delay.ms"),),
    "flush.messages": (Synonym("log.flush.interval.messages"),),
    "flush.ms": (Synonym("log.flush.interval.ms"), Synonym("log.flush.scheduler.interval.ms")),
    "index.interval.bytes": (Synonym("log.index.interval.bytes"),),
    "local.retention.bytes": (Synonym("log.local.retention.bytes"),),
    "local.retention.ms": (Synonym("log.local.retention.ms"),),
    "max.compaction.lag.ms": (Synonym("log.cleaner.max.compaction.lag.ms"),),
    "max.message.bytes": (Synonym("message.max.bytes"),),
    "message.timestamp.after.max.ms": (Synonym("log.message.timestamp.after.max.ms"),),
    "message.timestamp.before.max.ms": (Synonym("log.message.timestamp.before.max.ms"),),
    "message.timestamp.type": (Synonym("log.message.timestamp.type"),),
    "min.cleanable.dirty.ratio": (Synonym("log.cleaner.min.cleanable.ratio"),),
    "min.compaction.lag.ms": (Synonym("log.cleaner.min.compaction.lag.ms"),),
    "min.insync.replicas": (Synonym("min.insync.replicas"),),
    "preallocate": (Synonym("log.preallocate"),),
    "retention.bytes": (Synonym("log.retention.bytes"),),
    "retention.ms": (
        Synonym("log.retention.ms"),
        Synonym("log.retention.minutes", MS_PER_MINUTE),
        Synonym("log.retention.hours", MS_PER_HOUR),
    ),
    "segment.bytes": (Synonym("log.segment.bytes"),),
    "segment.index.bytes": (Synonym("log.index.size.max.bytes"),),
    "segment.jitter.ms": (Synonym("log.roll.jitter.ms"), Synonym("log.roll.jitter.hours", MS_PER_HOUR)),
    "segment.ms": (Synonym("log.roll.ms"), Synonym("log.roll.hours", MS_PER_HOUR)),
    "unclean.leader.election.enable": (Synonym("unclean.leader.election.enable"),),
}

# Broker properties that are one setting spelled in several units, most specific first.
BROKER_SYNONYM_CHAINS: dict[str, tuple[Synonym, ...]] = {
    chain[0].broker_name: chain for chain in TOPIC_SYNONYMS.values() if len(chain) > 1
}
for _chain in list(BROKER_SYNONYM_CHAINS.values()):
    for _s in _chain[1:]:
        if _s.scale != 1:  # a unit variant; log.flush.scheduler.interval.ms is only a fallback
            BROKER_SYNONYM_CHAINS[_s.broker_name] = _chain

__all__ = [
    "BROKER_SYNONYM_CHAINS",
    "MS_PER_HOUR",
    "MS_PER_MINUTE",
    "TOPIC_CONFIGS",
    "TOPIC_SYNONYMS",
    "Synonym",
]
