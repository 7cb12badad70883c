"""KIP-848 consumer groups: ConsumerGroupHeartbeat epochs, revoke-before-assign reconciliation, describe, replay."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from kcompat.coordinator import (
    ConsumerGroupHeartbeatRequest,
    GroupCoordinator,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequestGroup,
    TopicPartitions,
)
from kcompat.coordinator.consumer_group import MemberState
from kcompat.wire.error_codes import ErrorCode as E

from .harness import FAST, Server

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)
METADATA = {"t": (T, 6), "u": (U, 2)}


def server(**cfg: object) -> Server:
    return Server(replace(FAST, **cfg), topic_metadata=lambda: METADATA)  # type: ignore[arg-type]


def hb(
    srv: Server,
    member: str,
    epoch: int,
    owned: dict[uuid.UUID, list[int]] | None = None,
    *,
    topics: list[str] | None = None,
    regex: str | None = None,
    assignor: str | None = None,
    instance: str | None = None,
    version: int = 1,
    group: str = "cg",
):
    joining = epoch == 0
    req = ConsumerGroupHeartbeatRequest(
        group,
        member,
        epoch,
        instance_id=instance,
        rebalance_timeout_ms=30_000 if joining else -1,
        subscribed_topic_names=(
            topics if topics is not None else (["t"] if joining and regex is None else None)
        ),
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=[TopicPartitions(t, ps) for t, ps in (owned or {}).items()]
        if (owned is not None or joining)
        else None,
    )
    return srv.call(
        "consumer_group_heartbeat", req, api_version=version, client_id="c", client_host="/h"
    ).response


def partitions(resp) -> dict[uuid.UUID, list[int]]:
    return {tp.topic_id: tp.partitions for tp in resp.assignment}


def assert_no_double_ownership(srv: Server, group: str = "cg") -> None:
    g = srv.c.groups[group]
    seen: set[tuple[uuid.UUID, int]] = set()
    for m in g.members.values():
        for a in (m.assigned, m.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    assert (t, p) not in seen, f"{t}-{p} held twice"
                    seen.add((t, p))


def test_join_then_second_member_revoke_before_assign() -> None:
    srv = server()
    a = hb(srv, "A", 0)
    assert a.error_code == E.NONE and a.member_epoch == 1 and a.heartbeat_interval_ms == 5000
    assert partitions(a) == {T: [0, 1, 2, 3, 4, 5]}
    b = hb(srv, "B", 0)
    assert b.member_epoch == 2 and partitions(b) == {}, "B waits: A still holds its future partitions"
    g = srv.c.groups["cg"]
    assert g.state().value == "Reconciling" and g.members["B"].state is MemberState.UNRELEASED_PARTITIONS
    assert_no_double_ownership(srv)

    a = hb(srv, "A", 1, {T: [0, 1, 2, 3, 4, 5]})
    assert a.member_epoch == 1, "A keeps its epoch until it has revoked"
    kept = partitions(a)[T]
    assert len(kept) == 3 and g.members["A"].state is MemberState.UNREVOKED_PARTITIONS
    b = hb(srv, "B", 2, {})
    assert b.assignment is None or partitions(b) == {}, "still held by A"
    assert_no_double_ownership(srv)

    a = hb(srv, "A", 1, {T: kept})  # A no longer reports the revoked partitions
    assert a.member_epoch == 2 and g.members["A"].state is MemberState.STABLE
    b = hb(srv, "B", 2, {})
    assert sorted(partitions(b)[T] + kept) == [0, 1, 2, 3, 4, 5]
    assert g.state().value == "Stable"
    assert_no_double_ownership(srv)


def test_leave_and_fencing_errors() -> None:
    srv = server()
    hb(srv, "A", 0)
    hb(srv, "B", 0)
    assert hb(srv, "A", 5, {}).error_code == E.FENCED_MEMBER_EPOCH
    assert hb(srv, "ghost", 3, {}).error_code == E.UNKNOWN_MEMBER_ID
    assert hb(srv, "A", 1, {}, group="nope").error_code == E.GROUP_ID_NOT_FOUND
    epoch = srv.c.groups["cg"].group_epoch
    left = hb(srv, "B", -1)
    assert left.error_code == E.NONE and left.member_epoch == -1
    g = srv.c.groups["cg"]
    assert set(g.members) == {"A"} and g.group_epoch == epoch + 1
    # A never heard of B's share, so it still holds all six: it just moves to the new epoch, and
    # the unchanged assignment is not sent again.
    a = hb(srv, "A", 1, {T: [0, 1, 2, 3, 4, 5]})
    assert a.member_epoch == g.group_epoch and a.assignment is None
    assert g.members["A"].assigned == {T: {0, 1, 2, 3, 4, 5}}


def test_request_validation() -> None:
    srv = server()
    assert hb(srv, "", 0).error_code == E.INVALID_REQUEST
    assert hb(srv, "A", 0, assignor="sticky").error_code == E.UNSUPPORTED_ASSIGNOR
    assert hb(srv, "A", 0, regex="(").error_code == E.INVALID_REGULAR_EXPRESSION
    bad = ConsumerGroupHeartbeatRequest(
        "cg", "A", 0, rebalance_timeout_ms=-1, subscribed_topic_names=["t"], topic_partitions=[]
    )
    assert srv.call("consumer_group_heartbeat", bad).response.error_code == E.INVALID_REQUEST
    assert "cg" not in srv.c.groups
    v0 = hb(srv, "", 0, version=0)
    assert v0.error_code == E.NONE and v0.member_id, "v0 lets the broker choose the member id"


def test_assignor_choice_and_regex() -> None:
    srv = server()
    hb(srv, "A", 0, topics=[], regex="t|u", assignor="range")
    hb(srv, "B", 0, topics=[], regex="t|u", assignor="range")
    g = srv.c.groups["cg"]
    assert g.preferred_assignor("uniform") == "range"
    assert g.target["A"] == {T: {0, 1, 2}, U: {0}} and g.target["B"] == {T: {3, 4, 5}, U: {1}}


def test_session_timeout_fences_and_rebalance_timeout_fences_a_slow_revoker() -> None:
    srv = server(consumer_session_timeout_ms=10_000)
    hb(srv, "A", 0)
    srv.advance(5000)
    hb(srv, "B", 0)
    srv.advance(5000)
    assert "A" not in srv.c.groups["cg"].members, "A stopped heartbeating"
    b = hb(srv, "B", 2, {})
    assert partitions(b) == {T: [0, 1, 2, 3, 4, 5]}

    srv2 = server(consumer_session_timeout_ms=100_000)
    hb(srv2, "A", 0)
    hb(srv2, "B", 0)
    hb(srv2, "A", 1, {T: [0, 1, 2, 3, 4, 5]})  # A is asked to revoke, and never does
    srv2.advance(29_999)
    assert "A" in srv2.c.groups["cg"].members
    srv2.advance(1)
    assert "A" not in srv2.c.groups["cg"].members


def test_static_member_leave_and_takeover() -> None:
    srv = server()
    a = hb(srv, "A", 0, instance="i-1")
    hb(srv, "A", a.member_epoch, {T: [0, 1, 2, 3, 4, 5]}, instance="i-1")
    epoch = srv.c.groups["cg"].group_epoch
    assert hb(srv, "A2", 0, instance="i-1").error_code == E.UNRELEASED_INSTANCE_ID
    assert hb(srv, "A", -2, instance="i-1").error_code == E.NONE
    back = hb(srv, "A2", 0, instance="i-1")
    assert back.error_code == E.NONE and partitions(back) == {T: [0, 1, 2, 3, 4, 5]}
    g = srv.c.groups["cg"]
    assert set(g.members) == {"A2"} and g.group_epoch == epoch, "a static takeover needs no rebalance"


def test_offset_commit_and_fetch_with_member_epochs() -> None:
    srv = server()
    hb(srv, "A", 0)
    part = [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 5)])]

    def commit(member: str, epoch: int, version: int = 9) -> int:
        r = srv.call(
            "commit_offsets",
            group_id="cg",
            topics=part,
            generation_id_or_member_epoch=epoch,
            member_id=member,
            api_version=version,
        )
        return r.response[0].partitions[0].error_code

    assert commit("A", 1) == E.NONE
    assert commit("A", 0) == E.STALE_MEMBER_EPOCH
    assert commit("A", 2) == E.FENCED_MEMBER_EPOCH
    assert commit("X", 1) == E.UNKNOWN_MEMBER_ID
    assert commit("A", 1, version=8) == E.UNSUPPORTED_VERSION
    ok = srv.call("fetch_offsets", [OffsetFetchRequestGroup("cg", None, "A", 1)]).response[0]
    assert ok.error_code == E.NONE and ok.topics[0].partitions[0].committed_offset == 5
    stale = srv.call("fetch_offsets", [OffsetFetchRequestGroup("cg", None, "A", 0)]).response[0]
    assert stale.error_code == E.STALE_MEMBER_EPOCH


def test_describe_list_and_cross_protocol_errors() -> None:
    srv = server()
    hb(srv, "A", 0)
    [d] = srv.call("consumer_group_describe", ["cg"]).response
    assert (
        d.error_code == E.NONE
        and d.group_state == "Stable"
        and d.group_epoch == 1
        and d.assignor_name == "uniform"
    )
    assert d.members[0].assignment[0].topic_name == "t"
    [missing] = srv.call("consumer_group_describe", ["nope"]).response
    assert missing.error_code == E.GROUP_ID_NOT_FOUND
    listed = srv.call("list_groups", types_filter=["Consumer"]).response
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed] == [("cg", "consumer", "Stable")]
    # Classic requests against a consumer group.
    assert (
        srv.call("heartbeat", group_id="cg", member_id="A", generation_id=1).response.error_code
        == E.UNKNOWN_MEMBER_ID
    )
    assert srv.answer(srv.join("cg")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert srv.call("describe_groups", ["cg"]).response[0].group_state == "Dead"
    # ... and a consumer heartbeat against a classic group with members.
    srv.join("classic")
    assert hb(srv, "Z", 0, group="classic").error_code == E.GROUP_ID_NOT_FOUND
    assert srv.call("delete_groups", ["cg"]).response[0].error_code == E.NON_EMPTY_GROUP
    hb(srv, "A", -1)
    assert srv.call("delete_groups", ["cg"]).response[0].error_code == E.NONE


@pytest.mark.parametrize("cut", [0.3, 0.6, 1.0])
def test_replay_restores_epochs_and_assignments(cut: float) -> None:
    srv = server()
    hb(srv, "A", 0)
    hb(srv, "B", 0, instance="i-b")
    hb(srv, "A", 1, {T: [0, 1, 2, 3, 4, 5]})
    hb(srv, "C", 0)
    log = srv.log[: max(1, int(len(srv.log) * cut))]
    fresh = GroupCoordinator(FAST, topic_metadata=lambda: METADATA)
    fresh.load([(r.key, r.value) for r in log], srv.now)
    if cut < 1.0:
        assert fresh.groups["cg"].group_epoch >= 1
        return
    old, new = srv.c.groups["cg"], fresh.groups["cg"]
    assert (
        new.group_epoch,
        new.assignment_epoch,
        new.target,
        new.subscription_metadata,
        new.static_members,
    ) == (old.group_epoch, old.assignment_epoch, old.target, old.subscription_metadata, old.static_members)
    for mid, m in old.members.items():
        n = new.members[mid]
        assert (
            n.member_epoch,
            n.previous_member_epoch,
            n.state,
            n.assigned,
            n.pending_revocation,
            n.subscribed_topic_names,
            n.instance_id,
        ) == (
            m.member_epoch,
            m.previous_member_epoch,
            m.state,
            m.assigned,
            m.pending_revocation,
            m.subscribed_topic_names,
            m.instance_id,
        )
