"""What an assignor is told about one member."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

GroupAssignment = dict[str, dict[str, list[int]]]  # member id -> topic -> partitions


@dataclass(frozen=True)
class MemberSubscription:
    topics: frozenset[str]
    owned: Mapping[str, frozenset[int]] = field(default_factory=dict)  # the member's current target
    rack: str | None = None


def empty_assignment(members: Mapping[str, MemberSubscription]) -> GroupAssignment:
    return {m: {} for m in members}


def finish(assignment: Mapping[str, Mapping[str, set[int]]]) -> GroupAssignment:
    """Sorted lists, empty topics dropped."""
    return {m: {t: sorted(ps) for t, ps in sorted(tps.items()) if ps} for m, tps in assignment.items()}
