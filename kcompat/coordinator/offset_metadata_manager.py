"""Committed offsets, as Kafka's OffsetMetadataManager: OffsetCommit v0-9, OffsetFetch v0-9, OffsetDelete v0.

Offsets are kept per group in `offsets` and written as OffsetCommit records. Expiry is Kafka's
cleanupExpiredOffsets, run by the shard every offsets.retention.check.interval.ms, which then
deletes the groups left empty with no offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import kcompat.coordinator.records as rec
from kcompat.coordinator.classic_group import ClassicGroup
from kcompat.coordinator.classic_protocol import validate_member
from kcompat.coordinator.classic_state import ClassicGroupState
from kcompat.coordinator.consumer_group import ConsumerGroup
from kcompat.coordinator.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from kcompat.coordinator.group_store import Group, GroupStore
from kcompat.coordinator.messages import (
    OffsetCommitRequestTopic,
    OffsetDeleteRequestTopic,
    OffsetFetchGroupResult,
    OffsetFetchPartitionResult,
    OffsetFetchRequestGroup,
    OffsetFetchTopicResult,
)
from kcompat.coordinator.records import OffsetCommitValue
from kcompat.coordinator.result import Effects
from kcompat.coordinator.streams_group import StreamsGroup
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types.offset_commit import OffsetCommitResponsePartition, OffsetCommitResponseTopic
from kcompat.wire.types.offset_delete import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)


class OffsetMetadataManager:
    """OffsetCommit, OffsetFetch, OffsetDelete and offset expiry, for classic and KIP-848 groups.

    It reads the groups of `store` to validate commits (and creates the "simple" group a commit
    from outside any group implies), as Kafka's OffsetMetadataManager asks its GroupMetadataManager.
    """

    def __init__(self, store: GroupStore) -> None:
        self.store = store
        # group id -> (topic, partition) -> the committed offset
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}

    def commit_offsets(
        self,
        out: Effects,
        now_ms: int,
        *,
        group_id: str,
        topics: Sequence[OffsetCommitRequestTopic],
        generation_id_or_member_epoch: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        retention_time_ms: int = -1,
        api_version: int = 9,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> list[OffsetCommitResponseTopic]:
        """OffsetCommit. Generation -1 with no member id is a "simple" commit, allowed while the group is
        Empty (or does not exist). `partition_exists` lets the server reject unknown partitions."""
        error = self._validate_commit(
            now_ms, group_id, generation_id_or_member_epoch, member_id, group_instance_id, api_version
        )
        answered = []
        for topic in topics:
            parts = []
            for p in topic.partitions:
                code = error or self._commit_one(
                    out, now_ms, group_id, topic.name, p, retention_time_ms, partition_exists
                )
                parts.append(
                    OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code))
                )
            answered.append(OffsetCommitResponseTopic(name=topic.name, partitions=parts))
        return answered

    def _validate_commit(
        self,
        now: int,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        api_version: int,
        transactional: bool = False,
    ) -> int:
        if not group_id:
            return E.INVALID_GROUP_ID
        group = self.store.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # A member of a group that does not exist: v9 says so, older versions have no such code.
                return E.GROUP_ID_NOT_FOUND if api_version >= 9 else E.ILLEGAL_GENERATION
            self.store.groups[group_id] = ClassicGroup(group_id, current_state_timestamp=now)
            return E.NONE
        if isinstance(group, ConsumerGroup | StreamsGroup):
            return self._validate_consumer_commit(group, member_id, generation, api_version)
        if group.state is ClassicGroupState.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state is ClassicGroupState.EMPTY:
            return E.NONE  # admin tools and consumers that only assign() commit into an empty group
        if generation >= 0 or member_id or instance_id is not None:
            error = validate_member(group, member_id, instance_id)
            if error:
                return error
            if generation != group.generation_id:
                return E.ILLEGAL_GENERATION
        elif not transactional and group.state is not ClassicGroupState.EMPTY:
            # TxnOffsetCommit v0-2 carries no member or generation: Kafka lets it into any group.
            return E.UNKNOWN_MEMBER_ID
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is not None and member.session_deadline is not None:
            member.session_deadline = now + member.session_timeout_ms  # a commit is a sign of life too
        return E.NONE

    @staticmethod
    def _validate_consumer_commit(
        group: ConsumerGroup | StreamsGroup, member_id: str, epoch: int, api_version: int
    ) -> int:
        if epoch < 0 and not group.members:
            return E.NONE
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if api_version < 9:
            return E.UNSUPPORTED_VERSION  # KIP-848 members must use OffsetCommit v9+
        if epoch > member.member_epoch:
            return E.FENCED_MEMBER_EPOCH
        if epoch < member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def _commit_one(
        self,
        out: Effects,
        now: int,
        group_id: str,
        topic: str,
        p: Any,
        retention_time_ms: int,
        partition_exists: Callable[[str, int], bool] | None,
    ) -> int:
        if partition_exists is not None and not partition_exists(topic, p.partition_index):
            return E.UNKNOWN_TOPIC_OR_PARTITION
        metadata = getattr(p, "committed_metadata", "") or ""
        if len(metadata.encode()) > self.store.config.offset_metadata_max_bytes:
            return E.OFFSET_METADATA_TOO_LARGE
        value = OffsetCommitValue(
            p.committed_offset,
            metadata,
            now,
            getattr(p, "committed_leader_epoch", -1),
            now + retention_time_ms if retention_time_ms != -1 else -1,
        )
        self.offsets.setdefault(group_id, {})[(topic, p.partition_index)] = value
        out.emit(rec.OffsetCommitKey(group_id, topic, p.partition_index), value)
        return E.NONE

    def fetch_offsets(self, groups: Sequence[OffsetFetchRequestGroup]) -> list[OffsetFetchGroupResult]:
        """OffsetFetch for one group (v0-7) or several (v8+). Unknown offsets come back as -1."""
        return [self._fetch_group(g) for g in groups]

    def _fetch_group(self, req: OffsetFetchRequestGroup) -> OffsetFetchGroupResult:
        if not req.group_id:
            return OffsetFetchGroupResult(req.group_id, [], E.INVALID_GROUP_ID)
        group = self.store.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup | StreamsGroup) and not (
            req.member_id is None and req.member_epoch < 0
        ):
            member = group.members.get(req.member_id or "")
            if member is None:
                return OffsetFetchGroupResult(req.group_id, [], E.UNKNOWN_MEMBER_ID)
            if req.member_epoch != member.member_epoch:
                return OffsetFetchGroupResult(req.group_id, [], E.STALE_MEMBER_EPOCH)
        committed = self.offsets.get(req.group_id, {})
        topics: list[OffsetFetchTopicResult] = []
        if req.topics is None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(committed):
                by_topic.setdefault(topic, []).append(partition)
            wanted = list(by_topic.items())
        else:
            wanted = [(t.name, list(t.partition_indexes)) for t in req.topics]
        for name, partitions in wanted:
            parts = []
            for p in partitions:
                v = committed.get((name, p))
                if v is None:
                    parts.append(OffsetFetchPartitionResult(p))
                else:
                    parts.append(OffsetFetchPartitionResult(p, v.offset, v.leader_epoch, v.metadata))
            topics.append(OffsetFetchTopicResult(name, parts))
        return OffsetFetchGroupResult(req.group_id, topics)

    def delete_offsets(
        self, out: Effects, now_ms: int, *, group_id: str, topics: Sequence[OffsetDeleteRequestTopic]
    ) -> OffsetDeleteResponse:
        if not group_id:
            return OffsetDeleteResponse(error_code=E.INVALID_GROUP_ID)
        group = self.store.groups.get(group_id)
        if group is None:
            return OffsetDeleteResponse(error_code=E.GROUP_ID_NOT_FOUND)
        if isinstance(group, ClassicGroup):
            if group.state is ClassicGroupState.DEAD:
                return OffsetDeleteResponse(error_code=E.GROUP_ID_NOT_FOUND)
            if group.state is not ClassicGroupState.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return OffsetDeleteResponse(error_code=E.NON_EMPTY_GROUP)
        committed = self.offsets.get(group_id, {})
        deleted = []
        for t in topics:
            subscribed = group.is_subscribed_to(t.name)
            parts = []
            for p in t.partitions:
                if subscribed:
                    parts.append(
                        OffsetDeleteResponsePartition(
                            partition_index=p, error_code=E.GROUP_SUBSCRIBED_TO_TOPIC
                        )
                    )
                    continue
                if committed.pop((t.name, p), None) is not None:
                    out.emit(rec.OffsetCommitKey(group_id, t.name, p), None)
                parts.append(OffsetDeleteResponsePartition(partition_index=p, error_code=E.NONE))
            deleted.append(OffsetDeleteResponseTopic(name=t.name, partitions=parts))
        return OffsetDeleteResponse(error_code=E.NONE, topics=deleted)

    def cleanup_expired(self, out: Effects, group_id: str, group: Group | None, now: int) -> bool:
        """Kafka's cleanupExpiredOffsets for one group: delete its expired offsets; True when none is left."""
        base = _expiry_base(group)
        committed = self.offsets.get(group_id, {})
        if base is not None:
            retention = self.store.config.offsets_retention_ms
            for (topic, partition), v in sorted(committed.items()):
                if group is not None and group.is_subscribed_to(topic):
                    continue
                if v.expire_timestamp != -1:
                    expired = now >= v.expire_timestamp
                else:
                    expired = now - base(v) >= retention
                if expired:
                    del committed[(topic, partition)]
                    out.emit(rec.OffsetCommitKey(group_id, topic, partition), None)
        if committed:
            return False
        self.offsets.pop(group_id, None)
        return True

    def delete_all(self, out: Effects, group_id: str) -> None:
        """Every committed offset of a group being deleted (Kafka's deleteAllOffsets)."""
        for topic, partition in sorted(self.offsets.pop(group_id, {})):
            out.emit(rec.OffsetCommitKey(group_id, topic, partition), None)

    def replay(self, key: rec.OffsetCommitKey, value: OffsetCommitValue | None, now: int) -> None:
        gid = key.group
        if value is None:
            committed = self.offsets.get(gid, {})
            committed.pop((key.topic, key.partition), None)
            if not committed:
                self.offsets.pop(gid, None)
            return
        self.offsets.setdefault(gid, {})[(key.topic, key.partition)] = value
        if gid not in self.store.groups:
            self.store.groups[gid] = ClassicGroup(gid, current_state_timestamp=now)


def _expiry_base(group: Group | None) -> Callable[[OffsetCommitValue], int] | None:
    """From when an offset's retention counts (Kafka's offsetExpirationCondition); None = never expires."""
    if isinstance(group, ConsumerGroup | StreamsGroup) or group is None:
        return lambda v: v.commit_timestamp
    if group.protocol_type is None:
        return lambda v: v.commit_timestamp  # a "simple" group: from each commit
    if group.state is ClassicGroupState.EMPTY:
        ts = group.current_state_timestamp
        return (lambda v: ts) if ts != -1 else (lambda v: v.commit_timestamp)
    if (
        group.state is ClassicGroupState.STABLE
        and group.protocol_type == CONSUMER_PROTOCOL_TYPE
        and group.subscribed_topics() is not None
    ):
        return lambda v: v.commit_timestamp  # only topics no member subscribes to
    return None
