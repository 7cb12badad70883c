"""Round robin: all partitions in (topic, partition) order dealt to the members in turn.

A partition goes to the next member (sorted by member id, cyclically) that subscribes to its
topic, as Kafka's client-side RoundRobinAssignor does. Balanced within one partition when all
members subscribe to the same topics; not sticky.
"""

from __future__ import annotations

from collections.abc import Mapping

from kcompat.coordinator.assignors.subscription import GroupAssignment, MemberSubscription, empty_assignment


def assign(members: Mapping[str, MemberSubscription], topics: Mapping[str, int]) -> GroupAssignment:
    out = empty_assignment(members)
    order = sorted(members)
    if not order:
        return out
    cursor = 0
    for topic in sorted(topics):
        if not any(topic in members[m].topics for m in order):
            continue
        for p in range(topics[topic]):
            for step in range(len(order)):
                m = order[(cursor + step) % len(order)]
                if topic in members[m].topics:
                    out[m].setdefault(topic, []).append(p)
                    cursor = (cursor + step + 1) % len(order)
                    break
    return out
