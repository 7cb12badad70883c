"""Uniform: balanced and sticky, the default server assignor (Kafka's UniformAssignor semantics).

1. Every member keeps the partitions it holds that are still valid (topic exists and is subscribed,
   partition in range, nobody kept it first).
2. Each partition nobody kept goes to the least loaded member subscribed to its topic; partitions of
   topics with fewer subscribers are placed first, since they have fewer places to go.
3. While some member holds at least two more partitions than another member that could take one of
   them, one such partition moves from the most loaded to the least loaded.

With identical subscriptions the result is balanced within one partition. Nothing moves when the
current assignment is already valid and balanced, a leaving member's partitions are the only ones
that move when it leaves, and a joining member receives only what step 3 must move to balance it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kcompat.coordinator.assignors.subscription import GroupAssignment, MemberSubscription, finish


def assign(members: Mapping[str, MemberSubscription], topics: Mapping[str, int]) -> GroupAssignment:
    order = sorted(members)
    held: dict[str, dict[str, set[int]]] = {m: {} for m in order}
    load = dict.fromkeys(order, 0)
    taken: set[tuple[str, int]] = set()

    def give(m: str, t: str, p: int) -> None:
        held[m].setdefault(t, set()).add(p)
        load[m] += 1
        taken.add((t, p))

    for m in order:
        sub = members[m]
        for t in sorted(sub.owned):
            if t not in topics or t not in sub.topics:
                continue
            for p in sorted(sub.owned[t]):
                if 0 <= p < topics[t] and (t, p) not in taken:
                    give(m, t, p)

    subscribers = {t: [m for m in order if t in members[m].topics] for t in topics}
    for t in sorted(topics, key=lambda t: (len(subscribers[t]), t)):
        if not subscribers[t]:
            continue
        for p in range(topics[t]):
            if (t, p) not in taken:
                give(min(subscribers[t], key=lambda m: (load[m], m)), t, p)

    _balance(members, order, held, load)
    return finish(held)


def _balance(
    members: Mapping[str, MemberSubscription],
    order: list[str],
    held: dict[str, dict[str, set[int]]],
    load: dict[str, int],
) -> None:
    # Each move lowers the sum of squared loads, so this ends.
    moved = True
    while moved:
        moved = False
        for receiver in sorted(order, key=lambda m: (load[m], m)):
            donors = sorted((m for m in order if load[m] >= load[receiver] + 2), key=lambda m: (-load[m], m))
            for donor in donors:
                movable = sorted(t for t, ps in held[donor].items() if ps and t in members[receiver].topics)
                if not movable:
                    continue
                t = max(movable, key=lambda t: (len(held[donor][t]), t))
                p = max(held[donor][t])
                held[donor][t].discard(p)
                held[receiver].setdefault(t, set()).add(p)
                load[donor] -= 1
                load[receiver] += 1
                moved = True
                break
            if moved:
                break
