"""The server-side assignors, checked with hypothesis for the properties Kafka's assignors promise."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.coordinator.assignors import ASSIGNORS, GroupAssignment, MemberSubscription
from kcompat.coordinator.assignors.range import assign as range_assign
from kcompat.coordinator.assignors.uniform import assign as uniform_assign

TOPICS = ["a", "b", "c", "d"]

topic_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1)
member_ids = st.lists(st.text("abcdefghij", min_size=1, max_size=4), min_size=1, max_size=8, unique=True)


@st.composite
def groups(draw: st.DrawFn, identical: bool = False) -> tuple[dict[str, MemberSubscription], dict[str, int]]:
    topics = draw(topic_counts)
    ids = draw(member_ids)
    names = [*topics, "missing-topic"]
    if identical:
        subs = frozenset(draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
        return {m: MemberSubscription(subs) for m in ids}, topics
    return {
        m: MemberSubscription(frozenset(draw(st.lists(st.sampled_from(names), unique=True)))) for m in ids
    }, topics


def check_valid(
    members: Mapping[str, MemberSubscription], topics: Mapping[str, int], out: GroupAssignment
) -> None:
    assert set(out) == set(members)
    seen: set[tuple[str, int]] = set()
    for m, tps in out.items():
        for t, ps in tps.items():
            assert t in members[m].topics, "only subscribed topics"
            for p in ps:
                assert 0 <= p < topics[t]
                assert (t, p) not in seen, "assigned twice"
                seen.add((t, p))
    wanted = {
        (t, p) for t, n in topics.items() for p in range(n) if any(t in s.topics for s in members.values())
    }
    assert seen == wanted, "every subscribed partition exactly once"


def loads(out: GroupAssignment) -> dict[str, int]:
    return {m: sum(len(ps) for ps in tps.values()) for m, tps in out.items()}


@settings(max_examples=150)
@given(groups())
def test_every_assignor_assigns_each_subscribed_partition_exactly_once(g: tuple) -> None:
    members, topics = g
    for assign in ASSIGNORS.values():
        check_valid(members, topics, assign(members, topics))


@settings(max_examples=150)
@given(groups(identical=True))
def test_balanced_within_one_partition_when_subscriptions_are_identical(g: tuple) -> None:
    members, topics = g
    for name in ("uniform", "roundrobin"):
        load = loads(ASSIGNORS[name](members, topics)).values()
        assert max(load) - min(load) <= 1, name


@settings(max_examples=100)
@given(groups(identical=True))
def test_range_is_balanced_per_topic_and_co_partitioned(g: tuple) -> None:
    members, topics = g
    out = range_assign(members, topics)
    for t in topics:
        per_member = [len(out[m].get(t, [])) for m in members if t in members[m].topics]
        if per_member:
            assert max(per_member) - min(per_member) <= 1
    same_size = [
        t for t in topics if topics[t] == max(topics.values()) and t in next(iter(members.values())).topics
    ]
    for m in members:
        assert len({tuple(out[m].get(t, [])) for t in same_size}) <= 1, (
            "partition k of equal topics goes to one member"
        )


def with_owned(
    members: Mapping[str, MemberSubscription], out: GroupAssignment
) -> dict[str, MemberSubscription]:
    return {
        m: MemberSubscription(s.topics, {t: frozenset(ps) for t, ps in out.get(m, {}).items()}, s.rack)
        for m, s in members.items()
    }


def moved(before: GroupAssignment, after: GroupAssignment) -> int:
    owner_before = {(t, p): m for m, tps in before.items() for t, ps in tps.items() for p in ps}
    return sum(
        1 for m, tps in after.items() for t, ps in tps.items() for p in ps if owner_before.get((t, p), m) != m
    )


@settings(max_examples=150)
@given(groups())
def test_uniform_is_sticky_when_nothing_changes(g: tuple) -> None:
    members, topics = g
    first = uniform_assign(members, topics)
    again = uniform_assign(with_owned(members, first), topics)
    assert again == first


@settings(max_examples=150)
@given(groups(identical=True), st.text("klmnop", min_size=1, max_size=3))
def test_uniform_moves_little_when_a_member_joins(g: tuple, newcomer: str) -> None:
    members, topics = g
    if newcomer in members:
        return
    first = uniform_assign(members, topics)
    grown = with_owned(members, first)
    grown[newcomer] = MemberSubscription(next(iter(members.values())).topics)
    after = uniform_assign(grown, topics)
    check_valid(grown, topics, after)
    total = sum(loads(after).values())
    # Only what the newcomer must take to be balanced moves, and it all goes to the newcomer.
    assert moved(first, after) == loads(after)[newcomer] <= -(-total // len(grown))


@settings(max_examples=150)
@given(groups(identical=True))
def test_uniform_moves_only_the_leavers_partitions(g: tuple) -> None:
    members, topics = g
    if len(members) < 2:
        return
    first = uniform_assign(members, topics)
    leaver = min(members)
    rest = {m: s for m, s in with_owned(members, first).items() if m != leaver}
    after = uniform_assign(rest, topics)
    check_valid(rest, topics, after)
    kept = {m: tps for m, tps in first.items() if m != leaver}
    assert moved(kept, after) == 0, "survivors keep everything they had"
    for m in rest:
        for t, ps in first[m].items():
            assert set(ps) <= set(after[m].get(t, []))


def test_examples() -> None:
    subs = {m: MemberSubscription(frozenset({"t"})) for m in ("m1", "m2", "m3")}
    assert range_assign(subs, {"t": 6}) == {"m1": {"t": [0, 1]}, "m2": {"t": [2, 3]}, "m3": {"t": [4, 5]}}
    assert ASSIGNORS["roundrobin"](subs, {"t": 6}) == {
        "m1": {"t": [0, 3]},
        "m2": {"t": [1, 4]},
        "m3": {"t": [2, 5]},
    }
    assert sorted(loads(uniform_assign(subs, {"t": 7})).values()) == [2, 2, 3]
