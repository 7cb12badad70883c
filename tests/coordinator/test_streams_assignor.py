"""The streams task assignor against Kafka 4.3.1's StickyTaskAssignor. Each expected outcome is worked
out from that class's bytecode (kafka-group-coordinator-4.3.1.jar), step by step in the comments;
the cases avoid the ties Kafka leaves to Java's hash and heap order, or assert only what they don't
decide."""

from __future__ import annotations

from kcompat.coordinator.streams_assignor import AssignorMember, assign
from kcompat.coordinator.streams_group import Tasks, TaskSet


def member(process: str, active: Tasks | None = None, standby: Tasks | None = None) -> AssignorMember:
    return AssignorMember(process, TaskSet(active or {}, standby or {}))


def active(out: dict[str, TaskSet]) -> dict[str, Tasks]:
    return {mid: {s: ps for s, ps in t.active.items() if ps} for mid, t in out.items()}


def standby(out: dict[str, TaskSet]) -> dict[str, Tasks]:
    return {mid: {s: ps for s, ps in t.standby.items() if ps} for mid, t in out.items()}


def test_a_joining_member_takes_only_what_the_recomputed_quota_frees() -> None:
    # 8 tasks over 5 members: quota 2. m1, m2 keep 2 (quota stays 2: 6/4, 4/3), m3 keeps 2 and the
    # quota becomes 2/2 = 1, m4 keeps task 6 and reaches it, so task 7 alone goes to the new m5.
    members = {
        "m1": member("A", {"0": {0, 1}}),
        "m2": member("B", {"0": {2, 3}}),
        "m3": member("C", {"0": {4, 5}}),
        "m4": member("D", {"0": {6, 7}}),
        "m5": member("E"),
    }
    assert active(assign({"0": 8}, members, 0)) == {
        "m1": {"0": {0, 1}},
        "m2": {"0": {2, 3}},
        "m3": {"0": {4, 5}},
        "m4": {"0": {6}},
        "m5": {"0": {7}},
    }


def test_tasks_are_taken_by_partition_then_subtopology() -> None:
    # order a0, b0, a1, b1: m1 keeps the first two under its quota of 2, the new m2 gets the others
    members = {"m1": member("A", {"a": {0, 1}, "b": {0, 1}}), "m2": member("B")}
    assert active(assign({"a": 2, "b": 2}, members, 0)) == {
        "m1": {"a": {0}, "b": {0}},
        "m2": {"a": {1}, "b": {1}},
    }


def test_the_quota_is_recomputed_when_a_member_reaches_it() -> None:
    # 7 tasks, 3 members: quota 3. m1 keeps 0-2, the quota becomes 4/2 = 2, so m2 keeps only 4 and 5;
    # 3 and 6 go to the least loaded process, C (0, then 1 against B's 2).
    members = {
        "m1": member("A", {"0": {0, 1, 2, 3}}),
        "m2": member("B", {"0": {4, 5, 6}}),
        "m3": member("C"),
    }
    assert active(assign({"0": 7}, members, 0)) == {
        "m1": {"0": {0, 1, 2}},
        "m2": {"0": {4, 5}},
        "m3": {"0": {3, 6}},
    }


def test_uneven_counts_keep_the_owner_at_its_quota() -> None:
    # 5 tasks, 3 members: quota 2; m1 keeps 0 and 1, the other three are spread over B and C
    members = {"m1": member("A", {"0": {0, 1, 2, 3, 4}}), "m2": member("B"), "m3": member("C")}
    out = active(assign({"0": 5}, members, 0))
    assert out["m1"] == {"0": {0, 1}}
    assert out["m2"]["0"] | out["m3"]["0"] == {2, 3, 4}
    assert sorted([len(out["m2"]["0"]), len(out["m3"]["0"])]) == [1, 2]


def test_an_orphaned_active_task_goes_to_its_previous_standby_holder() -> None:
    # quota 2: m2 keeps 0, then takes 1 as its previous standby holder; 2 and 3 go to m3
    members = {"m2": member("B", {"0": {0}}, {"0": {1}}), "m3": member("C")}
    assert active(assign({"0": 4}, members, 0)) == {"m2": {"0": {0, 1}}, "m3": {"0": {2, 3}}}


def test_two_members_of_one_process_share_its_load() -> None:
    # a process's load is its tasks per member: P (2 members) takes 4 of 6 tasks, Q (1 member) 2
    members = {"m1": member("P"), "m2": member("P"), "m3": member("Q")}
    out = active(assign({"0": 6}, members, 0))
    assert [len(out[m]["0"]) for m in ("m1", "m2", "m3")] == [2, 2, 2]
    assert set().union(*(out[m]["0"] for m in out)) == set(range(6))


def test_standbys_go_to_the_previous_active_then_standby_holder_then_least_loaded() -> None:
    # actives (quota 1): m1 keeps 0, m2 keeps 2, 1 goes to the empty C. Standbys, tasks 2, 1, 0:
    # 2 has no free previous holder and waits; 1 goes to its previous active owner m1; 0 to its
    # previous standby holder m2; then 2 to the least loaded process without it, C.
    members = {
        "m1": member("A", {"s": {0, 1}}),
        "m2": member("B", {"s": {2}}, {"s": {0}}),
        "m3": member("C"),
    }
    out = assign({"s": 3}, members, 1, stateful={"s"})
    assert active(out) == {"m1": {"s": {0}}, "m2": {"s": {2}}, "m3": {"s": {1}}}
    assert standby(out) == {"m1": {"s": {1}}, "m2": {"s": {0}}, "m3": {"s": {2}}}


def test_standbys_never_share_a_process_with_their_active_or_each_other() -> None:
    members = {"m1": member("P"), "m2": member("P"), "m3": member("Q"), "m4": member("R")}
    out = assign({"s": 6}, members, 2, stateful={"s"})
    proc = {m: members[m].process_id for m in members}
    for p in range(6):
        holders = [m for m in out if p in out[m].active.get("s", set()) | out[m].standby.get("s", set())]
        assert len(holders) == 3
        assert len({proc[m] for m in holders}) == 3


def test_standbys_that_fit_nowhere_are_left_out() -> None:
    # one process: no standby can go anywhere (Kafka logs a warning), actives are all assigned
    members = {"m1": member("P"), "m2": member("P")}
    out = assign({"s": 4}, members, 1, stateful={"s"})
    assert standby(out) == {"m1": {}, "m2": {}}
    assert out["m1"].active["s"] | out["m2"].active["s"] == {0, 1, 2, 3}


def test_only_stateful_subtopologies_get_standbys() -> None:
    members = {"m1": member("A"), "m2": member("B")}
    out = assign({"stateless": 2, "s": 2}, members, 1, stateful={"s"})
    assert all("stateless" not in t.standby for t in out.values())
    assert sorted(p for t in out.values() for p in t.standby.get("s", set())) == [0, 1]
