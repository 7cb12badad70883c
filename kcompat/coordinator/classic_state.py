"""The classic group's rebalance state machine, as tables (Kafka's ClassicGroupState and its callers).

    Empty ──(member joins)──> PreparingRebalance ──(join phase ends, members left)──> CompletingRebalance
      ^                          ^   │    └──(join phase ends, nobody left)──> Empty         │
      │                          │   │                                                      (leader's SyncGroup)
      │                          │   └─ every JoinGroup waits here                          v
      │                          └──────(member joins / leaves / times out / changes)──── Stable
      └──(DeleteGroups, or all offsets expired)──> Dead        (CompletingRebalance also goes back
                                                               to PreparingRebalance on those events)

TRANSITIONS says where each event leads from each state; an event missing from a state's row is a
bug in the caller, not a client error, so `next_state` raises. The request tables say what
Heartbeat and SyncGroup do in each state once the member and generation have been validated.
"""

from __future__ import annotations

from enum import Enum


class ClassicGroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupEvent(Enum):
    PREPARE_REBALANCE = "prepare rebalance"  # a member joined, left, timed out or changed its protocols
    JOIN_COMPLETE = "join phase complete"  # every member rejoined, or the rebalance timeout expired
    JOIN_COMPLETE_EMPTY = "join phase complete, no members"
    LEADER_SYNC = "leader's assignment stored"  # the leader's SyncGroup
    DELETE = "group deleted"  # DeleteGroups, offset expiry, replaced by a consumer group


S = ClassicGroupState
E = GroupEvent

TRANSITIONS: dict[ClassicGroupState, dict[GroupEvent, ClassicGroupState]] = {
    S.EMPTY: {E.PREPARE_REBALANCE: S.PREPARING_REBALANCE, E.DELETE: S.DEAD},
    S.PREPARING_REBALANCE: {
        E.JOIN_COMPLETE: S.COMPLETING_REBALANCE,
        E.JOIN_COMPLETE_EMPTY: S.EMPTY,
        E.DELETE: S.DEAD,
    },
    S.COMPLETING_REBALANCE: {
        E.PREPARE_REBALANCE: S.PREPARING_REBALANCE,
        E.LEADER_SYNC: S.STABLE,
        E.DELETE: S.DEAD,
    },
    S.STABLE: {E.PREPARE_REBALANCE: S.PREPARING_REBALANCE, E.DELETE: S.DEAD},
    S.DEAD: {E.DELETE: S.DEAD},
}


def next_state(state: ClassicGroupState, event: GroupEvent) -> ClassicGroupState:
    try:
        return TRANSITIONS[state][event]
    except KeyError:
        raise AssertionError(f"illegal classic group transition: {event.value} in {state.value}") from None


def can_rebalance(state: ClassicGroupState) -> bool:
    return GroupEvent.PREPARE_REBALANCE in TRANSITIONS[state]


class HeartbeatOutcome(Enum):
    UNKNOWN_MEMBER = "UNKNOWN_MEMBER_ID"  # an Empty group has no members to heartbeat
    REJOIN = "REBALANCE_IN_PROGRESS"  # tells the member to send JoinGroup
    OK = "NONE"  # resets the session timer
    NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"


HEARTBEAT: dict[ClassicGroupState, HeartbeatOutcome] = {
    S.EMPTY: HeartbeatOutcome.UNKNOWN_MEMBER,
    S.PREPARING_REBALANCE: HeartbeatOutcome.REJOIN,
    S.COMPLETING_REBALANCE: HeartbeatOutcome.OK,  # members heartbeat between their join and sync responses
    S.STABLE: HeartbeatOutcome.OK,
    S.DEAD: HeartbeatOutcome.NOT_AVAILABLE,
}


class SyncOutcome(Enum):
    UNKNOWN_MEMBER = "UNKNOWN_MEMBER_ID"
    REJOIN = "REBALANCE_IN_PROGRESS"
    WAIT = "wait for the leader"  # the leader's own sync ends the wait for everyone
    CURRENT_ASSIGNMENT = "answer with the stored assignment"
    NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"


SYNC: dict[ClassicGroupState, SyncOutcome] = {
    S.EMPTY: SyncOutcome.UNKNOWN_MEMBER,
    S.PREPARING_REBALANCE: SyncOutcome.REJOIN,
    S.COMPLETING_REBALANCE: SyncOutcome.WAIT,
    S.STABLE: SyncOutcome.CURRENT_ASSIGNMENT,
    S.DEAD: SyncOutcome.NOT_AVAILABLE,
}


class KnownMemberJoinOutcome(Enum):
    UNKNOWN_MEMBER = "UNKNOWN_MEMBER_ID"
    WAIT = "update the member and wait for the join phase to end"
    REBALANCE_IF_CHANGED = "answer with the current generation unless the member changed (or leads)"
    NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"


KNOWN_MEMBER_JOIN: dict[ClassicGroupState, KnownMemberJoinOutcome] = {
    S.EMPTY: KnownMemberJoinOutcome.UNKNOWN_MEMBER,
    S.PREPARING_REBALANCE: KnownMemberJoinOutcome.WAIT,
    S.COMPLETING_REBALANCE: KnownMemberJoinOutcome.REBALANCE_IF_CHANGED,
    S.STABLE: KnownMemberJoinOutcome.REBALANCE_IF_CHANGED,
    S.DEAD: KnownMemberJoinOutcome.NOT_AVAILABLE,
}
