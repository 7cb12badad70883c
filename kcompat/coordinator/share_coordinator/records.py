"""`__share_group_state` records, in Kafka's formats (share-coordinator-records/*.json).

    key    int16 type, then the key struct v0 {GroupId, TopicId, Partition}:
           0 ShareSnapshotKey, 1 ShareUpdateKey
    value  int16 version 0, then ShareSnapshotValue (the whole state of the share-partition) or
           ShareUpdateValue (a delta: the batches a write changed, -1 for what it left alone);
           null = tombstone (the share-partition's state was deleted)

A share-partition lives in partition abs(javaHashCode("group:topicId:partition")) % n of the topic,
the key FindCoordinator (key type 2) is asked with.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kcompat.coordinator.record_pair import Record, offsets_partition
from kcompat.coordinator.share_coordinator.batches import StateBatch
from kcompat.kafka_uuid import to_base64
from kcompat.wire.codec import MessageCodec
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages.share_records import (
    SHARE_SNAPSHOT_KEY,
    SHARE_SNAPSHOT_VALUE,
    SHARE_UPDATE_KEY,
    SHARE_UPDATE_VALUE,
)
from kcompat.wire.primitives import Reader, Writer
from kcompat.wire.types import share_records as t

SNAPSHOT, UPDATE = 0, 1  # the key's type
VALUE_VERSION = 0
_SNAPSHOT_KEY = MessageCodec(SHARE_SNAPSHOT_KEY)
_SNAPSHOT_VALUE = MessageCodec(SHARE_SNAPSHOT_VALUE)
_UPDATE_KEY = MessageCodec(SHARE_UPDATE_KEY)
_UPDATE_VALUE = MessageCodec(SHARE_UPDATE_VALUE)


@dataclass(frozen=True, slots=True)
class ShareKey:
    """One share-partition: Kafka's SharePartitionKey."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """The FindCoordinator key of the share-partition (Kafka's asCoordinatorKey)."""
        return f"{self.group_id}:{to_base64(self.topic_id)}:{self.partition}"


def state_partition(key: ShareKey, num_partitions: int) -> int:
    return offsets_partition(key.coordinator_key(), num_partitions)


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    create_timestamp: int
    write_timestamp: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int  # -1: unchanged
    start_offset: int  # -1: unchanged
    delivery_complete_count: int  # -1: unchanged
    batches: tuple[StateBatch, ...]


def _key(kind: int, key: ShareKey) -> bytes:
    w = Writer()
    w.int16(kind)
    if kind == SNAPSHOT:
        _SNAPSHOT_KEY.write(
            w, t.ShareSnapshotKey(group_id=key.group_id, topic_id=key.topic_id, partition=key.partition), 0
        )
    else:
        _UPDATE_KEY.write(
            w, t.ShareUpdateKey(group_id=key.group_id, topic_id=key.topic_id, partition=key.partition), 0
        )
    return w.getvalue()


def _wire_batches(batches: tuple[StateBatch, ...]) -> list[t.StateBatch]:
    return [
        t.StateBatch(
            first_offset=b.first_offset,
            last_offset=b.last_offset,
            delivery_state=b.delivery_state,
            delivery_count=b.delivery_count,
        )
        for b in batches
    ]


def snapshot_record(key: ShareKey, s: ShareSnapshot) -> Record:
    value = t.ShareSnapshotValue(
        snapshot_epoch=s.snapshot_epoch,
        state_epoch=s.state_epoch,
        leader_epoch=s.leader_epoch,
        start_offset=s.start_offset,
        delivery_complete_count=s.delivery_complete_count,
        create_timestamp=s.create_timestamp,
        write_timestamp=s.write_timestamp,
        state_batches=_wire_batches(s.batches),
    )
    w = Writer()
    w.int16(VALUE_VERSION)
    _SNAPSHOT_VALUE.write(w, value, VALUE_VERSION)
    return Record(_key(SNAPSHOT, key), w.getvalue())


def update_record(key: ShareKey, u: ShareUpdate) -> Record:
    value = t.ShareUpdateValue(
        snapshot_epoch=u.snapshot_epoch,
        leader_epoch=u.leader_epoch,
        start_offset=u.start_offset,
        delivery_complete_count=u.delivery_complete_count,
        state_batches=_wire_batches(u.batches),
    )
    w = Writer()
    w.int16(VALUE_VERSION)
    _UPDATE_VALUE.write(w, value, VALUE_VERSION)
    return Record(_key(UPDATE, key), w.getvalue())


def tombstone(key: ShareKey) -> Record:
    """Deletes the share-partition's state (Kafka writes it under the snapshot key)."""
    return Record(_key(SNAPSHOT, key), None)


def _batches(wire: list[t.StateBatch]) -> tuple[StateBatch, ...]:
    out = []
    for b in wire:
        if b.first_offset < 0 or b.last_offset < b.first_offset:
            raise DecodeError(f"state batch [{b.first_offset}, {b.last_offset}]", "state_batches")
        out.append(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count))
    return tuple(out)


def decode(key: bytes, value: bytes | None) -> tuple[ShareKey, ShareSnapshot | ShareUpdate | None]:
    """(share-partition, its snapshot, update, or None for a tombstone); DecodeError for bytes that
    are not a record of this topic."""
    r = Reader(memoryview(key))
    kind = r.int16()
    if kind not in (SNAPSHOT, UPDATE):
        raise DecodeError(f"share state record type {kind}", "key")
    k = (_SNAPSHOT_KEY if kind == SNAPSHOT else _UPDATE_KEY).decode(r, 0)
    share_key = ShareKey(k.group_id, k.topic_id, k.partition)
    if value is None:
        return share_key, None
    r = Reader(memoryview(value))
    version = r.int16()
    if version != VALUE_VERSION:
        raise DecodeError(f"share state value version {version}", "value")
    if kind == SNAPSHOT:
        v = _SNAPSHOT_VALUE.decode(r, VALUE_VERSION)
        return share_key, ShareSnapshot(
            v.snapshot_epoch,
            v.state_epoch,
            v.leader_epoch,
            v.start_offset,
            v.delivery_complete_count,
            v.create_timestamp,
            v.write_timestamp,
            _batches(v.state_batches),
        )
    u = _UPDATE_VALUE.decode(r, VALUE_VERSION)
    return share_key, ShareUpdate(
        u.snapshot_epoch, u.leader_epoch, u.start_offset, u.delivery_complete_count, _batches(u.state_batches)
    )
