"""Offsets committed inside a transaction (TxnOffsetCommit, KIP-447), as Kafka's OffsetMetadataManager
keeps them: pending per producer until the transaction's marker reaches `__consumer_offsets`.

The records are written like any offset commit, but in a transactional batch of the producer; a
COMMIT marker makes them the group's committed offsets, an ABORT drops them. Until then they are
invisible to OffsetFetch, which answers UNSTABLE_OFFSET_COMMIT for them when asked for stable
offsets (require_stable). A replay of the log rebuilds the same: records of a transaction whose
marker is not in the log yet come back pending.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import kcompat.coordinator.records as rec
from kcompat.coordinator.messages import OffsetCommitRequestTopic
from kcompat.coordinator.offset_metadata_manager import OffsetMetadataManager
from kcompat.coordinator.records import OffsetCommitValue
from kcompat.coordinator.result import Effects
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types.offset_commit import OffsetCommitResponsePartition, OffsetCommitResponseTopic

TXN_COMMIT_API_VERSION = 9  # consumer-group members are checked as OffsetCommit v9 checks them


class TxnOffsets:
    def __init__(self, offsets: OffsetMetadataManager) -> None:
        self.offsets = offsets
        # producer id -> group id -> (topic, partition) -> the offset its open transaction committed
        self.pending: dict[int, dict[str, dict[tuple[str, int], OffsetCommitValue]]] = {}

    def commit(
        self,
        out: Effects,
        now_ms: int,
        *,
        group_id: str,
        producer_id: int,
        topics: Sequence[OffsetCommitRequestTopic],
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> list[OffsetCommitResponseTopic]:
        """TxnOffsetCommit, after the transaction coordinator checked the producer: KIP-447 checks of
        member and generation (v3+), then the offsets pend under the producer."""
        error = self.offsets._validate_commit(
            now_ms,
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            TXN_COMMIT_API_VERSION,
            transactional=True,
        )
        if error == E.REBALANCE_IN_PROGRESS:
            error = E.NONE  # Kafka lets a transactional commit through a rebalance; the marker decides
        elif error == E.GROUP_ID_NOT_FOUND:
            error = E.ILLEGAL_GENERATION  # a generation of a group that does not exist, as Kafka says it
        limit = self.offsets.store.config.offset_metadata_max_bytes
        answered = []
        for topic in topics:
            parts = []
            for p in topic.partitions:
                code = error
                if (
                    not code
                    and partition_exists is not None
                    and not partition_exists(topic.name, p.partition_index)
                ):
                    code = E.UNKNOWN_TOPIC_OR_PARTITION
                metadata = p.committed_metadata or ""
                if not code and len(metadata.encode()) > limit:
                    code = E.OFFSET_METADATA_TOO_LARGE
                if not code:
                    value = OffsetCommitValue(p.committed_offset, metadata, now_ms, p.committed_leader_epoch)
                    by_group = self.pending.setdefault(producer_id, {}).setdefault(group_id, {})
                    by_group[(topic.name, p.partition_index)] = value
                    out.emit(rec.OffsetCommitKey(group_id, topic.name, p.partition_index), value)
                parts.append(
                    OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code))
                )
            answered.append(OffsetCommitResponseTopic(name=topic.name, partitions=parts))
        return answered

    def complete(self, producer_id: int, commit: bool, owned: Callable[[str], bool] | None = None) -> None:
        """The producer's marker is in `__consumer_offsets`: its pending offsets become committed, or
        go. `owned`: only those of the groups whose partition got the marker (Kafka completes a
        transaction shard by shard); None: every group (a single node writes all its markers at once)."""
        groups = self.pending.get(producer_id, {})
        done = {g: offsets for g, offsets in groups.items() if owned is None or owned(g)}
        for group_id in done:
            del groups[group_id]
        if not groups:
            self.pending.pop(producer_id, None)
        if not commit:
            return
        for group_id, offsets in done.items():
            self.offsets.offsets.setdefault(group_id, {}).update(offsets)

    def replay(self, producer_id: int, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Records of a transaction still open at the end of the log: pending again."""
        for raw in records:
            decoded = rec.decode(raw)
            if decoded is None or not isinstance(decoded.key, rec.OffsetCommitKey):
                continue
            if isinstance(decoded.value, OffsetCommitValue):
                k = decoded.key
                self.pending.setdefault(producer_id, {}).setdefault(k.group, {})[(k.topic, k.partition)] = (
                    decoded.value
                )

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        return any((topic, partition) in groups.get(group_id, {}) for groups in self.pending.values())
