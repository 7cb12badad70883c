"""Committed offsets: commit validation, fetch, delete, expiry, and replay after a restart."""

from __future__ import annotations

from dataclasses import replace

from kcompat.coordinator import (
    GroupCoordinator,
    MemberIdentity,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetDeleteRequestTopic,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
)
from kcompat.coordinator.classic_state import ClassicGroupState
from kcompat.coordinator.consumer_protocol import encode_subscription
from kcompat.coordinator.messages import JoinGroupProtocol
from kcompat.wire.error_codes import ErrorCode as E

from .harness import FAST, Server


def topics(**offsets: dict[int, int]) -> list[OffsetCommitRequestTopic]:
    return [
        OffsetCommitRequestTopic(t, [OffsetCommitRequestPartition(p, o, 3, f"m{p}") for p, o in ps.items()])
        for t, ps in offsets.items()
    ]


def commit(srv: Server, group: str, gen: int = -1, member: str = "", **kw: object) -> list[int]:
    r = srv.call(
        "commit_offsets",
        group_id=group,
        topics=kw.pop("topics", topics(t={0: 10, 1: 20})),
        generation_id_or_member_epoch=gen,
        member_id=member,
        **kw,
    )
    return [p.error_code for t in r.response for p in t.partitions]


def fetch(
    srv: Server | GroupCoordinator, group: str, wanted: dict[str, list[int]] | None = None, now: int = 0
) -> dict:
    req = OffsetFetchRequestGroup(
        group, None if wanted is None else [OffsetFetchRequestTopic(t, ps) for t, ps in wanted.items()]
    )
    c = srv.c if isinstance(srv, Server) else srv
    [g] = c.fetch_offsets(srv.now if isinstance(srv, Server) else now, [req]).response
    assert g.error_code == E.NONE
    return {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
        for t in g.topics
        for p in t.partitions
    }


def stable_member(srv: Server, group: str, topic_list: tuple[str, ...] = ("t",)) -> tuple[str, int]:
    protos = [JoinGroupProtocol("range", encode_subscription(topic_list))]
    a = srv.answer(srv.join(group, protos=protos))
    srv.sync(group, a.member_id, a.generation_id, {a.member_id: {"t": [0, 1]}})
    return a.member_id, a.generation_id


def test_simple_commit_and_fetch() -> None:
    srv = Server()
    assert commit(srv, "g") == [E.NONE, E.NONE]
    got = fetch(srv, "g", {"t": [0, 1, 2], "other": [0]})
    assert got == {
        ("t", 0): (10, 3, "m0", E.NONE),
        ("t", 1): (20, 3, "m1", E.NONE),
        ("t", 2): (-1, -1, "", E.NONE),
        ("other", 0): (-1, -1, "", E.NONE),
    }
    assert fetch(srv, "g") == {("t", 0): (10, 3, "m0", E.NONE), ("t", 1): (20, 3, "m1", E.NONE)}
    assert fetch(srv, "unknown-group", {"t": [0]}) == {("t", 0): (-1, -1, "", E.NONE)}
    assert fetch(srv, "unknown-group") == {}


def test_fetch_several_groups_at_once() -> None:
    srv = Server()
    commit(srv, "a")
    commit(srv, "b", topics=topics(u={0: 5}))
    res = srv.call(
        "fetch_offsets", [OffsetFetchRequestGroup("a", None), OffsetFetchRequestGroup("b", None)]
    ).response
    assert [(g.group_id, [t.name for t in g.topics]) for g in res] == [("a", ["t"]), ("b", ["u"])]


def test_member_commits_are_validated() -> None:
    srv = Server()
    member, gen = stable_member(srv, "g")
    assert commit(srv, "g", gen, member) == [E.NONE, E.NONE]
    assert commit(srv, "g", gen + 1, member) == [E.ILLEGAL_GENERATION] * 2
    assert commit(srv, "g", gen, "stranger") == [E.UNKNOWN_MEMBER_ID] * 2
    assert commit(srv, "g", -1, "") == [E.UNKNOWN_MEMBER_ID] * 2, "simple commits need an empty group"
    assert commit(srv, "g", gen, member, group_instance_id="i-x") == [E.UNKNOWN_MEMBER_ID] * 2
    assert commit(srv, "nope", 3, "m", api_version=8) == [E.ILLEGAL_GENERATION] * 2
    assert commit(srv, "nope", 3, "m", api_version=9) == [E.GROUP_ID_NOT_FOUND] * 2
    assert "nope" not in srv.c.groups
    # Only the accepted commit is stored.
    assert fetch(srv, "g", {"t": [0]})[("t", 0)][0] == 10


def test_commit_during_completing_rebalance_is_rebalance_in_progress() -> None:
    srv = Server()
    a = srv.answer(srv.join("g"))
    assert srv.c.groups["g"].state is ClassicGroupState.COMPLETING_REBALANCE
    assert commit(srv, "g", a.generation_id, a.member_id) == [E.REBALANCE_IN_PROGRESS] * 2


def test_unknown_partitions_and_oversized_metadata() -> None:
    srv = Server(replace(FAST, offset_metadata_max_bytes=4))
    req = [
        OffsetCommitRequestTopic(
            "t",
            [OffsetCommitRequestPartition(0, 1, -1, "12345"), OffsetCommitRequestPartition(1, 1, -1, None)],
        ),
        OffsetCommitRequestTopic("missing", [OffsetCommitRequestPartition(0, 1)]),
    ]
    codes = commit(srv, "g", topics=req, partition_exists=lambda t, p: t == "t")
    assert codes == [E.OFFSET_METADATA_TOO_LARGE, E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert fetch(srv, "g") == {("t", 1): (1, -1, "", E.NONE)}


def test_offset_delete() -> None:
    srv = Server()
    member, gen = stable_member(srv, "g", ("t",))
    commit(srv, "g", gen, member, topics=topics(t={0: 1}, u={0: 2, 1: 3}))
    r = srv.call(
        "delete_offsets",
        group_id="g",
        topics=[OffsetDeleteRequestTopic("t", [0]), OffsetDeleteRequestTopic("u", [0, 9])],
    ).response
    assert r.error_code == E.NONE
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics] == [
        ("t", [(0, E.GROUP_SUBSCRIBED_TO_TOPIC)]),
        ("u", [(0, E.NONE), (9, E.NONE)]),
    ]
    assert fetch(srv, "g") == {("t", 0): (1, 3, "m0", E.NONE), ("u", 1): (3, 3, "m1", E.NONE)}
    assert srv.call("delete_offsets", group_id="nope", topics=[]).response.error_code == E.GROUP_ID_NOT_FOUND


def test_offset_delete_refused_for_non_consumer_groups_with_members() -> None:
    srv = Server()
    a = srv.answer(srv.join("c", protocol_type="connect"))
    srv.sync("c", a.member_id, a.generation_id, {})
    r = srv.call("delete_offsets", group_id="c", topics=[OffsetDeleteRequestTopic("t", [0])]).response
    assert r.error_code == E.NON_EMPTY_GROUP


def test_offsets_of_an_empty_group_expire_after_retention() -> None:
    cfg = replace(FAST, offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    srv = Server(cfg)
    member, gen = stable_member(srv, "g")
    commit(srv, "g", gen, member)
    for _ in range(24):  # the group stays Stable for 2 minutes: its subscribed offsets never expire
        srv.advance(5000)
        assert srv.heartbeat("g", member, gen) == E.NONE
    assert fetch(srv, "g")[("t", 0)][0] == 10
    srv.call("leave_group", group_id="g", members=[MemberIdentity(member)])
    assert srv.c.groups["g"].state is ClassicGroupState.EMPTY
    srv.advance(50_000)
    assert fetch(srv, "g")[("t", 0)][0] == 10, "retention counts from when the group became empty"
    srv.advance(20_000)
    assert fetch(srv, "g") == {}
    assert "g" not in srv.c.groups, "an empty group with no offsets left is deleted"
    tombstones = [r for r in srv.log if r.value is None]
    assert len(tombstones) == 3  # two offsets and the group


def test_simple_group_offsets_expire_per_commit_and_v1_expire_timestamps() -> None:
    cfg = replace(FAST, offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    srv = Server(cfg)
    commit(srv, "s", topics=topics(t={0: 1}))
    srv.advance(30_000)
    commit(srv, "s", topics=topics(t={1: 2}))
    commit(srv, "s", topics=topics(t={2: 3}), retention_time_ms=5000)  # OffsetCommit v2-4
    srv.advance(5000)
    assert set(fetch(srv, "s")) == {("t", 0), ("t", 1)}
    srv.advance(25_000)
    assert set(fetch(srv, "s")) == {("t", 1)}


def test_replay_after_restart_gives_the_same_answers() -> None:
    srv = Server()
    member, gen = stable_member(srv, "g")
    commit(srv, "g", gen, member, topics=topics(t={0: 100, 1: 200}))
    commit(srv, "simple", topics=topics(x={0: 7}))
    commit(srv, "simple", topics=topics(x={0: 8}))  # the later record wins
    srv.call("delete_offsets", group_id="simple", topics=[OffsetDeleteRequestTopic("x", [0])])
    commit(srv, "simple", topics=topics(y={3: 9}))
    commit(srv, "gone")
    srv.call("delete_groups", ["gone"])

    restarted = GroupCoordinator(FAST)
    restarted.load([(r.key, r.value) for r in srv.log], now_ms=srv.now)
    for g in ("g", "simple", "gone", "never"):
        assert fetch(restarted, g, now=srv.now) == fetch(srv, g)
        assert fetch(restarted, g, {"t": [0, 1], "x": [0], "y": [3]}, now=srv.now) == fetch(
            srv, g, {"t": [0, 1], "x": [0], "y": [3]}
        )
    group = restarted.groups["g"]
    assert group.state is ClassicGroupState.STABLE and group.generation_id == gen
    assert list(group.members) == [member] and group.leader_id == member
    assert "gone" not in restarted.groups
    # The restarted coordinator carries on: the member's heartbeat and sync work with its generation.
    hb = restarted.heartbeat(srv.now, group_id="g", member_id=member, generation_id=gen)
    assert hb.response.error_code == E.NONE
    describe_before = srv.call("describe_groups", ["g"]).response
    assert restarted.describe_groups(srv.now, ["g"]).response == describe_before


def test_empty_group_id_is_invalid_everywhere() -> None:
    """Kafka's GroupCoordinatorService answers an empty group id with INVALID_GROUP_ID before looking it up."""
    srv = Server()
    stable_member(srv, "g")
    [g] = srv.call("fetch_offsets", [OffsetFetchRequestGroup("", None)]).response
    assert (g.error_code, g.topics) == (E.INVALID_GROUP_ID, [])
    assert (
        srv.call(
            "delete_offsets", group_id="", topics=[OffsetDeleteRequestTopic("t", [0])]
        ).response.error_code
        == E.INVALID_GROUP_ID
    )
    assert srv.heartbeat("", "m", 1) == E.INVALID_GROUP_ID
    assert srv.sync("", "m", 1).response.error_code == E.INVALID_GROUP_ID
    leave = srv.call("leave_group", group_id="", members=[MemberIdentity("m")]).response
    assert (leave.error_code, leave.legacy_error_code) == (E.INVALID_GROUP_ID, E.INVALID_GROUP_ID)
    [d] = srv.call("describe_groups", [""]).response
    assert d.error_code == E.INVALID_GROUP_ID
    assert commit(srv, "") == [E.INVALID_GROUP_ID, E.INVALID_GROUP_ID]
    assert set(srv.c.groups) == {"g"}
