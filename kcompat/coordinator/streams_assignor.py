"""The streams groups' task assignor: Kafka 4.3.1's StickyTaskAssignor (group coordinator jar).

Active tasks, taken by partition then subtopology, go first to their previous active owner while it
is under the active quota, then to the least loaded of their previous standby holders, then to the
member with the fewest tasks in the least loaded process (tasks per member of the process). The
quotas are the task counts divided over the members, rounded up, and recomputed over the members
left each time one reaches its quota. Standbys (`num_standby` per task of a stateful subtopology,
tasks taken in the reverse order) go to the previous active owner, then a previous standby holder,
under the total quota, then to the least loaded process not holding the task; one that fits nowhere
is left out (Kafka logs a warning). Never two copies of a task in one process. No warm-up tasks.
Where Kafka's ties fall to Java's hash and heap order, ours fall to process id, then member id.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from kcompat.coordinator.streams_group import TaskSet

Task = tuple[str, int]  # (subtopology id, partition)


@dataclass(frozen=True)
class AssignorMember:
    process_id: str
    current: TaskSet


def _per_member(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


@dataclass
class _Quota:
    """Tasks per member, recomputed over the remaining members when one reaches it."""

    tasks: int
    members: int
    per_member: int = 0

    def __post_init__(self) -> None:
        self.per_member = _per_member(self.tasks, self.members)

    def reached(self, count: int) -> None:
        if count == self.per_member:
            self.members -= 1
            self.tasks -= count
            self.per_member = _per_member(self.tasks, self.members)


@dataclass
class _Process:
    """Kafka's ProcessState: its members' task counts and the tasks it holds."""

    process_id: str
    counts: dict[str, int] = field(default_factory=dict)  # member id -> active + standby tasks
    tasks: set[Task] = field(default_factory=set)

    @property
    def load(self) -> float:
        return sum(self.counts.values()) / len(self.counts)

    def least_loaded_member(self) -> str:
        return min(self.counts, key=lambda m: (self.counts[m], m))


class _Assignor:
    def __init__(self, members: Mapping[str, AssignorMember], num_standby: int) -> None:
        self.members = members
        self.num_standby = num_standby
        self.out = {mid: TaskSet() for mid in members}
        self.procs: dict[str, _Process] = {}
        self.prev_active: dict[Task, str] = {}
        self.prev_standby: dict[Task, list[str]] = {}
        for mid in sorted(members):
            m = members[mid]
            self.procs.setdefault(m.process_id, _Process(m.process_id)).counts[mid] = 0
            for s, ps in m.current.active.items():
                for p in ps:
                    self.prev_active[(s, p)] = mid  # a later claim wins, as Kafka's map put
            for s, ps in m.current.standby.items():
                for p in ps:
                    self.prev_standby.setdefault((s, p), []).append(mid)

    def proc(self, mid: str) -> _Process:
        return self.procs[self.members[mid].process_id]

    def count(self, mid: str) -> int:
        return self.proc(mid).counts[mid]

    def give(self, mid: str, task: Task, active: bool) -> int:
        proc = self.proc(mid)
        proc.counts[mid] += 1
        proc.tasks.add(task)
        kind = self.out[mid].active if active else self.out[mid].standby
        kind.setdefault(task[0], set()).add(task[1])
        return proc.counts[mid]

    def least_loaded_procs(self, task: Task | None = None) -> list[_Process]:
        procs = [p for p in self.procs.values() if task is None or task not in p.tasks]
        return sorted(procs, key=lambda p: (p.load, p.process_id))

    def prev_with_least_load(self, holders: list[str], task: Task | None) -> str | None:
        """Kafka's findPrevMemberWithLeastLoad: the first holder, replaced only by one whose process
        is less loaded (and free of the task) and which itself holds fewer tasks."""
        if not holders:
            return None
        best = holders[0]
        best_load, best_count = self.proc(best).load, self.count(best)
        for mid in holders[1:]:
            proc = self.proc(mid)
            free = task is None or task not in proc.tasks
            if proc.load < best_load and free and self.count(mid) < best_count:
                best, best_load, best_count = mid, proc.load, self.count(mid)
        return best if task is None or task not in self.proc(best).tasks else None

    def assign_active(self, tasks: list[Task], active: _Quota, total: _Quota) -> None:
        def take(mid: str, task: Task) -> None:
            n = self.give(mid, task, True)
            active.reached(n)
            total.reached(n)

        rest = []
        for task in sorted(tasks, key=lambda t: (t[1], t[0])):
            owner = self.prev_active.get(task)
            if owner is not None and self.count(owner) < active.per_member:
                take(owner, task)
            else:
                rest.append(task)
        left = []
        for task in rest:
            holder = self.prev_with_least_load(self.prev_standby.get(task, []), None)
            if holder is not None and self.count(holder) < active.per_member:
                take(holder, task)
            else:
                left.append(task)
        for task in sorted(left):
            proc = self.least_loaded_procs()[0]
            take(proc.least_loaded_member(), task)

    def assign_standby(self, tasks: list[Task], total: _Quota) -> None:
        pending: list[tuple[Task, int]] = []
        for task in sorted(tasks, key=lambda t: (t[1], t[0]), reverse=True):
            for placed in range(self.num_standby):
                owner = self.prev_active.get(task)
                if (
                    owner is not None
                    and task not in self.proc(owner).tasks
                    and self.count(owner) < total.per_member
                ):
                    total.reached(self.give(owner, task, False))
                    continue
                holder = self.prev_with_least_load(self.prev_standby.get(task, []), task)
                if holder is not None and self.count(holder) < total.per_member:
                    total.reached(self.give(holder, task, False))
                    continue
                pending.append((task, self.num_standby - placed))
                break
        for task, remaining in sorted(pending, reverse=True):
            for _ in range(remaining):
                procs = self.least_loaded_procs(task)
                if not procs:
                    break  # not enough processes: Kafka logs a warning and goes on
                total.reached(self.give(procs[0].least_loaded_member(), task, False))


def assign(
    tasks: Mapping[str, int],
    members: Mapping[str, AssignorMember],
    num_standby: int,
    stateful: Collection[str] | None = None,
) -> dict[str, TaskSet]:
    """member id -> target tasks, for `tasks` (subtopology id -> task count). Standbys are only for
    the `stateful` subtopologies (those with changelog topics; None: all)."""
    if not members:
        return {}
    a = _Assignor(members, num_standby)
    all_tasks = [(s, p) for s in tasks for p in range(tasks[s])]
    standby_tasks = [t for t in all_tasks if stateful is None or t[0] in stateful]
    total_tasks = len(all_tasks) + num_standby * len(standby_tasks)
    active, total = _Quota(len(all_tasks), len(members)), _Quota(total_tasks, len(members))
    a.assign_active(all_tasks, active, total)
    if num_standby > 0:
        a.assign_standby(standby_tasks, total)
    return a.out
