"""Which fields name a topic, a group or a transactional id, in every request and answer: the
table a virtual cluster's (tenant's) rewriter is driven by (kcompat/proxy/tenant.py).

NAME_FIELDS lists every field Kafka's 4.3.1 specs mark with an entityType of topicName, groupId
or transactionalId, in the APIs a client sends, plus the fields that name one only by context
(FindCoordinator's keys; the config resources' resource_name when resource_type is a topic or a
group; the KIP-848 subscription regex). tests/proxy/test_tenant_fields.py walks the specs and
fails on an annotated field missing here, so a new field in a new version cannot leak a name.

NOT_TENANT_NAMES: annotated fields deliberately left alone, with why. REFUSED: APIs a tenant may
not use at all (the KRaft and inter-broker RPCs, whose names are the cluster's). ACLs are a
tenant's own through tenant_acls.py; isolation comes from the prefixes, not from ACLs.

Paths are snake_case field names from the message root.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from kcompat.wire.messages import APIS
from kcompat.wire.schema import F

REQUEST, RESPONSE = "request", "response"
TOPIC, GROUP, TXN, KEY, REGEX = "topic", "group", "transactional_id", "coordinator key", "topic regex"
CONFIG_TOPIC, CONFIG_GROUP = 2, 32  # ConfigResource.Type of a topic and of a group


@dataclass(frozen=True)
class N:
    """A name field: `kind` says what it names; `resource_types`: only where the element's
    resource_type is one of these (config resources)."""

    api_key: int
    side: str
    path: tuple[str, ...]
    kind: str
    resource_types: tuple[int, ...] = ()


NAME_FIELDS: tuple[N, ...] = (
    N(0, REQUEST, ("topic_data", "name"), TOPIC),  # Produce
    N(0, REQUEST, ("transactional_id",), TXN),  # Produce
    N(0, RESPONSE, ("responses", "name"), TOPIC),  # Produce
    N(1, REQUEST, ("forgotten_topics_data", "topic"), TOPIC),  # Fetch
    N(1, REQUEST, ("topics", "topic"), TOPIC),  # Fetch
    N(1, RESPONSE, ("responses", "topic"), TOPIC),  # Fetch
    N(2, REQUEST, ("topics", "name"), TOPIC),  # ListOffsets
    N(2, RESPONSE, ("topics", "name"), TOPIC),  # ListOffsets
    N(3, REQUEST, ("topics", "name"), TOPIC),  # Metadata
    N(3, RESPONSE, ("topics", "name"), TOPIC),  # Metadata
    N(8, REQUEST, ("group_id",), GROUP),  # OffsetCommit
    N(8, REQUEST, ("topics", "name"), TOPIC),  # OffsetCommit
    N(8, RESPONSE, ("topics", "name"), TOPIC),  # OffsetCommit
    N(9, REQUEST, ("group_id",), GROUP),  # OffsetFetch
    N(9, REQUEST, ("groups", "group_id"), GROUP),  # OffsetFetch
    N(9, REQUEST, ("groups", "topics", "name"), TOPIC),  # OffsetFetch
    N(9, REQUEST, ("topics", "name"), TOPIC),  # OffsetFetch
    N(9, RESPONSE, ("groups", "group_id"), GROUP),  # OffsetFetch
    N(9, RESPONSE, ("groups", "topics", "name"), TOPIC),  # OffsetFetch
    N(9, RESPONSE, ("topics", "name"), TOPIC),  # OffsetFetch
    N(11, REQUEST, ("group_id",), GROUP),  # JoinGroup
    N(12, REQUEST, ("group_id",), GROUP),  # Heartbeat
    N(13, REQUEST, ("group_id",), GROUP),  # LeaveGroup
    N(14, REQUEST, ("group_id",), GROUP),  # SyncGroup
    N(15, REQUEST, ("groups",), GROUP),  # DescribeGroups
    N(15, RESPONSE, ("groups", "group_id"), GROUP),  # DescribeGroups
    N(16, RESPONSE, ("groups", "group_id"), GROUP),  # ListGroups
    N(19, REQUEST, ("topics", "name"), TOPIC),  # CreateTopics
    N(19, RESPONSE, ("topics", "name"), TOPIC),  # CreateTopics
    N(20, REQUEST, ("topic_names",), TOPIC),  # DeleteTopics
    N(20, REQUEST, ("topics", "name"), TOPIC),  # DeleteTopics
    N(20, RESPONSE, ("responses", "name"), TOPIC),  # DeleteTopics
    N(21, REQUEST, ("topics", "name"), TOPIC),  # DeleteRecords
    N(21, RESPONSE, ("topics", "name"), TOPIC),  # DeleteRecords
    N(22, REQUEST, ("transactional_id",), TXN),  # InitProducerId
    N(23, REQUEST, ("topics", "topic"), TOPIC),  # OffsetForLeaderEpoch
    N(23, RESPONSE, ("topics", "topic"), TOPIC),  # OffsetForLeaderEpoch
    N(24, REQUEST, ("transactions", "topics", "name"), TOPIC),  # AddPartitionsToTxn
    N(24, REQUEST, ("transactions", "transactional_id"), TXN),  # AddPartitionsToTxn
    N(24, REQUEST, ("v3_and_below_topics", "name"), TOPIC),  # AddPartitionsToTxn
    N(24, REQUEST, ("v3_and_below_transactional_id",), TXN),  # AddPartitionsToTxn
    N(24, RESPONSE, ("results_by_topic_v3_and_below", "name"), TOPIC),  # AddPartitionsToTxn
    N(24, RESPONSE, ("results_by_transaction", "topic_results", "name"), TOPIC),  # AddPartitionsToTxn
    N(24, RESPONSE, ("results_by_transaction", "transactional_id"), TXN),  # AddPartitionsToTxn
    N(25, REQUEST, ("group_id",), GROUP),  # AddOffsetsToTxn
    N(25, REQUEST, ("transactional_id",), TXN),  # AddOffsetsToTxn
    N(26, REQUEST, ("transactional_id",), TXN),  # EndTxn
    N(28, REQUEST, ("group_id",), GROUP),  # TxnOffsetCommit
    N(28, REQUEST, ("topics", "name"), TOPIC),  # TxnOffsetCommit
    N(28, REQUEST, ("transactional_id",), TXN),  # TxnOffsetCommit
    N(28, RESPONSE, ("topics", "name"), TOPIC),  # TxnOffsetCommit
    N(34, REQUEST, ("dirs", "topics", "name"), TOPIC),  # AlterReplicaLogDirs
    N(34, RESPONSE, ("results", "topic_name"), TOPIC),  # AlterReplicaLogDirs
    N(35, REQUEST, ("topics", "topic"), TOPIC),  # DescribeLogDirs
    N(35, RESPONSE, ("results", "topics", "name"), TOPIC),  # DescribeLogDirs
    N(37, REQUEST, ("topics", "name"), TOPIC),  # CreatePartitions
    N(37, RESPONSE, ("results", "name"), TOPIC),  # CreatePartitions
    N(42, REQUEST, ("groups_names",), GROUP),  # DeleteGroups
    N(42, RESPONSE, ("results", "group_id"), GROUP),  # DeleteGroups
    N(43, REQUEST, ("topic_partitions", "topic"), TOPIC),  # ElectLeaders
    N(43, RESPONSE, ("replica_election_results", "topic"), TOPIC),  # ElectLeaders
    N(45, REQUEST, ("topics", "name"), TOPIC),  # AlterPartitionReassignments
    N(45, RESPONSE, ("responses", "name"), TOPIC),  # AlterPartitionReassignments
    N(46, REQUEST, ("topics", "name"), TOPIC),  # ListPartitionReassignments
    N(46, RESPONSE, ("topics", "name"), TOPIC),  # ListPartitionReassignments
    N(47, REQUEST, ("group_id",), GROUP),  # OffsetDelete
    N(47, REQUEST, ("topics", "name"), TOPIC),  # OffsetDelete
    N(47, RESPONSE, ("topics", "name"), TOPIC),  # OffsetDelete
    N(61, REQUEST, ("topics", "name"), TOPIC),  # DescribeProducers
    N(61, RESPONSE, ("topics", "name"), TOPIC),  # DescribeProducers
    N(65, REQUEST, ("transactional_ids",), TXN),  # DescribeTransactions
    N(65, RESPONSE, ("transaction_states", "topics", "topic"), TOPIC),  # DescribeTransactions
    N(65, RESPONSE, ("transaction_states", "transactional_id"), TXN),  # DescribeTransactions
    N(66, RESPONSE, ("transaction_states", "transactional_id"), TXN),  # ListTransactions
    N(68, REQUEST, ("group_id",), GROUP),  # ConsumerGroupHeartbeat
    N(68, REQUEST, ("subscribed_topic_names",), TOPIC),  # ConsumerGroupHeartbeat
    N(69, REQUEST, ("group_ids",), GROUP),  # ConsumerGroupDescribe
    N(69, RESPONSE, ("groups", "group_id"), GROUP),  # ConsumerGroupDescribe
    N(
        69, RESPONSE, ("groups", "members", "assignment", "topic_partitions", "topic_name"), TOPIC
    ),  # ConsumerGroupDescribe
    N(69, RESPONSE, ("groups", "members", "subscribed_topic_names"), TOPIC),  # ConsumerGroupDescribe
    N(
        69, RESPONSE, ("groups", "members", "target_assignment", "topic_partitions", "topic_name"), TOPIC
    ),  # ConsumerGroupDescribe
    N(75, REQUEST, ("cursor", "topic_name"), TOPIC),  # DescribeTopicPartitions
    N(75, REQUEST, ("topics", "name"), TOPIC),  # DescribeTopicPartitions
    N(75, RESPONSE, ("next_cursor", "topic_name"), TOPIC),  # DescribeTopicPartitions
    N(75, RESPONSE, ("topics", "name"), TOPIC),  # DescribeTopicPartitions
    N(76, REQUEST, ("group_id",), GROUP),  # ShareGroupHeartbeat
    N(76, REQUEST, ("subscribed_topic_names",), TOPIC),  # ShareGroupHeartbeat
    N(77, REQUEST, ("group_ids",), GROUP),  # ShareGroupDescribe
    N(77, RESPONSE, ("groups", "group_id"), GROUP),  # ShareGroupDescribe
    N(
        77, RESPONSE, ("groups", "members", "assignment", "topic_partitions", "topic_name"), TOPIC
    ),  # ShareGroupDescribe
    N(77, RESPONSE, ("groups", "members", "subscribed_topic_names"), TOPIC),  # ShareGroupDescribe
    N(78, REQUEST, ("group_id",), GROUP),  # ShareFetch
    N(79, REQUEST, ("group_id",), GROUP),  # ShareAcknowledge
    N(88, REQUEST, ("group_id",), GROUP),  # StreamsGroupHeartbeat
    N(88, REQUEST, ("topology", "subtopologies", "repartition_sink_topics"), TOPIC),  # StreamsGroupHeartbeat
    N(
        88, REQUEST, ("topology", "subtopologies", "repartition_source_topics", "name"), TOPIC
    ),  # StreamsGroupHeartbeat
    N(88, REQUEST, ("topology", "subtopologies", "source_topics"), TOPIC),  # StreamsGroupHeartbeat
    N(
        88, REQUEST, ("topology", "subtopologies", "state_changelog_topics", "name"), TOPIC
    ),  # StreamsGroupHeartbeat
    N(
        88, RESPONSE, ("partitions_by_user_endpoint", "active_partitions", "topic"), TOPIC
    ),  # StreamsGroupHeartbeat
    N(
        88, RESPONSE, ("partitions_by_user_endpoint", "standby_partitions", "topic"), TOPIC
    ),  # StreamsGroupHeartbeat
    N(89, REQUEST, ("group_ids",), GROUP),  # StreamsGroupDescribe
    N(89, RESPONSE, ("groups", "group_id"), GROUP),  # StreamsGroupDescribe
    N(
        89, RESPONSE, ("groups", "topology", "subtopologies", "repartition_sink_topics"), TOPIC
    ),  # StreamsGroupDescribe
    N(
        89, RESPONSE, ("groups", "topology", "subtopologies", "repartition_source_topics", "name"), TOPIC
    ),  # StreamsGroupDescribe
    N(89, RESPONSE, ("groups", "topology", "subtopologies", "source_topics"), TOPIC),  # StreamsGroupDescribe
    N(
        89, RESPONSE, ("groups", "topology", "subtopologies", "state_changelog_topics", "name"), TOPIC
    ),  # StreamsGroupDescribe
    N(90, REQUEST, ("groups", "group_id"), GROUP),  # DescribeShareGroupOffsets
    N(90, REQUEST, ("groups", "topics", "topic_name"), TOPIC),  # DescribeShareGroupOffsets
    N(90, RESPONSE, ("groups", "group_id"), GROUP),  # DescribeShareGroupOffsets
    N(90, RESPONSE, ("groups", "topics", "topic_name"), TOPIC),  # DescribeShareGroupOffsets
    N(91, REQUEST, ("group_id",), GROUP),  # AlterShareGroupOffsets
    N(91, REQUEST, ("topics", "topic_name"), TOPIC),  # AlterShareGroupOffsets
    N(91, RESPONSE, ("responses", "topic_name"), TOPIC),  # AlterShareGroupOffsets
    N(92, REQUEST, ("group_id",), GROUP),  # DeleteShareGroupOffsets
    N(92, REQUEST, ("topics", "topic_name"), TOPIC),  # DeleteShareGroupOffsets
    N(92, RESPONSE, ("responses", "topic_name"), TOPIC),  # DeleteShareGroupOffsets
    # named by context, not by an entityType
    N(10, REQUEST, ("key",), KEY),  # FindCoordinator v0-3: a group or transactional id (or share key)
    N(10, REQUEST, ("coordinator_keys",), KEY),  # v4+
    N(10, RESPONSE, ("coordinators", "key"), KEY),
    N(32, REQUEST, ("resources", "resource_name"), TOPIC, (CONFIG_TOPIC, CONFIG_GROUP)),  # DescribeConfigs
    N(32, RESPONSE, ("results", "resource_name"), TOPIC, (CONFIG_TOPIC, CONFIG_GROUP)),
    N(33, REQUEST, ("resources", "resource_name"), TOPIC, (CONFIG_TOPIC, CONFIG_GROUP)),  # AlterConfigs
    N(33, RESPONSE, ("responses", "resource_name"), TOPIC, (CONFIG_TOPIC, CONFIG_GROUP)),
    N(44, REQUEST, ("resources", "resource_name"), TOPIC, (CONFIG_TOPIC, CONFIG_GROUP)),  # IncrementalAlter
    N(44, RESPONSE, ("responses", "resource_name"), TOPIC, (CONFIG_TOPIC, CONFIG_GROUP)),
    N(68, REQUEST, ("subscribed_topic_regex",), REGEX),  # ConsumerGroupHeartbeat (KIP-848 regex)
    N(66, REQUEST, ("transactional_id_pattern",), REGEX),  # ListTransactions v2: whole ids match it
)

NOT_TENANT_NAMES: dict[tuple[int, str, tuple[str, ...]], str] = {
    (55, REQUEST, ("topics", "topic_name")): "DescribeQuorum names the metadata log, the cluster's own",
    (55, RESPONSE, ("topics", "topic_name")): "DescribeQuorum names the metadata log, the cluster's own",
}

# KRaft RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot) and the inter-broker RPCs
# (WriteTxnMarkers, AlterPartition, AssignReplicasToDirs, the share coordinator's state RPCs):
# their names and topic ids are the cluster's. ACLs: tenant_acls.py.
REFUSED: dict[int, str] = {
    52: "a KRaft RPC",
    53: "a KRaft RPC",
    54: "a KRaft RPC",
    59: "a KRaft RPC",
    27: "an inter-broker RPC",
    56: "an inter-broker RPC",
    73: "an inter-broker RPC",
    83: "an inter-broker RPC",
    84: "an inter-broker RPC",
    85: "an inter-broker RPC",
    86: "an inter-broker RPC",
    87: "an inter-broker RPC",
}


def _field(fields: tuple[F, ...], name: str) -> F:
    for f in fields:
        if f.name == name:
            return f
    raise KeyError(name)


def path_versions(api_key: int, side: str, path: tuple[str, ...]) -> frozenset[int]:
    """The versions of the request or answer in which every field along `path` exists."""
    spec = APIS[api_key]
    top = spec.versions.high if spec.versions.high is not None else spec.versions.low
    found = set(range(spec.versions.low, top + 1))
    fields = (spec.request if side == REQUEST else spec.response).fields
    for name in path:
        f = _field(fields, name)
        found = {v for v in found if v in f.versions}
        fields = f.fields
    return frozenset(found)


@cache
def fields_for(api_key: int, side: str, version: int) -> tuple[N, ...]:
    """The name fields of one API's request or answer in one version (empty: relay as bytes)."""
    return tuple(
        n
        for n in NAME_FIELDS
        if n.api_key == api_key and n.side == side and version in path_versions(api_key, side, n.path)
    )
