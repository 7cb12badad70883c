"""A share group's own records in `__consumer_offsets` (KIP-932), in Kafka's formats, and their replay.

    type 10  ShareGroupMemberMetadata            a member's client, host, rack and subscription
    type 11  ShareGroupMetadata                  the group epoch and the subscribed topics' hash
    type 12  ShareGroupTargetAssignmentMetadata  the assignment epoch
    type 13  ShareGroupTargetAssignmentMember    a member's target assignment
    type 14  ShareGroupCurrentMemberAssignment   a member's epoch, previous epoch and assignment
    type 15  ShareGroupStatePartitionMetadata    the share-partitions initializing, initialized
                                                 and being deleted

Every value is written at version 0, the only one. The group's records are derived from two images
of it, before and after a call (`changes`), so whatever the call did, only what changed is written;
members are removed as Kafka removes them: current assignment, target and metadata tombstones. The
replay applies records oldest first, later ones win and tombstones delete, so a compacted log gives
the same groups. kcompat.coordinator.records decodes these keys to None; this module is theirs.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kcompat.coordinator.records as rec
from kcompat.coordinator.records import Record
from kcompat.coordinator.share.share_group import Assignment, ShareGroup, ShareGroups, ShareMember
from kcompat.wire.codec import MessageCodec
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import share_group_records as m
from kcompat.wire.primitives import Reader, Writer
from kcompat.wire.types import share_group_records as t

MEMBER_METADATA, METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_MEMBER, STATE_PARTITIONS = range(10, 16)
_CODECS: dict[int, tuple[MessageCodec, MessageCodec]] = {
    kind: (MessageCodec(k), MessageCodec(v))
    for kind, k, v in (
        (MEMBER_METADATA, m.SHARE_GROUP_MEMBER_METADATA_KEY, m.SHARE_GROUP_MEMBER_METADATA_VALUE),
        (METADATA, m.SHARE_GROUP_METADATA_KEY, m.SHARE_GROUP_METADATA_VALUE),
        (
            TARGET_METADATA,
            m.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
            m.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
        ),
        (
            TARGET_MEMBER,
            m.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
            m.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
        ),
        (
            CURRENT_MEMBER,
            m.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
            m.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
        ),
        (
            STATE_PARTITIONS,
            m.SHARE_GROUP_STATE_PARTITION_METADATA_KEY,
            m.SHARE_GROUP_STATE_PARTITION_METADATA_VALUE,
        ),
    )
}
_KIND_OF: dict[type, int] = {codecs[0].cls: kind for kind, codecs in _CODECS.items()}
VALUE_VERSION = 0

ShareKey = (
    t.ShareGroupMemberMetadataKey
    | t.ShareGroupMetadataKey
    | t.ShareGroupTargetAssignmentMetadataKey
    | t.ShareGroupTargetAssignmentMemberKey
    | t.ShareGroupCurrentMemberAssignmentKey
    | t.ShareGroupStatePartitionMetadataKey
)


# --- encoding -----------------------------------------------------------------------------------


def make(key: ShareKey, value: Any | None) -> Record:
    """One record; `value` None is a tombstone."""
    kind = _KIND_OF[type(key)]
    key_codec, value_codec = _CODECS[kind]
    w = Writer()
    w.int16(kind)
    key_codec.write(w, key, 0)
    if value is None:
        return Record(w.getvalue(), None)
    v = Writer()
    v.int16(VALUE_VERSION)
    value_codec.write(v, value, VALUE_VERSION)
    return Record(w.getvalue(), v.getvalue())


def decode_key(data: bytes | bytearray | memoryview) -> ShareKey | None:
    """The key of a share group record; None for any other record type."""
    r = Reader(data)
    kind = r.int16()
    codecs = _CODECS.get(kind)
    if codecs is None:
        return None
    key: ShareKey = codecs[0].decode(r, 0)
    if r.remaining():
        raise DecodeError(f"{r.remaining()} unexpected trailing bytes", "key")
    return key


def decode(
    record: tuple[bytes | bytearray | memoryview, bytes | bytearray | memoryview | None],
) -> tuple[ShareKey, Any | None] | None:
    """(key, value or None for a tombstone) of a share group record; None for any other record."""
    key = decode_key(record[0])
    if key is None or record[1] is None:
        return None if key is None else (key, None)
    r = Reader(record[1])
    version = r.int16()
    if version != VALUE_VERSION:
        raise DecodeError(f"unknown share group record value version {version}", "value")
    value = _CODECS[_KIND_OF[type(key)]][1].decode(r, version)
    if r.remaining():
        raise DecodeError(f"{r.remaining()} unexpected trailing bytes", "value")
    return key, value


def group_of_key(data: bytes | bytearray | memoryview) -> str:
    """The group of any record key the group coordinator writes (share group records or not), which
    decides its __consumer_offsets partition."""
    key = rec.decode_key(data)
    if key is not None:
        return rec.group_of(key)
    share = decode_key(data)
    if share is None:
        raise DecodeError("not a group coordinator record key", "key")
    return share.group_id


# --- what a group's records hold ------------------------------------------------------------------

Pairs = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


def _pairs(a: Mapping[uuid.UUID, Any]) -> Pairs:
    return tuple((tid, tuple(sorted(ps))) for tid, ps in sorted(a.items()) if ps)


@dataclass(frozen=True)
class GroupImage:
    """What the records say of one share group (compared before and after a call)."""

    epoch: int
    metadata_hash: int
    assignment_epoch: int
    members: Mapping[str, tuple[str | None, str, str, tuple[str, ...]]]
    targets: Mapping[str, Pairs]
    current: Mapping[str, tuple[int, int, Pairs]]
    state: tuple[Pairs, Pairs, tuple[uuid.UUID, ...]]


def image(g: ShareGroup) -> GroupImage:
    ms = g.members.values()
    return GroupImage(
        g.group_epoch,
        g.metadata_hash,
        g.assignment_epoch,
        {x.member_id: (x.rack_id, x.client_id, x.client_host, x.subscribed) for x in ms},
        {x.member_id: _pairs(x.assignment) for x in ms},
        {x.member_id: (x.member_epoch, x.previous_member_epoch, _pairs(x.current)) for x in ms},
        (_pairs(g.initializing), _pairs(g.initialized), tuple(sorted(g.deleting))),
    )


def _topics(pairs: Pairs) -> list[t.TopicPartition]:
    return [t.TopicPartition(topic_id=tid, partitions=list(ps)) for tid, ps in pairs]


def changes(
    group_id: str, before: GroupImage | None, after: GroupImage | None, names: Mapping[uuid.UUID, str]
) -> list[Record]:
    """The records that take the log from `before` to `after` (None: no group), in Kafka's order."""
    out: list[Record] = []
    gid = group_id
    value: Any  # each record's value class
    old_members = {} if before is None else before.members
    new_members = {} if after is None else after.members
    for mid in old_members.keys() - new_members.keys():
        out.append(make(t.ShareGroupCurrentMemberAssignmentKey(group_id=gid, member_id=mid), None))
        out.append(make(t.ShareGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid), None))
        out.append(make(t.ShareGroupMemberMetadataKey(group_id=gid, member_id=mid), None))
    if after is None:
        if before is not None:
            out.append(make(t.ShareGroupTargetAssignmentMetadataKey(group_id=gid), None))
            out.append(make(t.ShareGroupStatePartitionMetadataKey(group_id=gid), None))
            out.append(make(t.ShareGroupMetadataKey(group_id=gid), None))
        return out
    for mid, (rack, client, host, subs) in after.members.items():
        if old_members.get(mid) != (rack, client, host, subs):
            value = t.ShareGroupMemberMetadataValue(
                rack_id=rack, client_id=client, client_host=host, subscribed_topic_names=list(subs)
            )
            out.append(make(t.ShareGroupMemberMetadataKey(group_id=gid, member_id=mid), value))
    if before is None or (before.epoch, before.metadata_hash) != (after.epoch, after.metadata_hash):
        value = t.ShareGroupMetadataValue(epoch=after.epoch, metadata_hash=after.metadata_hash)
        out.append(make(t.ShareGroupMetadataKey(group_id=gid), value))
    if before is None or before.state != after.state:
        out.append(
            make(t.ShareGroupStatePartitionMetadataKey(group_id=gid), _state_value(after.state, names))
        )
    old_targets = {} if before is None else before.targets
    for mid, pairs in after.targets.items():
        if old_targets.get(mid) != pairs:
            value = t.ShareGroupTargetAssignmentMemberValue(topic_partitions=_topics(pairs))
            out.append(make(t.ShareGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid), value))
    if before is None or before.assignment_epoch != after.assignment_epoch:
        value = t.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=after.assignment_epoch)
        out.append(make(t.ShareGroupTargetAssignmentMetadataKey(group_id=gid), value))
    old_current = {} if before is None else before.current
    for mid, (epoch, previous, pairs) in after.current.items():
        if old_current.get(mid) != (epoch, previous, pairs):
            value = t.ShareGroupCurrentMemberAssignmentValue(
                member_epoch=epoch,
                previous_member_epoch=previous,
                state=0,  # STABLE: a share group member never revokes
                assigned_partitions=[
                    t.TopicPartitions(topic_id=tid, partitions=list(ps)) for tid, ps in pairs
                ],
            )
            out.append(make(t.ShareGroupCurrentMemberAssignmentKey(group_id=gid, member_id=mid), value))
    return out


def _state_value(
    state: tuple[Pairs, Pairs, tuple[uuid.UUID, ...]], names: Mapping[uuid.UUID, str]
) -> t.ShareGroupStatePartitionMetadataValue:
    initializing, initialized, deleting = state

    def infos(pairs: Pairs) -> list[t.TopicPartitionsInfo]:
        return [
            t.TopicPartitionsInfo(topic_id=tid, topic_name=names.get(tid, ""), partitions=list(ps))
            for tid, ps in pairs
        ]

    return t.ShareGroupStatePartitionMetadataValue(
        initializing_topics=infos(initializing),
        initialized_topics=infos(initialized),
        deleting_topics=[t.TopicInfo(topic_id=tid, topic_name=names.get(tid, "")) for tid in deleting],
    )


# --- replay -------------------------------------------------------------------------------------


def replay(groups: ShareGroups, key: ShareKey, value: Any) -> None:
    """Apply one share group record (`value` None: a tombstone) to `groups`."""
    gid = key.group_id
    if isinstance(key, t.ShareGroupMetadataKey) and value is None:
        groups.groups.pop(gid, None)
        return
    g = groups.groups.get(gid)
    if g is None:
        if value is None:
            return
        g = groups.get_or_create(gid)
    if isinstance(key, t.ShareGroupMetadataKey):
        g.group_epoch, g.metadata_hash = value.epoch, value.metadata_hash
    elif isinstance(key, t.ShareGroupTargetAssignmentMetadataKey):
        g.assignment_epoch = 0 if value is None else value.assignment_epoch
    elif isinstance(key, t.ShareGroupStatePartitionMetadataKey):
        _replay_state(g, value)
    elif isinstance(key, t.ShareGroupMemberMetadataKey):
        if value is None:
            g.members.pop(key.member_id, None)
            return
        x = _member(g, key.member_id)
        x.rack_id, x.client_id, x.client_host = value.rack_id, value.client_id, value.client_host
        x.subscribed = tuple(value.subscribed_topic_names)
    elif value is None:
        return  # a member's assignment tombstones: the member goes with its metadata tombstone
    elif isinstance(key, t.ShareGroupTargetAssignmentMemberKey):
        _member(g, key.member_id).assignment = _assignment(value.topic_partitions)
    elif isinstance(key, t.ShareGroupCurrentMemberAssignmentKey):
        x = _member(g, key.member_id)
        x.member_epoch, x.previous_member_epoch = value.member_epoch, value.previous_member_epoch
        x.current = _assignment(value.assigned_partitions)


def _member(g: ShareGroup, member_id: str) -> ShareMember:
    x = g.members.get(member_id)
    if x is None:
        x = g.members[member_id] = ShareMember(member_id, 0, "", "", None, (), 0)
    return x


def _assignment(topics: Any) -> Assignment:
    return {tp.topic_id: sorted(tp.partitions) for tp in topics if tp.partitions}


def _replay_state(g: ShareGroup, value: t.ShareGroupStatePartitionMetadataValue | None) -> None:
    g.initializing, g.initialized, g.deleting = {}, {}, set()
    if value is None:
        return
    for target, infos in (
        (g.initializing, value.initializing_topics),
        (g.initialized, value.initialized_topics),
    ):
        for info in infos:
            target[info.topic_id] = set(info.partitions)
            g.topic_names[info.topic_id] = info.topic_name
    for d in value.deleting_topics:
        g.deleting.add(d.topic_id)
        g.topic_names[d.topic_id] = d.topic_name
