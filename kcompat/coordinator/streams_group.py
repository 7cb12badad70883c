"""A KIP-1071 streams group: its topology, members, epochs and each member's reconciliation.

    group epoch       bumped when membership, a member's process, or the topology's topics change
    assignment epoch  the group epoch the target assignment was computed for (< group epoch = Assigning)
    member epoch      the assignment epoch the member has caught up with

Tasks are (subtopology id, partition). A member gives up active tasks before anyone else gets them
(Kafka's streams CurrentAssignmentBuilder): the tasks it must revoke are listed as pending while it
keeps its epoch (UNREVOKED_TASKS); once its heartbeat no longer reports them as owned it takes the
new epoch and the target tasks nobody else still holds as active (UNRELEASED_TASKS until they are
all free). So no active task ever runs on two members at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from kcompat.coordinator.streams_topology import ConfiguredTopology, StreamsTopology

Tasks = dict[str, set[int]]  # subtopology id -> partitions

PROTOCOL_TYPE = "streams"


class StreamsMemberState(IntEnum):
    # Kafka's streams MemberState bytes, as its records carry them (not the consumer group's 0-2).
    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3


class StreamsGroupState(Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class TaskSet:
    """A member's active, standby and warm-up tasks."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def copy(self) -> TaskSet:
        return TaskSet(copy_tasks(self.active), copy_tasks(self.standby), copy_tasks(self.warmup))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskSet):
            return NotImplemented
        return (
            copy_tasks(self.active) == copy_tasks(other.active)
            and copy_tasks(self.standby) == copy_tasks(other.standby)
            and copy_tasks(self.warmup) == copy_tasks(other.warmup)
        )


@dataclass
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    task_offsets: list[tuple[str, int, int]] = field(default_factory=list)
    task_end_offsets: list[tuple[str, int, int]] = field(default_factory=list)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: StreamsMemberState = StreamsMemberState.STABLE
    assigned: TaskSet = field(default_factory=TaskSet)
    pending_revocation: Tasks = field(default_factory=dict)  # active tasks still to give up
    owned: TaskSet | None = None  # what its last heartbeat said it runs (None: not reported yet)
    session_deadline: int | None = None
    rebalance_deadline: int | None = None


def copy_tasks(t: Mapping[str, set[int]]) -> Tasks:
    return {s: set(ps) for s, ps in t.items() if ps}


@dataclass
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: StreamsTopology | None = None
    configured: ConfiguredTopology | None = None
    members: dict[str, StreamsMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, TaskSet] = field(default_factory=dict)
    endpoint_information_epoch: int = 0
    shutdown_requested: bool = False
    # streams.initial.rebalance.delay.ms: no target is computed before this (None: no delay running).
    # Not in the records, as Kafka's timer is not: after a load the next heartbeat assigns.
    initial_rebalance_deadline: int | None = None
    # When the target was last computed (0: never), for streams.assignment.interval.ms; in the
    # records as Kafka 4.3's AssignmentTimestamp, so a failover keeps the interval.
    assignment_timestamp: int = 0

    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.configured is None or not self.configured.ready:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not StreamsMemberState.STABLE:
                return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def active_owners(self) -> dict[tuple[str, int], str]:
        """Who runs each active task now (assigned or still to be revoked)."""
        owners: dict[tuple[str, int], str] = {}
        for m in self.members.values():
            for tasks in (m.assigned.active, m.pending_revocation):
                for s, ps in tasks.items():
                    for p in ps:
                        owners[(s, p)] = m.member_id
        return owners

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether a member runs a topology reading `topic` (its committed offsets then neither expire
        nor may be deleted); an empty group reads nothing, as an empty consumer group."""
        return (
            bool(self.members) and self.topology is not None and topic in self.topology.source_topic_names()
        )


def reconcile(
    member: StreamsMember, target_epoch: int, target: TaskSet, owners: Mapping[tuple[str, int], str]
) -> StreamsMember:
    """The member's next state on its way to `target` (Kafka's streams CurrentAssignmentBuilder)."""
    if member.state is StreamsMemberState.STABLE:
        if member.member_epoch == target_epoch and member.assigned == target:
            return member
        return _next(member, target_epoch, target, owners)
    if member.state is StreamsMemberState.UNREVOKED_TASKS:
        owned = member.owned
        if owned is None or _overlaps(owned.active, member.pending_revocation):
            return member  # still running a task it must give up
        return _next(member, target_epoch, target, owners, released=True)
    return _next(member, target_epoch, target, owners)


def _next(
    member: StreamsMember,
    target_epoch: int,
    target: TaskSet,
    owners: Mapping[tuple[str, int], str],
    released: bool = False,
) -> StreamsMember:
    keep: Tasks = {}
    revoke: Tasks = {}
    assign: Tasks = {}
    unreleased = False
    for s in set(target.active) | set(member.assigned.active):
        want = target.active.get(s, set())
        have = member.assigned.active.get(s, set())
        if have & want:
            keep[s] = have & want
        if have - want:
            revoke[s] = have - want
        free = {p for p in want - have if owners.get((s, p), member.member_id) == member.member_id}
        unreleased = unreleased or free != want - have
        if free:
            assign[s] = free
    m = StreamsMember(**member.__dict__)
    m.previous_member_epoch = member.member_epoch
    if revoke:
        # Give up active tasks first; the epoch moves only once the member confirms.
        m.state = StreamsMemberState.UNREVOKED_TASKS
        m.assigned = TaskSet(keep, _without(target.standby, keep), copy_tasks(target.warmup))
        pending = {} if released else member.pending_revocation
        m.pending_revocation = {
            s: revoke.get(s, set()) | pending.get(s, set()) for s in set(revoke) | set(pending)
        }
        return m
    for s, ps in assign.items():
        keep.setdefault(s, set()).update(ps)
    m.state = StreamsMemberState.UNRELEASED_TASKS if unreleased else StreamsMemberState.STABLE
    m.member_epoch = target_epoch
    m.assigned = TaskSet(keep, copy_tasks(target.standby), copy_tasks(target.warmup))
    m.pending_revocation = {}
    return m


def _without(a: Mapping[str, set[int]], b: Mapping[str, set[int]]) -> Tasks:
    return copy_tasks({s: ps - b.get(s, set()) for s, ps in a.items()})


def _overlaps(a: Mapping[str, set[int]], b: Mapping[str, set[int]]) -> bool:
    return any(a.get(s, set()) & ps for s, ps in b.items())
