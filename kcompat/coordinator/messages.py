"""Plain values that go into and come out of the coordinator, named after Kafka's request/response fields.

Field names are the snake_case of the JSON specs' names, so a handler can copy between these and the
wire codec's objects field by field (or pass codec objects straight in where a parameter below only
reads attributes of the same names). Versions do not appear here: a field a lower version lacks
has Kafka's default, and the handler drops what its version cannot carry.

Where an answer is exactly a wire struct (SyncGroup's and Heartbeat's responses, DescribeGroups'
DescribedGroup, ListGroups' ListedGroup, DeleteGroups' DeletableGroupResult, OffsetCommit's and
OffsetDelete's responses) the coordinator returns kcompat.wire.types' class itself;
what stays here differs from the wire: versions folded together (JoinGroup's protocol_name None,
LeaveGroup's legacy error), None meaning "unchanged", names resolved from topic ids. What the
coordinator answers with is a *Result (JoinGroupResult, OffsetFetchGroupResult, ...), as Kafka's
coordinator names its results, so that no name here stands for a different class in
kcompat.wire.types.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kcompat.wire.error_codes import ErrorCode

# ------------------------------------------------------------------------------------ classic groups


@dataclass(frozen=True)
class JoinGroupProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass
class JoinGroupResult:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None  # v0-6 carry "" for None
    leader: str = ""
    skip_assignment: bool = False  # v9+; below v9 the handler sends an empty member list instead
    member_id: str = ""
    members: list[JoinGroupMember] = field(default_factory=list)


@dataclass(frozen=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass
class LeaveGroupMemberResult:
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass
class LeaveGroupResult:
    error_code: int
    members: list[LeaveGroupMemberResult] = field(default_factory=list)

    @property
    def legacy_error_code(self) -> int:
        """The single error of a v0-2 response: the top-level one, else the first member's (as Kafka)."""
        if self.error_code != ErrorCode.NONE:
            return self.error_code
        return next((m.error_code for m in self.members if m.error_code != ErrorCode.NONE), ErrorCode.NONE)


# ------------------------------------------------------------------------------------------- offsets


@dataclass(frozen=True)
class OffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""


@dataclass(frozen=True)
class OffsetCommitRequestTopic:
    name: str
    partitions: list[OffsetCommitRequestPartition]


@dataclass(frozen=True)
class OffsetFetchRequestTopic:
    name: str
    partition_indexes: list[int]


@dataclass(frozen=True)
class OffsetFetchRequestGroup:
    group_id: str
    topics: list[OffsetFetchRequestTopic] | None  # None = every committed partition (v2+)
    member_id: str | None = None  # v9+, consumer groups only
    member_epoch: int = -1


@dataclass
class OffsetFetchPartitionResult:
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: int = ErrorCode.NONE


@dataclass
class OffsetFetchTopicResult:
    name: str
    partitions: list[OffsetFetchPartitionResult]


@dataclass
class OffsetFetchGroupResult:
    group_id: str
    topics: list[OffsetFetchTopicResult]
    error_code: int = ErrorCode.NONE


@dataclass(frozen=True)
class OffsetDeleteRequestTopic:
    name: str
    partitions: list[int]


# ---------------------------------------------------------------------------- KIP-848 consumer groups


@dataclass(frozen=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: list[int]
    topic_name: str = ""  # filled in ConsumerGroupDescribe only


@dataclass
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None  # v1+
    server_assignor: str | None = None
    topic_partitions: list[TopicPartitions] | None = None
    # With an authorizer: may the heartbeating principal describe a topic? A regex then resolves
    # to those topics only (Kafka 4 resolves regexes with the heartbeat's request context).
    describable: Callable[[str], bool] | None = None


@dataclass
class ConsumerGroupHeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: list[TopicPartitions] | None = None  # None = unchanged since the last response


@dataclass
class ConsumerGroupDescribedMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: list[TopicPartitions]
    target_assignment: list[TopicPartitions]


@dataclass
class ConsumerGroupDescribedGroup:
    error_code: int
    group_id: str
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[ConsumerGroupDescribedMember] = field(default_factory=list)
