"""The key/value records of `__consumer_offsets`, in Kafka's own formats (group-coordinator-records/*.json).

Every record is a (key, value) pair. The key starts with an int16 that is both the key schema's
version and the record *type*; the value starts with an int16 value schema version. A null value is
a tombstone: it deletes whatever the key names. Kafka 4.x writes the versions marked (w):

    key   = int16 type, then the key fields (all non-flexible, STRING = int16 length + UTF-8)
      type 0, 1 (w=1)  OffsetCommitKey                        group STRING, topic STRING, partition int32
      type 2           GroupMetadataKey                       group STRING
      type 3           ConsumerGroupMetadataKey               group_id STRING
      type 4           ConsumerGroupPartitionMetadataKey      group_id STRING
      type 5           ConsumerGroupMemberMetadataKey         group_id STRING, member_id STRING
      type 6           ConsumerGroupTargetAssignmentMetadataKey  group_id STRING
      type 7           ConsumerGroupTargetAssignmentMemberKey group_id STRING, member_id STRING
      type 8           ConsumerGroupCurrentMemberAssignmentKey   group_id STRING, member_id STRING

    value = int16 version, then:
      OffsetCommitValue v0, v2   offset int64, metadata STRING, commit_timestamp int64
                        v1       offset int64, metadata STRING, commit_timestamp int64, expire_timestamp int64
                        v3 (w)   offset int64, leader_epoch int32, metadata STRING, commit_timestamp int64
                        v4       as v3 with COMPACT_STRING metadata, then tagged fields
        (v1 is written instead of v3 when the commit carried a retention time: OffsetCommit v2-v4)
      GroupMetadataValue v3 (w)  protocol_type STRING, generation int32, protocol NULLABLE_STRING,
                                 leader NULLABLE_STRING, current_state_timestamp int64,
                                 members ARRAY(int32 count) of
                                   member_id STRING, group_instance_id NULLABLE_STRING, client_id STRING,
                                   client_host STRING, rebalance_timeout int32, session_timeout int32,
                                   subscription BYTES(int32 length), assignment BYTES
                         v0 has no rebalance_timeout, current_state_timestamp, group_instance_id;
                         v1 adds rebalance_timeout, v2 current_state_timestamp, v3 group_instance_id;
                         v4 is v3 flexible (compact lengths, tagged fields after each struct)
      ConsumerGroup* values, v0 (w), flexible: COMPACT_STRING = uvarint(len+1) + UTF-8 (0 = null),
        COMPACT_ARRAY = uvarint(count+1), uuid = 16 bytes, each struct ends with a tagged-field section
        (uvarint count, here always 0 when written):
        ConsumerGroupMetadataValue             epoch int32
        ConsumerGroupPartitionMetadataValue    topics [topic_id uuid, topic_name STRING, num_partitions int32,
                                                       partition_metadata [partition int32, racks [STRING]]]
        ConsumerGroupMemberMetadataValue       instance_id STRING?, rack_id STRING?, client_id STRING,
                                               client_host STRING, subscribed_topic_names [STRING],
                                               subscribed_topic_regex STRING?, rebalance_timeout_ms int32,
                                               server_assignor STRING?   (tag 0: classic member metadata)
        ConsumerGroupTargetAssignmentMetadataValue  assignment_epoch int32
        ConsumerGroupTargetAssignmentMemberValue    topic_partitions [topic_id uuid, partitions [int32]]
        ConsumerGroupCurrentMemberAssignmentValue   member_epoch int32, previous_member_epoch int32,
                                                    state int8, assigned_partitions [topic_id uuid,
                                                    partitions [int32]], partitions_pending_revocation (same)

The bytes after the int16 are coded by the declarations in kcompat.wire.messages.group_records,
the same ones the conformance test checks against Kafka's specs; this module maps them to the
coordinator's own value types. Decoding untrusted bytes raises only DecodeError. Keys of a type this module does not know (share
and streams groups, regex records) decode to None, so a replay can skip them as Kafka's own tools do.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kcompat.wire.codec import MessageCodec
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import group_records
from kcompat.wire.primitives import Reader, Writer

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3


class Record(NamedTuple):
    """One `__consumer_offsets` record: key bytes and value bytes, or None for a tombstone."""

    key: bytes
    value: bytes | None


# ---------------------------------------------------------------------------------------------- keys


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


RecordKey = (
    OffsetCommitKey
    | GroupMetadataKey
    | ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)

# Record type (the short before the key, once "the key's version") -> the key's class and
# declaration. Since Kafka 4 the specs give every key its own apiKey (the record type) and
# version 0 for its fields.
KEY_FIELDS_VERSION = 0
_KEYS: dict[int, tuple[type, MessageCodec]] = {
    0: (OffsetCommitKey, MessageCodec(group_records.OFFSET_COMMIT_KEY)),
    1: (OffsetCommitKey, MessageCodec(group_records.OFFSET_COMMIT_KEY)),
    2: (GroupMetadataKey, MessageCodec(group_records.GROUP_METADATA_KEY)),
    3: (ConsumerGroupMetadataKey, MessageCodec(group_records.CONSUMER_GROUP_METADATA_KEY)),
    4: (ConsumerGroupPartitionMetadataKey, MessageCodec(group_records.CONSUMER_GROUP_PARTITION_METADATA_KEY)),
    5: (ConsumerGroupMemberMetadataKey, MessageCodec(group_records.CONSUMER_GROUP_MEMBER_METADATA_KEY)),
    6: (ConsumerGroupTargetAssignmentMetadataKey, MessageCodec(group_records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY)),
    7: (ConsumerGroupTargetAssignmentMemberKey, MessageCodec(group_records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY)),
    8: (ConsumerGroupCurrentMemberAssignmentKey, MessageCodec(group_records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY)),
}
_KEY_TYPES: dict[type, int] = {cls: kind for kind, (cls, _) in _KEYS.items() if kind != 0}


def encode_key(key: RecordKey) -> bytes:
    kind = _KEY_TYPES[type(key)]
    w = Writer()
    w.int16(kind)
    _KEYS[kind][1].write(w, dataclasses.asdict(key), KEY_FIELDS_VERSION)
    return w.getvalue()


def decode_key(data: bytes | bytearray | memoryview) -> RecordKey | None:
    """The key, or None for a record type this coordinator does not keep."""
    r = Reader(data)
    kind = r.int16()
    if kind < 0:
        raise DecodeError(f"negative record type {kind}", "key")
    known = _KEYS.get(kind)
    if known is None:
        return None
    cls, codec = known
    body = codec.decode(r, KEY_FIELDS_VERSION)
    _end(r, "key")
    key: RecordKey = cls(**{f.name: getattr(body, f.name) for f in dataclasses.fields(cls)})
    return key


def group_of(key: RecordKey) -> str:
    """The group a record belongs to (what `__consumer_offsets` is partitioned by)."""
    return key.group if isinstance(key, (OffsetCommitKey, GroupMetadataKey)) else key.group_id


def offsets_partition(group_id: str, num_partitions: int) -> int:
    """Kafka's `__consumer_offsets` partition for a group: abs(Java String.hashCode) mod n."""
    h = 0
    for unit in _utf16_units(group_id):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
    return (0 if h == -0x80000000 else abs(h)) % num_partitions


def _utf16_units(s: str) -> list[int]:
    b = s.encode("utf-16-be", "surrogatepass")
    return [(b[i] << 8) | b[i + 1] for i in range(0, len(b), 2)]


# -------------------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only v1 carries it; -1 = none


@dataclass(frozen=True)
class GroupMemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[GroupMemberMetadata, ...] = ()
    current_state_timestamp: int = -1


@dataclass(frozen=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataValue:
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


# topic id -> sorted partitions; a tuple of pairs so that values stay hashable and ordered
TopicIdPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: TopicIdPartitions = ()


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicIdPartitions = ()
    partitions_pending_revocation: TopicIdPartitions = ()


RecordValue = (
    OffsetCommitValue
    | GroupMetadataValue
    | ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)


def topic_id_partitions(assignment: Mapping[uuid.UUID, Sequence[int] | set[int] | frozenset[int]]) -> TopicIdPartitions:
    """A canonical (sorted, empty topics dropped) form of a topic-id -> partitions mapping."""
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def _pairs(tps: Any) -> TopicIdPartitions:
    return tuple((t.topic_id, tuple(t.partitions)) for t in tps)


def _structs(tps: TopicIdPartitions) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": list(ps)} for t, ps in tps]


def _fields_of(cls: type, body: Any) -> dict[str, Any]:
    return {f.name: getattr(body, f.name) for f in dataclasses.fields(cls)}


class _ValueKind(NamedTuple):
    codec: MessageCodec
    write_version: int
    to_wire: Callable[[Any], dict[str, Any]]
    from_wire: Callable[[Any], RecordValue]


def _plain(cls: type) -> tuple[Callable[[Any], dict[str, Any]], Callable[[Any], RecordValue]]:
    return dataclasses.asdict, lambda body: cls(**_fields_of(cls, body))


_VALUES: dict[type, _ValueKind] = {
    OffsetCommitValue: _ValueKind(MessageCodec(group_records.OFFSET_COMMIT_VALUE), 3, *_plain(OffsetCommitValue)),
    GroupMetadataValue: _ValueKind(
        MessageCodec(group_records.GROUP_METADATA_VALUE),
        3,
        lambda v: dataclasses.asdict(v) | {"members": [dataclasses.asdict(m) for m in v.members]},
        lambda b: GroupMetadataValue(
            **_fields_of(GroupMetadataValue, b)
            | {"members": tuple(GroupMemberMetadata(**_fields_of(GroupMemberMetadata, m)) for m in b.members)}
        ),
    ),
    ConsumerGroupMetadataValue: _ValueKind(
        MessageCodec(group_records.CONSUMER_GROUP_METADATA_VALUE), 0, *_plain(ConsumerGroupMetadataValue)
    ),
    ConsumerGroupPartitionMetadataValue: _ValueKind(
        MessageCodec(group_records.CONSUMER_GROUP_PARTITION_METADATA_VALUE),
        0,
        # rack metadata (partition_metadata) is not tracked: it is unused since Kafka 4.0
        lambda v: {"topics": [dataclasses.asdict(t) for t in v.topics]},
        lambda b: ConsumerGroupPartitionMetadataValue(tuple(TopicMetadata(**_fields_of(TopicMetadata, t)) for t in b.topics)),
    ),
    ConsumerGroupMemberMetadataValue: _ValueKind(
        MessageCodec(group_records.CONSUMER_GROUP_MEMBER_METADATA_VALUE),
        0,
        lambda v: dataclasses.asdict(v) | {"subscribed_topic_names": list(v.subscribed_topic_names)},
        lambda b: ConsumerGroupMemberMetadataValue(
            **_fields_of(ConsumerGroupMemberMetadataValue, b) | {"subscribed_topic_names": tuple(b.subscribed_topic_names)}
        ),
    ),
    ConsumerGroupTargetAssignmentMetadataValue: _ValueKind(
        MessageCodec(group_records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
        0,
        *_plain(ConsumerGroupTargetAssignmentMetadataValue),
    ),
    ConsumerGroupTargetAssignmentMemberValue: _ValueKind(
        MessageCodec(group_records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
        0,
        lambda v: {"topic_partitions": _structs(v.topic_partitions)},
        lambda b: ConsumerGroupTargetAssignmentMemberValue(_pairs(b.topic_partitions)),
    ),
    ConsumerGroupCurrentMemberAssignmentValue: _ValueKind(
        MessageCodec(group_records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
        0,
        lambda v: dataclasses.asdict(v)
        | {
            "assigned_partitions": _structs(v.assigned_partitions),
            "partitions_pending_revocation": _structs(v.partitions_pending_revocation),
        },
        lambda b: ConsumerGroupCurrentMemberAssignmentValue(
            b.member_epoch,
            b.previous_member_epoch,
            b.state,
            _pairs(b.assigned_partitions),
            _pairs(b.partitions_pending_revocation),
        ),
    ),
}
# The value class a key's record holds.
_VALUE_OF_KEY: dict[type, type] = {
    OffsetCommitKey: OffsetCommitValue,
    GroupMetadataKey: GroupMetadataValue,
    ConsumerGroupMetadataKey: ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey: ConsumerGroupPartitionMetadataValue,
    ConsumerGroupMemberMetadataKey: ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataKey: ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey: ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentKey: ConsumerGroupCurrentMemberAssignmentValue,
}


def encode_value(value: RecordValue) -> bytes:
    kind = _VALUES[type(value)]
    version = kind.write_version
    if isinstance(value, OffsetCommitValue) and value.expire_timestamp != -1:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    w = Writer()
    w.int16(version)
    kind.codec.write(w, kind.to_wire(value), version)
    return w.getvalue()


def decode_value(key: RecordKey, data: bytes | bytearray | memoryview | None) -> RecordValue | None:
    """The value for `key`, or None for a tombstone."""
    if data is None:
        return None
    r = Reader(data)
    version = r.int16()
    kind = _VALUES[_VALUE_OF_KEY[type(key)]]
    if version not in kind.codec.message.versions:
        raise DecodeError(f"unknown {kind.codec.message.name} version {version}", "value")
    body = kind.codec.decode(r, version)
    _end(r, "value")
    return kind.from_wire(body)


# ------------------------------------------------------------------------------------------- helpers


def _end(r: Reader, what: str) -> None:
    if r.remaining():
        raise DecodeError(f"{r.remaining()} unexpected trailing bytes", what)


@dataclass
class DecodedRecord:
    """A decoded record: its key and its value (None = tombstone)."""

    key: RecordKey
    value: RecordValue | None = field(default=None)


def make(key: RecordKey, value: RecordValue | None) -> Record:
    """Encode a key and a value (None = tombstone) into a Record."""
    return Record(encode_key(key), None if value is None else encode_value(value))


def decode(record: tuple[bytes | bytearray | memoryview, bytes | bytearray | memoryview | None]) -> DecodedRecord | None:
    """Decode one (key, value) pair; None for a record type this coordinator does not keep."""
    key = decode_key(record[0])
    if key is None:
        return None
    return DecodedRecord(key, decode_value(key, record[1]))
