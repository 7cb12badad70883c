"""Classic-protocol rebalances driven by fake time: join, sync, heartbeat, leave, timeouts, static members."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kcompat.coordinator import MemberIdentity
from kcompat.coordinator.classic_state import (
    HEARTBEAT,
    SYNC,
    TRANSITIONS,
    ClassicGroupState,
    GroupEvent,
    next_state,
)
from kcompat.coordinator.consumer_protocol import decode_assignment
from kcompat.coordinator.records import GroupMetadataValue, decode
from kcompat.wire.error_codes import ErrorCode as E

from .harness import FAST, Server, protocols

S = ClassicGroupState


# --------------------------------------------------------------------------------- the table
def test_transition_table_matches_kafka_valid_previous_states() -> None:
    # Kafka's ClassicGroupState: the states each state may be entered from.
    entered_from = {
        S.EMPTY: {S.PREPARING_REBALANCE},
        S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
        S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
        S.STABLE: {S.COMPLETING_REBALANCE},
        S.DEAD: {S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
    }
    derived: dict[ClassicGroupState, set[ClassicGroupState]] = {s: set() for s in S}
    for src, row in TRANSITIONS.items():
        for dst in row.values():
            derived[dst].add(src)
    assert derived == entered_from


def test_illegal_events_raise() -> None:
    with pytest.raises(AssertionError):
        next_state(S.STABLE, GroupEvent.LEADER_SYNC)
    with pytest.raises(AssertionError):
        next_state(S.EMPTY, GroupEvent.JOIN_COMPLETE)


def test_request_tables_cover_every_state() -> None:
    assert set(HEARTBEAT) == set(S) and set(SYNC) == set(S)


# ------------------------------------------------------------------------------- scenarios
def rebalance(srv: Server, group: str, members: list[str]) -> int:
    """Every member (re)joins; the leader assigns round robin over 6 partitions; returns the generation."""
    joins = {m: srv.join(group, m) for m in members}
    answers = {m: srv.answer(r) for m, r in joins.items()}
    assert all(a is not None and a.error_code == E.NONE for a in answers.values()), answers
    gen = next(iter(answers.values())).generation_id
    leader = next(iter(answers.values())).leader
    order = sorted(members)
    plan = {m: {"t": [p for p in range(6) if p % len(order) == i]} for i, m in enumerate(order)}
    followers = [srv.sync(group, m, gen) for m in members if m != leader]
    lead = srv.sync(group, leader, gen, plan)
    for m, r in [*zip([m for m in members if m != leader], followers, strict=True), (leader, lead)]:
        a = srv.answer(r)
        assert a is not None and a.error_code == E.NONE
        assert decode_assignment(a.assignment) == plan[m]
    return gen


def test_three_members_then_a_fourth_then_one_leaves() -> None:
    srv = Server()
    first = [srv.join("g") for _ in range(3)]
    ids = [m for m in srv.c.groups["g"].members]
    assert len(ids) == 3
    # With no initial delay the first join completes at once; each newcomer then starts a rebalance
    # that waits for the first member to rejoin.
    assert srv.answer(first[0]).generation_id == 1
    assert srv.answer(first[1]) is None and srv.answer(first[2]) is None
    gen = rebalance(srv, "g", ids)
    # The first member's rejoin completed the phase: the newcomers' waiting joins were answered then.
    assert srv.answer(first[1]).generation_id == gen == srv.answer(first[2]).generation_id
    group = srv.c.groups["g"]
    assert group.state is S.STABLE and group.generation_id == gen
    assert all(srv.heartbeat("g", m, gen) == E.NONE for m in ids)

    # A fourth member: the others are told to rejoin, the join phase waits for all four.
    r4 = srv.join("g")
    fourth = next(m for m in group.members if m not in ids)
    assert srv.answer(r4) is None and group.state is S.PREPARING_REBALANCE
    assert srv.heartbeat("g", ids[0], gen) == E.REBALANCE_IN_PROGRESS
    gen2 = rebalance(srv, "g", [*ids, fourth])
    assert gen2 == gen + 1 and srv.answer(r4).generation_id == gen2

    # One leaves: the rest rebalance without it.
    left = srv.call("leave_group", group_id="g", members=[MemberIdentity(ids[1])]).response
    assert left.error_code == E.NONE and left.members[0].error_code == E.NONE
    assert group.state is S.PREPARING_REBALANCE
    gen3 = rebalance(srv, "g", [ids[0], ids[2], fourth])
    assert set(group.members) == {ids[0], ids[2], fourth} and gen3 == gen2 + 1


def test_followers_wait_for_the_leader_and_get_its_assignment() -> None:
    srv = Server()
    a = srv.join("g")
    leader = srv.answer(a).member_id
    gen = srv.answer(a).generation_id
    srv.sync("g", leader, gen, {leader: {"t": [0]}})
    b = srv.join("g")
    follower = next(m for m in srv.c.groups["g"].members if m != leader)
    ra = srv.join("g", leader)
    assert srv.answer(b) is not None and srv.answer(ra) is not None
    gen = srv.answer(b).generation_id
    assert srv.answer(ra).members and not srv.answer(b).members, "only the leader sees the member list"
    fs = srv.sync("g", follower, gen)
    assert srv.answer(fs) is None
    ls = srv.sync("g", leader, gen, {leader: {"t": [0]}, follower: {"t": [1]}})
    assert decode_assignment(srv.answer(fs).assignment) == {"t": [1]}
    assert decode_assignment(srv.answer(ls).assignment) == {"t": [0]}
    assert srv.answer(fs).protocol_name == "range" and srv.answer(fs).protocol_type == "consumer"
    # The leader's sync persisted the generation with both assignments.
    v = decode(srv.log[-1])
    assert isinstance(v.value, GroupMetadataValue)
    assert v.value.generation == gen and {m.member_id for m in v.value.members} == {leader, follower}


def test_member_id_required_then_join() -> None:
    srv = Server()
    r = srv.join("g", v4=True)
    first = srv.answer(r)
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
    again = srv.answer(srv.join("g", first.member_id, v4=True))
    assert (
        again.error_code == E.NONE and again.member_id == first.member_id and again.leader == first.member_id
    )


def test_pending_member_that_never_returns_expires() -> None:
    srv = Server()
    leader = srv.answer(srv.join("g")).member_id
    srv.sync("g", leader, 1, {leader: {"t": [0]}})
    pending = srv.answer(srv.join("g", v4=True)).member_id
    assert pending in srv.c.groups["g"].pending_members
    srv.advance(10_001)
    assert pending not in srv.c.groups["g"].pending_members


def test_protocol_selection_by_votes() -> None:
    srv = Server()
    srv.c.config = replace(FAST, group_initial_rebalance_delay_ms=100)
    srv.join("g", protos=protocols("roundrobin", "range", "sticky"))
    srv.join("g", protos=protocols("range", "roundrobin"))
    srv.join("g", protos=protocols("range", "sticky", "roundrobin"))
    srv.advance(100)  # members joined during the delay: it is extended once more
    assert srv.c.groups["g"].state is S.PREPARING_REBALANCE
    srv.advance(100)
    # Candidates: roundrobin and range (sticky is not supported by all); votes: rr 1, range 2.
    assert srv.c.groups["g"].protocol_name == "range"


def test_inconsistent_protocols_rejected_and_group_untouched() -> None:
    srv = Server()
    leader = srv.answer(srv.join("g", protos=protocols("range"))).member_id
    before = dict(srv.c.groups["g"].members)
    r = srv.join("g", protos=protocols("cooperative-sticky"))
    assert srv.answer(r).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = srv.join("g", protocol_type="connect")
    assert srv.answer(r).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert srv.c.groups["g"].members == before and leader in before
    r = srv.join("new", protos=[])
    assert srv.answer(r).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_sync_checks_protocol_type_and_name() -> None:
    srv = Server()
    a = srv.answer(srv.join("g"))
    r = srv.sync("g", a.member_id, a.generation_id, protocol_type="connect")
    assert srv.answer(r).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = srv.sync("g", a.member_id, a.generation_id, protocol_name="roundrobin")
    assert srv.answer(r).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = srv.sync(
        "g",
        a.member_id,
        a.generation_id,
        {a.member_id: {"t": [0]}},
        protocol_type="consumer",
        protocol_name="range",
    )
    assert srv.answer(r).error_code == E.NONE


def test_initial_rebalance_delay_extends_while_members_join() -> None:
    srv = Server(replace(FAST, group_initial_rebalance_delay_ms=3000))
    r1 = srv.join("g", rebalance=10_000)
    srv.advance(2000)
    r2 = srv.join("g", rebalance=10_000)
    srv.advance(1000)  # the first delay ends at 3000; a member joined, so wait another 3000
    assert srv.answer(r1) is None and srv.c.groups["g"].state is S.PREPARING_REBALANCE
    srv.advance(2999)
    assert srv.answer(r1) is None
    srv.advance(1)
    assert srv.answer(r1).error_code == E.NONE and srv.answer(r2).error_code == E.NONE
    assert len(srv.answer(r1).members) == 2


def test_initial_delay_is_capped_by_the_rebalance_timeout() -> None:
    srv = Server(replace(FAST, group_initial_rebalance_delay_ms=3000))
    r = srv.join("g", rebalance=5000)
    for _ in range(10):  # a newcomer every 2.9 s would extend forever without the cap
        srv.advance(2900)
        srv.join("g", rebalance=5000)
        if srv.answer(r) is not None:
            break
    assert srv.answer(r) is not None and srv.now <= 3000 + 5000 + 2900


def test_session_timeout_removes_a_silent_member() -> None:
    srv = Server()
    a = srv.answer(srv.join("g", session=5000))
    b_res = srv.join("g", session=5000)
    b = next(m for m in srv.c.groups["g"].members if m != a.member_id)
    srv.join("g", a.member_id, session=5000)
    gen = srv.answer(b_res).generation_id
    srv.sync("g", b, gen)
    srv.sync("g", a.member_id, gen, {a.member_id: {"t": [0]}, b: {"t": [1]}})
    srv.advance(3000)
    assert srv.heartbeat("g", a.member_id, gen) == E.NONE
    srv.advance(1999)
    assert b in srv.c.groups["g"].members
    srv.advance(1)
    # b never heartbeat: gone after 5 s, a is told to rejoin.
    assert b not in srv.c.groups["g"].members
    assert srv.heartbeat("g", a.member_id, gen) == E.REBALANCE_IN_PROGRESS
    assert srv.heartbeat("g", b, gen) == E.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    srv = Server()
    a = srv.answer(srv.join("g", rebalance=8000)).member_id
    rb = srv.join("g", rebalance=8000)
    b = next(m for m in srv.c.groups["g"].members if m != a)
    ra = srv.join("g", a, rebalance=8000)
    gen = srv.answer(ra).generation_id
    srv.sync("g", a, gen, {a: {"t": [0]}, b: {"t": [1]}})
    srv.sync("g", b, gen)
    assert srv.answer(rb) is not None
    again = srv.join("g", a, rebalance=8000)  # the leader rejoins: a new rebalance; b stays silent
    srv.advance(7999)
    assert srv.answer(again) is None
    srv.advance(1)
    resp = srv.answer(again)
    assert resp.error_code == E.NONE and [m.member_id for m in resp.members] == [a]


def test_sync_timeout_removes_members_that_never_sync() -> None:
    srv = Server()
    a = srv.answer(srv.join("g", rebalance=4000, session=60_000))
    srv.advance(4000)
    assert srv.c.groups["g"].members == {} and srv.c.groups["g"].state is S.EMPTY
    assert srv.heartbeat("g", a.member_id, a.generation_id) == E.UNKNOWN_MEMBER_ID


def test_static_member_rejoining_with_a_new_id_keeps_the_generation() -> None:
    srv = Server()
    a = srv.answer(srv.join("g", instance="i-1"))
    assert a.error_code == E.NONE and a.leader == a.member_id
    srv.sync("g", a.member_id, a.generation_id, {a.member_id: {"t": [0, 1]}}, group_instance_id="i-1")
    # The process restarts and joins with no member id: same instance, new id, no rebalance.
    b = srv.answer(srv.join("g", instance="i-1"))
    assert b.error_code == E.NONE and b.member_id != a.member_id
    assert b.generation_id == a.generation_id and srv.c.groups["g"].state is S.STABLE
    assert b.skip_assignment and b.leader == b.member_id, "a static leader is told to skip the assignment"
    assert srv.heartbeat("g", a.member_id, a.generation_id, "i-1") == E.FENCED_INSTANCE_ID
    assert srv.heartbeat("g", b.member_id, b.generation_id, "i-1") == E.NONE
    r = srv.sync("g", b.member_id, b.generation_id, group_instance_id="i-1")
    assert decode_assignment(srv.answer(r).assignment) == {"t": [0, 1]}


def test_static_member_not_removed_when_it_misses_a_rebalance() -> None:
    srv = Server()
    a = srv.answer(srv.join("g", instance="i-a", rebalance=5000))
    rb = srv.join("g", rebalance=5000)
    b = next(m for m in srv.c.groups["g"].members if m != a.member_id)
    ra = srv.join("g", a.member_id, instance="i-a", rebalance=5000)
    gen = srv.answer(ra).generation_id
    srv.sync("g", a.member_id, gen, {}, group_instance_id="i-a")
    srv.sync("g", b, gen)
    assert srv.answer(rb) is not None
    r = srv.join("g", b)  # a (static) stays silent during this rebalance
    srv.advance(5000)
    assert srv.answer(r).error_code == E.NONE
    assert a.member_id in srv.c.groups["g"].members, "static members keep their place (KIP-345)"


def test_leave_group_batch_with_static_and_unknown_members() -> None:
    srv = Server()
    a = srv.answer(srv.join("g", instance="i-a"))
    srv.sync("g", a.member_id, a.generation_id, {}, group_instance_id="i-a")
    resp = srv.call(
        "leave_group",
        group_id="g",
        members=[
            MemberIdentity("nobody"),
            MemberIdentity("wrong-id", "i-a"),
            MemberIdentity("", "i-zzz"),
            MemberIdentity("", "i-a"),
        ],
    ).response
    assert [m.error_code for m in resp.members] == [
        E.UNKNOWN_MEMBER_ID,
        E.FENCED_INSTANCE_ID,
        E.UNKNOWN_MEMBER_ID,
        E.NONE,
    ]
    assert resp.legacy_error_code == E.UNKNOWN_MEMBER_ID
    assert srv.c.groups["g"].members == {}
    assert (
        srv.call("leave_group", group_id="nope", members=[MemberIdentity("x")]).response.error_code
        == E.UNKNOWN_MEMBER_ID
    )


def test_group_max_size() -> None:
    srv = Server(replace(FAST, group_max_size=2, group_initial_rebalance_delay_ms=100))
    srv.join("g")
    srv.join("g")
    r = srv.join("g")
    assert srv.answer(r).error_code == E.GROUP_MAX_SIZE_REACHED
    assert len(srv.c.groups["g"].members) == 2


def test_invalid_session_timeout_and_group_id() -> None:
    srv = Server(replace(FAST, group_min_session_timeout_ms=6000))
    assert srv.answer(srv.join("g", session=5999)).error_code == E.INVALID_SESSION_TIMEOUT
    assert srv.answer(srv.join("", session=6000)).error_code == E.INVALID_GROUP_ID
    assert "g" not in srv.c.groups


def test_bad_input_leaves_the_group_unchanged() -> None:
    srv = Server()
    a = srv.answer(srv.join("g"))
    srv.sync("g", a.member_id, a.generation_id, {a.member_id: {"t": [0]}})
    group = srv.c.groups["g"]
    snapshot = (group.state, group.generation_id, dict(group.members), group.leader_id)
    assert srv.heartbeat("g", "ghost", a.generation_id) == E.UNKNOWN_MEMBER_ID
    assert srv.heartbeat("g", a.member_id, a.generation_id - 1) == E.ILLEGAL_GENERATION
    assert srv.heartbeat("nope", a.member_id, 1) == E.UNKNOWN_MEMBER_ID
    assert srv.answer(srv.sync("g", "ghost", a.generation_id)).error_code == E.UNKNOWN_MEMBER_ID
    assert srv.answer(srv.sync("g", a.member_id, 99)).error_code == E.ILLEGAL_GENERATION
    assert srv.answer(srv.join("g", "ghost")).error_code == E.UNKNOWN_MEMBER_ID
    assert srv.answer(srv.join("nope", "ghost")).error_code == E.UNKNOWN_MEMBER_ID
    assert (group.state, group.generation_id, dict(group.members), group.leader_id) == snapshot
    # A heartbeat after leaving is refused too.
    srv.call("leave_group", group_id="g", members=[MemberIdentity(a.member_id)])
    assert srv.heartbeat("g", a.member_id, a.generation_id) == E.UNKNOWN_MEMBER_ID


def test_describe_list_delete() -> None:
    srv = Server()
    a = srv.answer(srv.join("g"))
    srv.sync("g", a.member_id, a.generation_id, {a.member_id: {"t": [0]}})
    d = srv.call("describe_groups", ["g", "nope"]).response
    assert d[0].group_state == "Stable" and d[0].protocol_type == "consumer" and d[0].protocol_data == "range"
    assert d[0].members[0].member_id == a.member_id and decode_assignment(
        d[0].members[0].member_assignment
    ) == {"t": [0]}
    assert d[1].group_state == "Dead" and d[1].error_code == E.NONE
    srv.join("h")  # with no initial delay its join phase ends at once: CompletingRebalance
    listed = srv.call("list_groups").response
    assert {(g.group_id, g.group_type) for g in listed} == {("g", "classic"), ("h", "classic")}
    only = srv.call("list_groups", states_filter=["completingrebalance"]).response
    assert [g.group_id for g in only] == ["h"]
    assert srv.call("list_groups", types_filter=["consumer"]).response == []
    res = srv.call("delete_groups", ["g", "nope", ""]).response
    assert [r.error_code for r in res] == [E.NON_EMPTY_GROUP, E.GROUP_ID_NOT_FOUND, E.INVALID_GROUP_ID]
    srv.call("leave_group", group_id="g", members=[MemberIdentity(a.member_id)])
    assert srv.c.groups["g"].state is S.EMPTY
    assert srv.call("delete_groups", ["g"]).response[0].error_code == E.NONE
    assert "g" not in srv.c.groups


def test_member_ids_as_kafka_forms_them() -> None:
    srv = Server()
    static = srv.answer(srv.join("g", instance="i-1"))
    assert static.member_id.startswith("i-1-"), "a static member's id starts with its group.instance.id"


def test_txn_offset_commit_v0_into_a_group_with_members() -> None:
    """TxnOffsetCommit v0-2 carry no member or generation; Kafka's ClassicGroup.validateOffsetCommit
    lets such a transactional commit into a group with members (faust's exactly_once), while a plain
    OffsetCommit without them is refused there."""
    from kcompat.coordinator.messages import OffsetCommitRequestPartition, OffsetCommitRequestTopic

    srv = Server()
    a = srv.answer(srv.join("g"))
    srv.sync("g", a.member_id, a.generation_id, {a.member_id: {"t": [0]}})
    topics = [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 5, -1, "")])]
    committed = srv.answer(srv.call("txn_commit_offsets", group_id="g", producer_id=7, topics=topics))
    assert [p.error_code for t in committed for p in t.partitions] == [E.NONE]
