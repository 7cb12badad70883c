"""The records a KIP-848 consumer group writes to __consumer_offsets for its members (Kafka's
GroupCoordinatorRecordHelpers, the consumer group part): metadata, current assignment, tombstones."""

from __future__ import annotations

import kcompat.coordinator.records as rec
from kcompat.coordinator.consumer_group import ConsumerGroup, ConsumerMember
from kcompat.coordinator.result import Effects


def delete_consumer_group_records(out: Effects, group: ConsumerGroup) -> None:
    gid = group.group_id
    for mid in group.members:
        emit_member_tombstones(out, gid, mid)
    out.emit(rec.ConsumerGroupTargetAssignmentMetadataKey(gid), None)
    out.emit(rec.ConsumerGroupPartitionMetadataKey(gid), None)
    out.emit(rec.ConsumerGroupMetadataKey(gid), None)


def emit_member_tombstones(out: Effects, gid: str, member_id: str) -> None:
    out.emit(rec.ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), None)
    out.emit(rec.ConsumerGroupTargetAssignmentMemberKey(gid, member_id), None)
    out.emit(rec.ConsumerGroupMemberMetadataKey(gid, member_id), None)


def emit_member_metadata(out: Effects, gid: str, m: ConsumerMember) -> None:
    out.emit(
        rec.ConsumerGroupMemberMetadataKey(gid, m.member_id),
        rec.ConsumerGroupMemberMetadataValue(
            m.client_id,
            m.client_host,
            m.subscribed_topic_names,
            m.instance_id,
            m.rack_id,
            m.subscribed_topic_regex,
            m.rebalance_timeout_ms,
            m.server_assignor,
        ),
    )


def emit_current_assignment(out: Effects, gid: str, m: ConsumerMember) -> None:
    out.emit(
        rec.ConsumerGroupCurrentMemberAssignmentKey(gid, m.member_id),
        rec.ConsumerGroupCurrentMemberAssignmentValue(
            m.member_epoch,
            m.previous_member_epoch,
            int(m.state),
            rec.topic_id_partitions(m.assigned),
            rec.topic_id_partitions(m.pending_revocation),
        ),
    )
