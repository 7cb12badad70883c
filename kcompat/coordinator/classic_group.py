"""A classic-protocol group: its members, generation, protocol and the deadlines its timers wait for.

Pure data plus the bookkeeping Kafka's ClassicGroup does (protocol votes, leader choice, who still has
to rejoin or sync). The rules of when to move between states live in classic_rebalance.py and the
tables in classic_state.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import kcompat.coordinator.consumer_protocol as consumer_protocol
from kcompat.coordinator.classic_state import ClassicGroupState, GroupEvent, next_state
from kcompat.coordinator.messages import JoinGroupMember, JoinGroupProtocol


@dataclass
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[JoinGroupProtocol]
    assignment: bytes = b""
    join_token: int | None = None  # a JoinGroup waiting for the join phase to end
    sync_token: int | None = None  # a SyncGroup waiting for the leader's assignment
    is_new: bool = False  # joined but never got a JoinGroup response (expires after 5 min)
    session_deadline: int | None = None  # None while the member waits in a rebalance (it cannot heartbeat)

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    def metadata(self, protocol: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        return b""

    def matches(self, protocols: Sequence[JoinGroupProtocol]) -> bool:
        return [(p.name, p.metadata) for p in protocols] == [(p.name, p.metadata) for p in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The first protocol in this member's preference order that every member supports."""
        return next(p.name for p in self.protocols if p.name in candidates)


@dataclass
class ClassicGroup:
    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)  # in join order
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # MEMBER_ID_REQUIRED ids -> deadline
    pending_sync: set[str] = field(default_factory=set)  # members yet to send SyncGroup
    current_state_timestamp: int = -1
    # The join phase's timer: DelayedJoin (or InitialDelayedJoin while `initial_delay_remaining` is set).
    join_deadline: int | None = None
    initial_delay_ms: int = 0
    initial_delay_remaining: int | None = None
    new_member_added: bool = False
    sync_deadline: int | None = None

    # ---------------------------------------------------------------------------------- state
    def transition(self, event: GroupEvent, now_ms: int) -> None:
        self.state = next_state(self.state, event)
        self.current_state_timestamp = now_ms

    def is_simple(self) -> bool:
        """A group created only to hold offsets (no protocol type, never had a member)."""
        return self.protocol_type is None and not self.members

    # -------------------------------------------------------------------------------- members
    def add(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> ClassicMember:
        member = self.members.pop(member_id)
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        member = self.members[old_id]
        member.member_id = new_id
        # Keep the join order: rebuild the dict with the new id in the old member's place.
        self.members = {(new_id if k == old_id else k): v for k, v in self.members.items()}
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if nobody did."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    # ------------------------------------------------------------------------------ protocols
    def candidate_protocols(self) -> set[str]:
        """Protocols that every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        common = {p.name for p in members[0].protocols}
        for m in members[1:]:
            common &= {p.name for p in m.protocols}
        return common

    def supports_protocols(self, protocol_type: str, protocols: Sequence[JoinGroupProtocol]) -> bool:
        """Whether a member with these protocols may join (Kafka's ClassicGroup.supportsProtocols)."""
        if self.state is ClassicGroupState.EMPTY:
            return protocol_type != "" and len(protocols) > 0
        if self.protocol_type != protocol_type:
            return False
        if not self.members:  # rebalancing with nobody left: every protocol counts as supported by all
            return len(protocols) > 0
        common = self.candidate_protocols()
        return any(p.name in common for p in protocols)

    def select_protocol(self) -> str:
        """Every member votes for its most preferred protocol among those all support; most votes wins.

        Ties go to the protocol that got its first vote earliest in join order (Kafka leaves ties to
        HashMap order, so any choice among the tied ones is faithful).
        """
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            name = m.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        best = max(votes.values())
        return next(name for name, n in votes.items() if n == best)

    def current_members(self) -> list[JoinGroupMember]:
        return [
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    def subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members subscribe to, when the group uses the consumer protocol and they parse."""
        if self.protocol_type != consumer_protocol.PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            t = consumer_protocol.subscribed_topics(m.metadata(self.protocol_name))
            if t is None:
                return None
            topics |= t
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        if self.state is ClassicGroupState.EMPTY or not self.members:
            return False
        topics = self.subscribed_topics()
        # Unknown subscriptions (another protocol type, unparsable metadata) count as subscribed.
        return True if topics is None else topic in topics
