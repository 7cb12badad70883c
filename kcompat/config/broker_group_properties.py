"""Broker properties of the group and transaction coordinators: membership and rebalancing,
committed offsets and __consumer_offsets, producer ids and __transaction_state. Kafka 4.x's names and
defaults; broker_properties says what `dynamic` and `ignored` mean."""

from __future__ import annotations

from kcompat.config.definition import INT_MAX, ConfigDef, ListOf, at_least, between
from kcompat.config.shorthand import BOOLEAN, HIGH, INT, LIST, LONG, LOW, MEDIUM, ONE_NODE, SHORT, prop

GROUP_PROPERTIES: list[ConfigDef] = [
    prop("group.initial.rebalance.delay.ms", INT, 3000,
        "Wait for more members before the first rebalance of an empty classic group.", MEDIUM),
    prop("group.min.session.timeout.ms", INT, 6000, "Smallest session timeout a member may ask for.", MEDIUM),
    prop("group.max.session.timeout.ms", INT, 1800000, "Largest session timeout a member may ask for.",
        MEDIUM),
    prop("group.max.size", INT, INT_MAX, "Most members of one classic group.", MEDIUM, at_least(1)),
    prop("group.coordinator.rebalance.protocols", LIST, ["classic", "consumer"],
        "Group protocols offered: classic (JoinGroup/SyncGroup) and consumer (KIP-848 heartbeats).", MEDIUM,
        ListOf(("classic", "consumer", "share", "streams"))),
    prop("group.consumer.assignors", LIST, ["uniform", "range", "roundrobin"],
        "Server-side assignors of consumer-protocol groups; a member picks one with group.remote.assignor, "
        "and the first is the default.", MEDIUM, ListOf(("uniform", "range", "roundrobin"))),
    prop("offset.metadata.max.bytes", INT, 4096, "Most bytes of metadata a committed offset may carry.", HIGH,
        at_least(0)),
    prop("group.consumer.session.timeout.ms", INT, 45000, "Session timeout of consumer-protocol members.",
        MEDIUM, at_least(1)),
    prop("group.consumer.heartbeat.interval.ms", INT, 5000, "Heartbeat interval given to consumer-protocol "
        "members.", MEDIUM, at_least(1)),
    prop("group.consumer.max.size", INT, INT_MAX, "Most members of one consumer-protocol group.", MEDIUM,
        at_least(1)),
    prop("offsets.retention.minutes", INT, 10080,
        "How long committed offsets of an empty group are kept.", HIGH, at_least(1)),
    prop("offsets.retention.check.interval.ms", LONG, 600000, "How often expired offsets are removed.", HIGH,
        at_least(1)),
    prop("offsets.topic.num.partitions", INT, 50, "Partitions of the __consumer_offsets topic; fixed once "
        "the topic exists.", HIGH, at_least(1)),
    prop("offsets.topic.replication.factor", SHORT, 3, "Replication factor of __consumer_offsets.", HIGH,
        at_least(1), ignored=ONE_NODE),
    prop("offsets.topic.segment.bytes", INT, 104857600, "Segment size of __consumer_offsets.", HIGH,
        at_least(1)),
    prop("offsets.topic.compression.codec", INT, 0, "Codec of offset commit records (0 none ... 4 zstd).",
        HIGH, between(0, 4)),
    prop("offsets.load.buffer.size", INT, 5242880, "Read size when loading offsets at start-up.", HIGH,
        at_least(1)),
    prop("offsets.commit.timeout.ms", INT, 5000, "Longest wait for an offset commit to be stored.", HIGH,
        at_least(1)),
]

TRANSACTION_PROPERTIES: list[ConfigDef] = [
    prop("producer.id.expiration.ms", INT, 86400000,
        "How long an idle producer id's sequence state is kept.", LOW, at_least(1), dynamic=True),
    prop("transactional.id.expiration.ms", INT, 604800000, "How long an idle transactional id is kept.",
        HIGH, at_least(1)),
    prop("transaction.max.timeout.ms", INT, 900000, "Largest transaction timeout a producer may ask for.",
        HIGH, at_least(1)),
    prop("transaction.state.log.num.partitions", INT, 50, "Partitions of __transaction_state.", HIGH,
        at_least(1)),
    prop("transaction.state.log.replication.factor", SHORT, 3, "Replication factor of __transaction_state.",
        HIGH, at_least(1), ignored=ONE_NODE),
    prop("transaction.state.log.min.isr", INT, 2, "min.insync.replicas of __transaction_state.", HIGH,
        at_least(1), ignored=ONE_NODE),
    prop("transaction.state.log.segment.bytes", INT, 104857600, "Segment size of __transaction_state.", HIGH,
        at_least(1)),
    prop("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000,
        "How often open transactions past their timeout are aborted.", LOW, at_least(1)),
    prop("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000,
        "How often expired transactional ids are removed.", LOW, at_least(1)),
    prop("transaction.partition.verification.enable", BOOLEAN, True,
        "Check that a transactional batch's partition is in its transaction (KIP-890).", LOW, dynamic=True),
]
