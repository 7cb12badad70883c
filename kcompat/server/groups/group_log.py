"""INFO lines for group rebalances, read off the records the coordinator stores.

The coordinator is pure (no logging, no clock), and every rebalance it completes is written to
`__consumer_offsets` before anyone is answered, so the records are where a rebalance is seen:

    GroupMetadata (type 2), classic protocol: written when the leader's assignment is stored
        (SyncGroup) and when the group empties
        -> "group G generation N stabilized (consumer/range, leader L): 3 member(s), partitions 2+2+1"
    ConsumerGroupTargetAssignmentMetadata (type 6) and ...Member (type 7), KIP-848 groups: a new
        target assignment, its epoch and the members whose target changed
        -> "consumer group G assignment epoch E: 2 member(s) with a new target, partitions 3+3"
    StreamsGroupTargetAssignmentMetadata (type 20) and ...Member (type 21), streams groups: the same
        -> "streams group G assignment epoch E: 2 member(s) with a new target, active tasks 4+4"

Only these rare record types are decoded (two bytes are read of the others: offset commits are
the bulk), and nothing when INFO is off.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kcompat.coordinator.consumer_protocol import decode_assignment
from kcompat.wire.errors import DecodeError

if TYPE_CHECKING:
    from kcompat.coordinator.record_pair import Record
    from kcompat.coordinator.records import GroupMetadataValue

log = logging.getLogger("kcompat.server.groups")

_GROUP_METADATA = 2
_TARGET_ASSIGNMENT_METADATA = 6
_TARGET_ASSIGNMENT_MEMBER = 7
_STREAMS_TARGET_METADATA = 20
_STREAMS_TARGET_MEMBER = 21
_LOGGED = frozenset(
    {
        _GROUP_METADATA,
        _TARGET_ASSIGNMENT_METADATA,
        _TARGET_ASSIGNMENT_MEMBER,
        _STREAMS_TARGET_METADATA,
        _STREAMS_TARGET_MEMBER,
    }
)


def log_rebalances(records: Iterable[Record]) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    # the coordinator's record classes: loaded with the coordinator, which wrote these records
    from kcompat.coordinator.records import (
        ConsumerGroupTargetAssignmentMemberValue,
        ConsumerGroupTargetAssignmentMetadataValue,
        GroupMetadataValue,
        decode,
        group_of,
    )
    from kcompat.coordinator.streams_records import (
        StreamsGroupTargetAssignmentMemberValue,
        StreamsGroupTargetAssignmentMetadataValue,
    )

    targets: dict[str, list[int]] = {}  # KIP-848 group -> partitions of each member with a new target
    epochs: dict[str, int] = {}
    streams_targets: dict[str, list[int]] = {}  # streams group -> active tasks of each such member
    streams_epochs: dict[str, int] = {}
    for rec in records:
        kind = int.from_bytes(rec.key[:2], "big", signed=True)
        if kind not in _LOGGED or rec.value is None:
            continue
        try:
            decoded = decode(rec)
        except DecodeError:
            continue  # the coordinator wrote it; a line of log is not worth a failure
        if decoded is None:
            continue
        group = group_of(decoded.key)
        value = decoded.value
        if isinstance(value, GroupMetadataValue):
            _log_classic(group, value)
        elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
            epochs[group] = value.assignment_epoch
        elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
            targets.setdefault(group, []).append(sum(len(ps) for _, ps in value.topic_partitions))
        elif isinstance(value, StreamsGroupTargetAssignmentMetadataValue):
            streams_epochs[group] = value.fields["assignment_epoch"]
        elif isinstance(value, StreamsGroupTargetAssignmentMemberValue):
            active = value.fields["active_tasks"]
            streams_targets.setdefault(group, []).append(sum(len(t["partitions"]) for t in active))
    for group_type, what, by_group, sized in (
        ("consumer", "partitions", epochs, targets),
        ("streams", "active tasks", streams_epochs, streams_targets),
    ):
        for group, epoch in by_group.items():
            sizes = sized.get(group, [])
            log.info(
                "%s group %s assignment epoch %d: %d member(s) with a new target, %s %s",
                group_type,
                group,
                epoch,
                len(sizes),
                what,
                "+".join(map(str, sizes)) or "none",
            )


def _log_classic(group: str, value: GroupMetadataValue) -> None:
    if not value.members:
        log.info("group %s generation %d is empty", group, value.generation)
        return
    sizes = [_assignment_size(value.protocol_type, m.assignment) for m in value.members]
    log.info(
        "group %s generation %d stabilized (%s/%s, leader %s): %d member(s), %s %s",
        group,
        value.generation,
        value.protocol_type,
        value.protocol,
        value.leader,
        len(value.members),
        "partitions" if value.protocol_type == "consumer" else "assignment bytes",
        "+".join(map(str, sizes)),
    )


def _assignment_size(protocol_type: str, assignment: bytes) -> int:
    """Partitions assigned for the consumer protocol (bytes for any other, e.g. Connect's)."""
    if protocol_type != "consumer":
        return len(assignment)
    try:
        return sum(len(ps) for ps in decode_assignment(assignment).values())
    except DecodeError:
        return len(assignment)
