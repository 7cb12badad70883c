"""A KIP-848 consumer group: epochs, target assignment, and each member's reconciliation towards it.

    group epoch       bumped whenever membership, a subscription or the subscribed topics' metadata changes
    assignment epoch  the group epoch the target assignment was computed for (< group epoch = Assigning)
    member epoch      the assignment epoch the member has caught up with

A member moves to a new target one step at a time (Kafka's CurrentAssignmentBuilder): partitions it
must give up are first listed as "pending revocation" while it keeps its epoch (UNREVOKED_PARTITIONS);
once its heartbeat no longer reports them as owned they are released, it takes the new epoch and
receives whatever target partitions nobody else still holds. Partitions still held by another
member are withheld until that member releases them (UNRELEASED_PARTITIONS). So no partition is
ever assigned to two members at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from kcompat.coordinator.messages import TopicPartitions

Assignment = dict[uuid.UUID, set[int]]  # topic id -> partitions


class MemberState(IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_deadline: int | None = None
    rebalance_deadline: int | None = None  # set while it has partitions to revoke


def copy_assignment(a: Mapping[uuid.UUID, set[int]]) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


def topic_partitions(
    a: Mapping[uuid.UUID, set[int]], names: Mapping[uuid.UUID, str] | None = None
) -> list[TopicPartitions]:
    """An assignment as the TopicPartitions of a response, by topic id (with names when given)."""
    return [
        TopicPartitions(t, sorted(ps), (names or {}).get(t, ""))
        for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))
        if ps
    ]


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target assignment
    # topic name -> (topic id, partition count) for every topic some member subscribes to, as stored
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    resolved_regex: dict[str, frozenset[str]] = field(default_factory=dict)
    # the last heartbeat's authorization filter for regexes (not a record: the next heartbeat's
    # after a restart, as Kafka resolves regexes again after loading a group)
    describable: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def owner_epochs(self) -> dict[tuple[uuid.UUID, int], str]:
        """Who currently holds each partition (assigned or still to be revoked)."""
        owners: dict[tuple[uuid.UUID, int], str] = {}
        for m in self.members.values():
            for a in (m.assigned, m.pending_revocation):
                for t, ps in a.items():
                    for p in ps:
                        owners[(t, p)] = m.member_id
        return owners

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                names.update(self.resolved_regex.get(m.subscribed_topic_regex, ()))
        return names

    def member_topics(self, m: ConsumerMember) -> set[str]:
        topics = set(m.subscribed_topic_names)
        if m.subscribed_topic_regex is not None:
            topics.update(self.resolved_regex.get(m.subscribed_topic_regex, ()))
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members asked for (Kafka's preferredServerAssignor), else the default."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        best = max(counts.values())
        return min(name for name, n in counts.items() if n == best)


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    owners: Mapping[tuple[uuid.UUID, int], str],
    owned: Mapping[uuid.UUID, set[int]] | None,
) -> ConsumerMember:
    """The member's next state on its way to `target` (Kafka's CurrentAssignmentBuilder.build).

    `owners` says which member holds each partition now; `owned` is what the member's heartbeat
    reported owning (None when the heartbeat omitted it).
    """
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, owners)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        # Revoked means no longer reported as owned; without a report we cannot know, so we wait.
        if owned is None or _overlaps(owned, member.pending_revocation):
            return member
        return _next_assignment(member, member.member_epoch + 1, target_epoch, target, owners, released=True)
    return _next_assignment(member, member.member_epoch, target_epoch, target, owners)


def _next_assignment(
    member: ConsumerMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    owners: Mapping[tuple[uuid.UUID, int], str],
    released: bool = False,
) -> ConsumerMember:
    new_assigned: Assignment = {}
    to_revoke: Assignment = {}
    to_assign: Assignment = {}
    has_unreleased = False
    for topic in set(target) | set(member.assigned):
        want = target.get(topic, set())
        have = member.assigned.get(topic, set())
        keep = have & want
        revoke = have - want
        assign = want - keep
        unreleased = {p for p in assign if owners.get((topic, p), member.member_id) != member.member_id}
        has_unreleased = has_unreleased or bool(unreleased)
        assign -= unreleased
        if keep:
            new_assigned[topic] = keep
        if revoke:
            to_revoke[topic] = revoke
        if assign:
            to_assign[topic] = assign
    pending_before = member.pending_revocation if not released else {}
    m = ConsumerMember(**member.__dict__)
    if to_revoke:
        # Give up partitions first; the epoch moves only once the member confirms.
        m.state = MemberState.UNREVOKED_PARTITIONS
        m.member_epoch = member_epoch
        m.previous_member_epoch = member.member_epoch
        m.assigned = new_assigned
        m.pending_revocation = _union(to_revoke, pending_before)
        return m
    for topic, ps in to_assign.items():
        new_assigned.setdefault(topic, set()).update(ps)
    m.state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
    m.member_epoch = target_epoch
    m.previous_member_epoch = member.member_epoch
    m.assigned = new_assigned
    m.pending_revocation = {}
    return m


def _overlaps(a: Mapping[uuid.UUID, set[int]], b: Mapping[uuid.UUID, set[int]]) -> bool:
    return any(a.get(t, set()) & ps for t, ps in b.items())


def _union(a: Assignment, b: Mapping[uuid.UUID, set[int]]) -> Assignment:
    out = copy_assignment(a)
    for t, ps in b.items():
        out.setdefault(t, set()).update(ps)
    return out


def is_subset(owned: Mapping[uuid.UUID, set[int]], assigned: Mapping[uuid.UUID, set[int]]) -> bool:
    return all(ps <= assigned.get(t, set()) for t, ps in owned.items())
