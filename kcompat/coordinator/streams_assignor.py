"""The streams groups' sticky task assignor (after Kafka's StickyTaskAssignor, simplified).

Active tasks stay where they run while that member is under its fair share (the task count
divided over the members, rounded up); the rest go to the least loaded member, by process first.
Each task then gets `num_standby` standby replicas on other processes than its active one's,
preferring members that already hold it as a standby, then the least loaded. No warm-up tasks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from kcompat.coordinator.streams_group import TaskSet


@dataclass(frozen=True)
class AssignorMember:
    process_id: str
    current: TaskSet


def assign(
    tasks: Mapping[str, int], members: Mapping[str, AssignorMember], num_standby: int
) -> dict[str, TaskSet]:
    """member id -> target tasks, for `tasks` (subtopology id -> task count)."""
    out = {mid: TaskSet() for mid in members}
    if not members:
        return out
    all_tasks = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    capacity = math.ceil(len(all_tasks) / len(members))
    load = dict.fromkeys(members, 0)
    process_load: dict[str, int] = {}
    active_of: dict[tuple[str, int], str] = {}

    def give(mid: str, task: tuple[str, int], kind: str) -> None:
        getattr(out[mid], kind).setdefault(task[0], set()).add(task[1])
        load[mid] += 1
        proc = members[mid].process_id
        process_load[proc] = process_load.get(proc, 0) + 1

    prev: dict[tuple[str, int], str] = {}
    for mid in sorted(members):
        for s, ps in members[mid].current.active.items():
            for p in ps:
                prev.setdefault((s, p), mid)
    unassigned = []
    for task in all_tasks:
        owner = prev.get(task)
        if owner is not None and load[owner] < capacity:
            give(owner, task, "active")
            active_of[task] = owner
        else:
            unassigned.append(task)
    for task in unassigned:
        mid = min(members, key=lambda m: (load[m], process_load.get(members[m].process_id, 0), m))
        give(mid, task, "active")
        active_of[task] = mid
    for _ in range(num_standby):
        for task in all_tasks:
            used = {members[active_of[task]].process_id}
            used.update(members[m].process_id for m in members if task[1] in out[m].standby.get(task[0], ()))
            candidates = [m for m in members if members[m].process_id not in used]
            if not candidates:
                continue
            mid = min(
                candidates,
                key=lambda m: (task[1] not in members[m].current.standby.get(task[0], ()), load[m], m),
            )
            give(mid, task, "standby")
    return out
