"""A hypothesis state machine over one classic group: random joins, syncs, heartbeats, leaves, commits,
bad requests and time, with the group's invariants checked after every step."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcompat.coordinator import (
    MemberIdentity,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    SyncGroupAssignment,
)
from kcompat.coordinator.classic_state import ClassicGroupState
from kcompat.wire.error_codes import ErrorCode as E

from .harness import Server, protocols

G = "g"


def generation_bytes(gen: int) -> bytes:
    return gen.to_bytes(4, "big")


class ClassicGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        from dataclasses import replace

        from .harness import FAST

        self.srv = Server(
            replace(FAST, group_initial_rebalance_delay_ms=50, new_member_join_timeout_ms=40_000)
        )
        self.known: list[str] = []  # member ids a client has been told
        self.max_generation = 0

    @property
    def group(self):  # type: ignore[no-untyped-def]
        return self.srv.c.groups.get(G)

    def snapshot(self) -> tuple:
        g = self.group
        if g is None:
            return ()
        return (g.state, g.generation_id, tuple(g.members), g.leader_id)

    def learn(self, member_id: str) -> None:
        if member_id and member_id not in self.known:
            self.known.append(member_id)

    # ------------------------------------------------------------------------------- rules
    @rule(
        v4=st.booleans(),
        static=st.sampled_from([None, "i-1", "i-2"]),
        proto=st.sampled_from(["range", "roundrobin"]),
    )
    def join_new(self, v4: bool, static: str | None, proto: str) -> None:
        r = self.srv.join(
            G, v4=v4, instance=static, protos=protocols(proto, "range"), session=5000, rebalance=8000
        )
        a = self.srv.answer(r)
        if a is not None:
            assert a.error_code in (E.NONE, E.MEMBER_ID_REQUIRED), a
            self.learn(a.member_id)
        else:
            g = self.group
            self.learn(next(m for m in g.members if g.members[m].join_token == r.token))

    @rule(data=st.data())
    def rejoin(self, data: st.DataObject) -> None:
        if not self.known:
            return
        m = data.draw(st.sampled_from(self.known))
        g = self.group
        instance = g.members[m].group_instance_id if g is not None and m in g.members else None
        r = self.srv.join(G, m, instance=instance, session=5000, rebalance=8000)
        a = self.srv.answer(r)
        if a is not None:
            assert a.error_code in (E.NONE, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID), a

    @rule(data=st.data())
    def sync(self, data: st.DataObject) -> None:
        g = self.group
        if g is None or not g.members:
            return
        m = data.draw(st.sampled_from(list(g.members)))
        gen = g.generation_id
        given = [SyncGroupAssignment(x, generation_bytes(gen)) for x in g.members] if m == g.leader_id else []
        r = self.srv.call(
            "sync_group",
            group_id=G,
            member_id=m,
            generation_id=gen,
            assignments=given,
            group_instance_id=g.members[m].group_instance_id,
        )
        a = self.srv.answer(r)
        if a is not None:
            assert a.error_code in (E.NONE, E.REBALANCE_IN_PROGRESS), a

    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        g = self.group
        if g is None or not g.members:
            return
        m = data.draw(st.sampled_from(list(g.members)))
        code = self.srv.heartbeat(G, m, g.generation_id, g.members[m].group_instance_id)
        assert code in (E.NONE, E.REBALANCE_IN_PROGRESS)

    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        if not self.known:
            return
        m = data.draw(st.sampled_from(self.known))
        r = self.srv.call("leave_group", group_id=G, members=[MemberIdentity(m)]).response
        g = self.group
        assert g is None or m not in g.members
        assert r.legacy_error_code in (E.NONE, E.UNKNOWN_MEMBER_ID)

    @rule(ms=st.sampled_from([1, 50, 1000, 4999, 5001, 8000, 40_000]))
    def time_passes(self, ms: int) -> None:
        self.srv.advance(ms)

    @rule(data=st.data())
    def member_commits(self, data: st.DataObject) -> None:
        g = self.group
        if g is None or not g.members:
            return
        m = data.draw(st.sampled_from(list(g.members)))
        topics = [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 1)])]
        r = self.srv.call(
            "commit_offsets",
            group_id=G,
            topics=topics,
            generation_id_or_member_epoch=g.generation_id,
            member_id=m,
            group_instance_id=g.members[m].group_instance_id,
        )
        assert r.response[0].partitions[0].error_code in (E.NONE, E.REBALANCE_IN_PROGRESS)

    @rule(kind=st.sampled_from(["unknown member", "stale generation", "fenced instance", "sync stranger"]))
    def bad_request_changes_nothing(self, kind: str) -> None:
        g = self.group
        if g is None or not g.members:
            return
        before = self.snapshot()
        some = next(iter(g.members))
        if kind == "unknown member":
            assert self.srv.heartbeat(G, "stranger", g.generation_id) == E.UNKNOWN_MEMBER_ID
        elif kind == "stale generation":
            assert (
                self.srv.heartbeat(G, some, g.generation_id + 1, g.members[some].group_instance_id)
                == E.ILLEGAL_GENERATION
            )
        elif kind == "fenced instance":
            static = [mm for mm in g.members.values() if mm.group_instance_id is not None]
            if not static:
                return
            assert (
                self.srv.heartbeat(G, "impostor", g.generation_id, static[0].group_instance_id)
                == E.FENCED_INSTANCE_ID
            )
        else:
            r = self.srv.call("sync_group", group_id=G, member_id="stranger", generation_id=g.generation_id)
            assert r.response.error_code == E.UNKNOWN_MEMBER_ID
        assert self.snapshot() == before

    # -------------------------------------------------------------------------- invariants
    @invariant()
    def state_is_from_the_table(self) -> None:
        g = self.group
        if g is not None:
            assert g.state in set(ClassicGroupState)

    @invariant()
    def generation_never_decreases(self) -> None:
        g = self.group
        if g is not None:
            assert g.generation_id >= self.max_generation
            self.max_generation = g.generation_id

    @invariant()
    def stable_members_hold_current_generation_assignments(self) -> None:
        g = self.group
        if g is not None and g.state is ClassicGroupState.STABLE:
            for m in g.members.values():
                assert m.assignment == generation_bytes(g.generation_id), (m.member_id, g.generation_id)

    @invariant()
    def membership_is_consistent(self) -> None:
        g = self.group
        if g is None:
            return
        ids = list(g.members)
        assert len(ids) == len(set(ids))
        assert all(k == m.member_id for k, m in g.members.items())
        instances = [m.group_instance_id for m in g.members.values() if m.group_instance_id is not None]
        assert len(instances) == len(set(instances)), "one member per group.instance.id"
        assert {i: g.members[m].group_instance_id for i, m in g.static_members.items()} == {
            i: i for i in g.static_members
        }
        assert set(instances) == set(g.static_members)
        assert (
            (g.leader_id in g.members)
            if g.members
            else g.leader_id is None or g.state is ClassicGroupState.EMPTY
        )
        assert g.pending_sync <= set(g.members)
        assert not set(g.pending_members) & set(g.members)
        if g.state is ClassicGroupState.EMPTY:
            assert not g.members
        if g.state is not ClassicGroupState.PREPARING_REBALANCE:
            assert all(m.join_token is None for m in g.members.values()), "only a join phase holds JoinGroups"
        if g.state is not ClassicGroupState.COMPLETING_REBALANCE:
            assert all(m.sync_token is None for m in g.members.values())

    @invariant()
    def something_is_scheduled_while_a_rebalance_waits(self) -> None:
        g = self.group
        if g is not None and g.state is ClassicGroupState.PREPARING_REBALANCE:
            assert g.join_deadline is not None


TestClassicGroup = ClassicGroupMachine.TestCase
TestClassicGroup.settings = settings(max_examples=120, stateful_step_count=40, deadline=None)
