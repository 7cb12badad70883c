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

Decoding untrusted bytes raises only DecodeError. Keys of a type this module does not know (share
and streams groups, regex records) decode to None, so a replay can skip them as Kafka's own tools do.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kcompat.wire.errors import DecodeError
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

_KEY_TYPES: dict[type, int] = {
    GroupMetadataKey: 2,
    ConsumerGroupMetadataKey: 3,
    ConsumerGroupPartitionMetadataKey: 4,
    ConsumerGroupMemberMetadataKey: 5,
    ConsumerGroupTargetAssignmentMetadataKey: 6,
    ConsumerGroupTargetAssignmentMemberKey: 7,
    ConsumerGroupCurrentMemberAssignmentKey: 8,
}


def encode_key(key: RecordKey) -> bytes:
    w = Writer()
    if isinstance(key, OffsetCommitKey):
        w.int16(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
        return w.getvalue()
    w.int16(_KEY_TYPES[type(key)])
    if isinstance(key, GroupMetadataKey):
        w.string(key.group)
    else:
        w.string(key.group_id)
        member_id = getattr(key, "member_id", None)
        if member_id is not None:
            w.string(member_id)
    return w.getvalue()


def decode_key(data: bytes | bytearray | memoryview) -> RecordKey | None:
    """The key, or None for a record type this coordinator does not keep."""
    r = Reader(data)
    kind = r.int16()
    key: RecordKey
    if kind in (0, 1):
        key = OffsetCommitKey(_str(r, "group"), _str(r, "topic"), r.int32())
    elif kind == 2:
        key = GroupMetadataKey(_str(r, "group"))
    elif kind == 3:
        key = ConsumerGroupMetadataKey(_str(r, "group_id"))
    elif kind == 4:
        key = ConsumerGroupPartitionMetadataKey(_str(r, "group_id"))
    elif kind == 5:
        key = ConsumerGroupMemberMetadataKey(_str(r, "group_id"), _str(r, "member_id"))
    elif kind == 6:
        key = ConsumerGroupTargetAssignmentMetadataKey(_str(r, "group_id"))
    elif kind == 7:
        key = ConsumerGroupTargetAssignmentMemberKey(_str(r, "group_id"), _str(r, "member_id"))
    elif kind == 8:
        key = ConsumerGroupCurrentMemberAssignmentKey(_str(r, "group_id"), _str(r, "member_id"))
    elif kind < 0:
        raise DecodeError(f"negative record type {kind}", "key")
    else:
        return None
    _end(r, "key")
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


def encode_value(value: RecordValue) -> bytes:
    w = Writer()
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp != -1:
            w.int16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
            w.int64(value.offset)
            w.string(value.metadata)
            w.int64(value.commit_timestamp)
            w.int64(value.expire_timestamp)
        else:
            w.int16(OFFSET_COMMIT_VALUE_VERSION)
            w.int64(value.offset)
            w.int32(value.leader_epoch)
            w.string(value.metadata)
            w.int64(value.commit_timestamp)
    elif isinstance(value, GroupMetadataValue):
        w.int16(GROUP_METADATA_VALUE_VERSION)
        w.string(value.protocol_type)
        w.int32(value.generation)
        w.string(value.protocol)
        w.string(value.leader)
        w.int64(value.current_state_timestamp)
        w.array_length(len(value.members))
        for m in value.members:
            w.string(m.member_id)
            w.string(m.group_instance_id)
            w.string(m.client_id)
            w.string(m.client_host)
            w.int32(m.rebalance_timeout)
            w.int32(m.session_timeout)
            w.bytes_(m.subscription)
            w.bytes_(m.assignment)
    else:
        w.int16(0)
        _encode_flexible_value(w, value)
    return w.getvalue()


def _encode_flexible_value(w: Writer, value: RecordValue) -> None:
    if isinstance(value, ConsumerGroupMetadataValue):
        w.int32(value.epoch)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        w.compact_array_length(len(value.topics))
        for t in value.topics:
            w.uuid(t.topic_id)
            w.compact_string(t.topic_name)
            w.int32(t.num_partitions)
            w.compact_array_length(0)  # partition_metadata: racks are not tracked (unused after 4.0)
            w.uvarint(0)
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        w.compact_string(value.instance_id)
        w.compact_string(value.rack_id)
        w.compact_string(value.client_id)
        w.compact_string(value.client_host)
        w.compact_array_length(len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            w.compact_string(name)
        w.compact_string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.compact_string(value.server_assignor)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _write_topic_partitions(w, value.topic_partitions)
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        _write_topic_partitions(w, value.assigned_partitions)
        _write_topic_partitions(w, value.partitions_pending_revocation)
    else:  # pragma: no cover - the union is exhaustive
        raise TypeError(f"not a record value: {value!r}")
    w.uvarint(0)  # top-level tagged fields


def _write_topic_partitions(w: Writer, tps: TopicIdPartitions) -> None:
    w.compact_array_length(len(tps))
    for topic_id, partitions in tps:
        w.uuid(topic_id)
        w.compact_array_length(len(partitions))
        for p in partitions:
            w.int32(p)
        w.uvarint(0)


def decode_value(key: RecordKey, data: bytes | bytearray | memoryview | None) -> RecordValue | None:
    """The value for `key`, or None for a tombstone."""
    if data is None:
        return None
    r = Reader(data)
    version = r.int16()
    decoder = _VALUE_DECODERS[type(key)]
    value = decoder(r, version)
    _end(r, "value")
    return value


def _decode_offset_commit(r: Reader, version: int) -> OffsetCommitValue:
    if version in (0, 2):
        return OffsetCommitValue(r.int64(), _str(r, "metadata"), r.int64())
    if version == 1:
        return OffsetCommitValue(r.int64(), _str(r, "metadata"), r.int64(), -1, r.int64())
    if version == 3:
        offset, epoch = r.int64(), r.int32()
        return OffsetCommitValue(offset, _str(r, "metadata"), r.int64(), epoch)
    if version == 4:
        offset, epoch = r.int64(), r.int32()
        metadata = _cstr(r, "metadata")
        value = OffsetCommitValue(offset, metadata, r.int64(), epoch)
        r.tagged_fields()
        return value
    raise DecodeError(f"unknown OffsetCommitValue version {version}", "value")


def _decode_group_metadata(r: Reader, version: int) -> GroupMetadataValue:
    if not 0 <= version <= 4:
        raise DecodeError(f"unknown GroupMetadataValue version {version}", "value")
    flexible = version >= 4
    s = _cstr if flexible else _str
    ns = _ncstr if flexible else _nstr
    protocol_type = s(r, "protocol_type")
    generation = r.int32()
    protocol = ns(r, "protocol")
    leader = ns(r, "leader")
    state_ts = r.int64() if version >= 2 else -1
    count = r.compact_array_length(8) if flexible else r.array_length(8)
    members = []
    for _ in range(max(count, 0)):
        member_id = s(r, "member_id")
        instance_id = ns(r, "group_instance_id") if version >= 3 else None
        client_id = s(r, "client_id")
        client_host = s(r, "client_host")
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = _bytes(r, flexible, "subscription")
        assignment = _bytes(r, flexible, "assignment")
        if flexible:
            r.tagged_fields()
        members.append(
            GroupMemberMetadata(
                member_id, client_id, client_host, session_timeout, subscription, assignment,
                rebalance_timeout, instance_id,
            )
        )
    if flexible:
        r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, tuple(members), state_ts)


def _flexible_v0(name: str, body: Callable[[Reader], RecordValue]) -> Callable[[Reader, int], RecordValue]:
    def decode(r: Reader, version: int) -> RecordValue:
        if version != 0:
            raise DecodeError(f"unknown {name} version {version}", "value")
        value = body(r)
        r.tagged_fields()
        return value

    return decode


def _decode_partition_metadata(r: Reader) -> ConsumerGroupPartitionMetadataValue:
    topics = []
    for _ in range(max(r.compact_array_length(18), 0)):
        topic_id = r.uuid()
        name = _cstr(r, "topic_name")
        num_partitions = r.int32()
        for _ in range(max(r.compact_array_length(5), 0)):  # deprecated rack metadata: skipped
            r.int32()
            for _ in range(max(r.compact_array_length(1), 0)):
                _cstr(r, "racks")
            r.tagged_fields()
        r.tagged_fields()
        topics.append(TopicMetadata(topic_id, name, num_partitions))
    return ConsumerGroupPartitionMetadataValue(tuple(topics))


def _decode_member_metadata(r: Reader) -> ConsumerGroupMemberMetadataValue:
    instance_id = _ncstr(r, "instance_id")
    rack_id = _ncstr(r, "rack_id")
    client_id = _cstr(r, "client_id")
    client_host = _cstr(r, "client_host")
    names = tuple(_cstr(r, "subscribed_topic_names") for _ in range(max(r.compact_array_length(1), 0)))
    regex = _ncstr(r, "subscribed_topic_regex")
    rebalance_timeout = r.int32()
    assignor = _ncstr(r, "server_assignor")
    return ConsumerGroupMemberMetadataValue(
        client_id, client_host, names, instance_id, rack_id, regex, rebalance_timeout, assignor
    )


def _read_topic_partitions(r: Reader) -> TopicIdPartitions:
    out = []
    for _ in range(max(r.compact_array_length(18), 0)):
        topic_id = r.uuid()
        partitions = tuple(r.int32() for _ in range(max(r.compact_array_length(4), 0)))
        r.tagged_fields()
        out.append((topic_id, partitions))
    return tuple(out)


def _decode_current_assignment(r: Reader) -> ConsumerGroupCurrentMemberAssignmentValue:
    epoch, previous, state = r.int32(), r.int32(), r.int8()
    return ConsumerGroupCurrentMemberAssignmentValue(
        epoch, previous, state, _read_topic_partitions(r), _read_topic_partitions(r)
    )


_VALUE_DECODERS: dict[type, Callable[[Reader, int], RecordValue]] = {
    OffsetCommitKey: _decode_offset_commit,
    GroupMetadataKey: _decode_group_metadata,
    ConsumerGroupMetadataKey: _flexible_v0("ConsumerGroupMetadataValue", lambda r: ConsumerGroupMetadataValue(r.int32())),
    ConsumerGroupPartitionMetadataKey: _flexible_v0("ConsumerGroupPartitionMetadataValue", _decode_partition_metadata),
    ConsumerGroupMemberMetadataKey: _flexible_v0("ConsumerGroupMemberMetadataValue", _decode_member_metadata),
    ConsumerGroupTargetAssignmentMetadataKey: _flexible_v0(
        "ConsumerGroupTargetAssignmentMetadataValue", lambda r: ConsumerGroupTargetAssignmentMetadataValue(r.int32())
    ),
    ConsumerGroupTargetAssignmentMemberKey: _flexible_v0(
        "ConsumerGroupTargetAssignmentMemberValue",
        lambda r: ConsumerGroupTargetAssignmentMemberValue(_read_topic_partitions(r)),
    ),
    ConsumerGroupCurrentMemberAssignmentKey: _flexible_v0(
        "ConsumerGroupCurrentMemberAssignmentValue", _decode_current_assignment
    ),
}


# ------------------------------------------------------------------------------------------- helpers


def _nstr(r: Reader, name: str) -> str | None:
    try:
        return r.string()
    except DecodeError as e:
        raise e.within(name) from None


def _str(r: Reader, name: str) -> str:
    s = _nstr(r, name)
    if s is None:
        raise DecodeError("null where a string is required", name)
    return s


def _ncstr(r: Reader, name: str) -> str | None:
    try:
        return r.compact_string()
    except DecodeError as e:
        raise e.within(name) from None


def _cstr(r: Reader, name: str) -> str:
    s = _ncstr(r, name)
    if s is None:
        raise DecodeError("null where a string is required", name)
    return s


def _bytes(r: Reader, flexible: bool, name: str) -> bytes:
    b = r.compact_bytes() if flexible else r.bytes_()
    if b is None:
        raise DecodeError("null where bytes are required", name)
    return bytes(b)


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
