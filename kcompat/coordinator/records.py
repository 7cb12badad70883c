"""The key/value records of `__consumer_offsets`, in Kafka's own formats (group-coordinator-records/*.json).

Every record is a (key, value) pair. The key starts with an int16 that is both the key schema's
version and the record *type*; the value starts with an int16 value schema version. A null value is
a tombstone: it deletes whatever the key names. The fields of every key and value, per version, are
the declarations in kcompat.wire.messages.group_records (generated from Kafka's specs and checked
against them); they are not restated here. Record types, and the value versions written (as Kafka 4.x):

    type 0, 1   OffsetCommitKey                           OffsetCommitValue v3 (v1 when the commit
                                                          carried a retention time: OffsetCommit v2-v4)
    type 2      GroupMetadataKey                          GroupMetadataValue v3
    type 3      ConsumerGroupMetadataKey                  ConsumerGroupMetadataValue v0
    type 4      ConsumerGroupPartitionMetadataKey         ConsumerGroupPartitionMetadataValue v0
    type 5      ConsumerGroupMemberMetadataKey            ConsumerGroupMemberMetadataValue v0
    type 6      ConsumerGroupTargetAssignmentMetadataKey  ConsumerGroupTargetAssignmentMetadataValue v0
    type 7      ConsumerGroupTargetAssignmentMemberKey    ConsumerGroupTargetAssignmentMemberValue v0
    type 8      ConsumerGroupCurrentMemberAssignmentKey   ConsumerGroupCurrentMemberAssignmentValue v0
    type 17-23  the streams groups' (streams_records.py)

The classes below are the coordinator's typed view of those records: same names, and fields named
as the declarations' (tests/coordinator/test_records.py checks they stay so; the few declared fields
left out are listed there), with partition lists as sorted tuples so that values compare and hash. Decoding untrusted bytes raises
only DecodeError. Keys of a type this module does not know (share groups, regex
records) decode to None, so a replay can skip them as Kafka's own tools do.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kcompat.coordinator.record_pair import Record as Record
from kcompat.coordinator.record_pair import offsets_partition as offsets_partition
from kcompat.coordinator.streams_records import (
    STREAMS_KEYS,
    STREAMS_VALUES,
    StreamsRecordKey,
    StreamsRecordValue,
)
from kcompat.wire.codec import MessageCodec
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import group_records
from kcompat.wire.primitives import Reader, Writer
from kcompat.wire.schema import Message

OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1  # the one OffsetCommitValue version with an expire timestamp


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
    | StreamsRecordKey
)

# Each typed class's declaration, by its name (the spec's name).
_DECLARED: dict[str, Message] = {m.name: m for m in vars(group_records).values() if isinstance(m, Message)}


def _codec(cls: type) -> MessageCodec:
    return MessageCodec(_DECLARED[cls.__name__])


# Record type (the short before the key, once "the key's version") -> the key's class and
# codec. Since Kafka 4 the specs give every key its own apiKey (the record type) and version 0
# for its fields.
KEY_FIELDS_VERSION = 0
_KEYS: dict[int, tuple[type, MessageCodec]] = {
    kind: (cls, _codec(cls))
    for kind, cls in (
        (0, OffsetCommitKey),
        (1, OffsetCommitKey),
        (2, GroupMetadataKey),
        (3, ConsumerGroupMetadataKey),
        (4, ConsumerGroupPartitionMetadataKey),
        (5, ConsumerGroupMemberMetadataKey),
        (6, ConsumerGroupTargetAssignmentMetadataKey),
        (7, ConsumerGroupTargetAssignmentMemberKey),
        (8, ConsumerGroupCurrentMemberAssignmentKey),
        *STREAMS_KEYS,
    )
}
_KEY_TYPES: dict[type, int] = {cls: kind for kind, (cls, _) in _KEYS.items() if kind != 0}
_KEY_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls, _ in _KEYS.values()
}


def encode_key(key: RecordKey) -> bytes:
    kind = _KEY_TYPES[type(key)]
    w = Writer()
    w.int16(kind)
    codec = _KEYS[kind][1]
    codec.write(w, codec.cls(**{n: getattr(key, n) for n in _KEY_FIELDS[type(key)]}), KEY_FIELDS_VERSION)
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
    | StreamsRecordValue
)


def topic_id_partitions(
    assignment: Mapping[uuid.UUID, Sequence[int] | set[int] | frozenset[int]],
) -> TopicIdPartitions:
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
    to_wire: Callable[[Any], Any]  # the wire struct, or the nested dicts it is built from
    from_wire: Callable[[Any], RecordValue]


def _plain(cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], RecordValue]]:
    """A flat value: its wire struct has the dataclass's fields (offset commits: one per partition)."""
    wire, names = _codec(cls).cls, tuple(f.name for f in dataclasses.fields(cls))
    return lambda v: wire(**{n: getattr(v, n) for n in names}), lambda body: cls(**_fields_of(cls, body))


def _wrapped(cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], RecordValue]]:
    """A streams group's value: its fields as the nested mapping the codec builds from."""
    return lambda v: v.fields, lambda body: cls(body.to_dict())


_VALUES: dict[type, _ValueKind] = {
    OffsetCommitValue: _ValueKind(_codec(OffsetCommitValue), 3, *_plain(OffsetCommitValue)),
    GroupMetadataValue: _ValueKind(
        _codec(GroupMetadataValue),
        3,
        lambda v: dataclasses.asdict(v) | {"members": [dataclasses.asdict(m) for m in v.members]},
        lambda b: GroupMetadataValue(
            **_fields_of(GroupMetadataValue, b)
            | {"members": tuple(GroupMemberMetadata(**_fields_of(GroupMemberMetadata, m)) for m in b.members)}
        ),
    ),
    ConsumerGroupMetadataValue: _ValueKind(
        _codec(ConsumerGroupMetadataValue), 0, *_plain(ConsumerGroupMetadataValue)
    ),
    ConsumerGroupPartitionMetadataValue: _ValueKind(
        _codec(ConsumerGroupPartitionMetadataValue),
        0,
        # rack metadata (partition_metadata) is not tracked: it is unused since Kafka 4.0
        lambda v: {"topics": [dataclasses.asdict(t) for t in v.topics]},
        lambda b: ConsumerGroupPartitionMetadataValue(
            tuple(TopicMetadata(**_fields_of(TopicMetadata, t)) for t in b.topics)
        ),
    ),
    ConsumerGroupMemberMetadataValue: _ValueKind(
        _codec(ConsumerGroupMemberMetadataValue),
        0,
        lambda v: dataclasses.asdict(v) | {"subscribed_topic_names": list(v.subscribed_topic_names)},
        lambda b: ConsumerGroupMemberMetadataValue(
            **_fields_of(ConsumerGroupMemberMetadataValue, b)
            | {"subscribed_topic_names": tuple(b.subscribed_topic_names)}
        ),
    ),
    ConsumerGroupTargetAssignmentMetadataValue: _ValueKind(
        _codec(ConsumerGroupTargetAssignmentMetadataValue),
        0,
        *_plain(ConsumerGroupTargetAssignmentMetadataValue),
    ),
    ConsumerGroupTargetAssignmentMemberValue: _ValueKind(
        _codec(ConsumerGroupTargetAssignmentMemberValue),
        0,
        lambda v: {"topic_partitions": _structs(v.topic_partitions)},
        lambda b: ConsumerGroupTargetAssignmentMemberValue(_pairs(b.topic_partitions)),
    ),
    ConsumerGroupCurrentMemberAssignmentValue: _ValueKind(
        _codec(ConsumerGroupCurrentMemberAssignmentValue),
        0,
        lambda v: (
            dataclasses.asdict(v)
            | {
                "assigned_partitions": _structs(v.assigned_partitions),
                "partitions_pending_revocation": _structs(v.partitions_pending_revocation),
            }
        ),
        lambda b: ConsumerGroupCurrentMemberAssignmentValue(
            b.member_epoch,
            b.previous_member_epoch,
            b.state,
            _pairs(b.assigned_partitions),
            _pairs(b.partitions_pending_revocation),
        ),
    ),
} | {cls: _ValueKind(_codec(cls), 0, *_wrapped(cls)) for cls in STREAMS_VALUES}
# The value class a key's record holds: "XKey" holds "XValue".
_VALUE_OF_KEY: dict[type, type] = {
    key_cls: next(
        v for v, kind in _VALUES.items() if kind.codec.message.name == codec.message.name[:-3] + "Value"
    )
    for key_cls, codec in _KEYS.values()
}


def encode_value(value: RecordValue) -> bytes:
    kind = _VALUES[type(value)]
    version = kind.write_version
    if isinstance(value, OffsetCommitValue) and value.expire_timestamp != -1:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    w = Writer()
    w.int16(version)
    body = kind.to_wire(value)
    kind.codec.write(w, kind.codec.build(body) if isinstance(body, dict) else body, version)
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


def decode(
    record: tuple[bytes | bytearray | memoryview, bytes | bytearray | memoryview | None],
) -> DecodedRecord | None:
    """Decode one (key, value) pair; None for a record type this coordinator does not keep."""
    key = decode_key(record[0])
    if key is None:
        return None
    return DecodedRecord(key, decode_value(key, record[1]))
