"""Server-side partition assignors for KIP-848 consumer groups, as pure functions.

Each takes the members (their subscribed topics, the partitions they hold now, their rack) and
the partition count of every existing topic, and returns every member's partitions:

    assign(members: {member_id: MemberSubscription}, topics: {topic: partition_count})
        -> {member_id: {topic: [partitions, ascending]}}

Every member appears in the result (possibly with nothing); topics missing from `topics` do not
exist and are skipped. The client picks one by name with `group.remote.assignor`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kcompat.coordinator.assignors.range import assign as range_assign
from kcompat.coordinator.assignors.roundrobin import assign as roundrobin_assign
from kcompat.coordinator.assignors.subscription import GroupAssignment, MemberSubscription
from kcompat.coordinator.assignors.uniform import assign as uniform_assign

Assignor = Callable[[Mapping[str, MemberSubscription], Mapping[str, int]], GroupAssignment]

ASSIGNORS: dict[str, Assignor] = {
    "uniform": uniform_assign,
    "range": range_assign,
    "roundrobin": roundrobin_assign,
}

__all__ = ["ASSIGNORS", "Assignor", "GroupAssignment", "MemberSubscription"]
