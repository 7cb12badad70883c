"""Leader-epoch fencing of a partition request, one rule for Fetch, ListOffsets and OffsetForLeaderEpoch.

A client that names the leader epoch it believes current (current_leader_epoch >= 0) is told when
it is behind (FENCED_LEADER_EPOCH: refresh metadata) or ahead of this broker (UNKNOWN_LEADER_EPOCH:
this broker has not caught up; retry), as Kafka's Partition does; -1 means "not checked". In
cluster mode only the partition's leader answers (NOT_LEADER_OR_FOLLOWER elsewhere).
"""

from __future__ import annotations

from kcompat.wire.error_codes import ErrorCode


def leader_epoch_error(requested: int, current: int) -> ErrorCode | None:
    """The error for a request naming leader epoch `requested` when the partition's is `current`."""
    if requested < 0 or requested == current:
        return None
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH


def leader_error(requested: int, leader: int, leader_epoch: int, node_id: int) -> ErrorCode | None:
    """Epoch fencing, then NOT_LEADER_OR_FOLLOWER where `node_id` is not the partition's leader."""
    fenced = leader_epoch_error(requested, leader_epoch)
    if fenced is not None:
        return fenced
    return None if leader == node_id else ErrorCode.NOT_LEADER_OR_FOLLOWER
