"""Classic groups through Broker.handle: FindCoordinator, JoinGroup/SyncGroup/Heartbeat/LeaveGroup across
versions, DescribeGroups, ListGroups, DeleteGroups, timers, bad input, and __consumer_offsets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kcompat.coordinator import records as rec
from kcompat.coordinator.consumer_protocol import decode_assignment, encode_assignment
from kcompat.storage.topic_store import CONSUMER_OFFSETS
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.api_versions import API_VERSIONS
from kcompat.wire.messages.delete_groups import DELETE_GROUPS
from kcompat.wire.messages.describe_configs import DESCRIBE_CONFIGS
from kcompat.wire.messages.describe_groups import DESCRIBE_GROUPS
from kcompat.wire.messages.find_coordinator import FIND_COORDINATOR
from kcompat.wire.messages.heartbeat import HEARTBEAT
from kcompat.wire.messages.join_group import JOIN_GROUP
from kcompat.wire.messages.leave_group import LEAVE_GROUP
from kcompat.wire.messages.list_groups import LIST_GROUPS
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.messages.sync_group import SYNC_GROUP
from kcompat.wire.record_batch import split_batches
from kcompat.wire.records import decode_batch
from tests.server.broker_harness import HarnessFactory
from tests.server.groups_harness import GroupHarness, heartbeat, join_body, join_new, sync, sync_body


@pytest.fixture
def h(broker_harness: HarnessFactory) -> GroupHarness:
    harness = broker_harness(kind=GroupHarness)
    harness.create_topic("t", 6)
    return harness


def stored_keys(h: GroupHarness, partition: int) -> list[tuple[Any, bool]]:
    """(decoded key, is tombstone) of every record in one partition of __consumer_offsets."""
    plog = h.broker.replicas.partition_log(CONSUMER_OFFSETS, partition)
    data = plog.read(plog.log_start_offset, 1 << 24).read_bytes()
    out = []
    for pos, size in split_batches(data):
        for r in decode_batch(data[pos : pos + size])[1]:
            assert r.key is not None
            out.append((rec.decode_key(r.key), r.value is None))
    return out


def form_group(h: GroupHarness, group: str, n: int, version: int = 9) -> tuple[list[str], int]:
    """n members joined and synced (the first is the leader and gives partitions round-robin).

    As real clients do: each newcomer's JoinGroup starts a rebalance that the members before it
    join too (the newcomer goes first, so that the others wait for the new generation).
    """
    ids: list[str] = []
    joined: list[Any] = []
    for _ in range(n):
        new = join_new(h, group, version)
        tasks = [h.start(JOIN_GROUP, version, join_body(group, m)) for m in [new, *ids]]
        h.settle()
        assert all(t.done() for t in tasks)
        ids.append(new)
        joined = [t.result() for t in tasks[1:]] + [tasks[0].result()]
    assert all(j.error_code == 0 for j in joined), joined
    gen = joined[0].generation_id
    leader = joined[0].leader
    assert all(j.generation_id == gen and j.leader == leader for j in joined)
    plan = {m: encode_assignment({"t": [p for p in range(6) if p % n == i]}) for i, m in enumerate(ids)}
    synced = h.together(*(h.call_async(SYNC_GROUP, 5, sync_body(group, m, gen, plan if m == leader else None))
                          for m in ids))  # fmt: skip
    for m, s in zip(ids, synced, strict=True):
        assert s.error_code == 0
        assert s.assignment == plan[m]
    return ids, gen


# --- FindCoordinator ---------------------------------------------------------------------------


def test_find_coordinator_creates_consumer_offsets(h: GroupHarness) -> None:
    assert h.broker.metadata.topic(CONSUMER_OFFSETS) is None  # created on first need, as Kafka does
    r = h.call(FIND_COORDINATOR, 0, {"key": "g"})
    assert (r.error_code, r.node_id, r.host, r.port) == (0, 1, "127.0.0.1", 19092)
    t = h.broker.metadata.topic(CONSUMER_OFFSETS)
    assert t is not None and t.partitions == 3 and t.internal
    configs = h.call(
        DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": CONSUMER_OFFSETS,
                    "configuration_keys": ["cleanup.policy"],
                }
            ]
        },
    )
    assert configs.results[0].configs[0].value == "compact"
    md = h.call(METADATA, 12, {"topics": None})
    assert [x.is_internal for x in md.topics if x.name == CONSUMER_OFFSETS] == [True]


def test_find_coordinator_versions_and_key_types(h: GroupHarness) -> None:
    r = h.call(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert (r.error_code, r.error_message, r.node_id) == (0, None, 1)
    r = h.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in r.coordinators] == [
        ("a", 1, "127.0.0.1", 19092, 0),
        ("b", 1, "127.0.0.1", 19092, 0),
    ]
    txn = h.call(FIND_COORDINATOR, 6, {"key_type": 1, "coordinator_keys": ["tx"]}).coordinators[0]
    assert (txn.error_code, txn.node_id, txn.port) == (0, 1, 19092)  # this node coordinates transactions too
    assert h.call(FIND_COORDINATOR, 1, {"key": "tx", "key_type": 1}).node_id == 1
    share = h.call(FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": ["s"]}).coordinators[0]
    assert share.error_code == E.INVALID_REQUEST


def test_api_versions_advertise_the_group_apis(h: GroupHarness) -> None:
    keys = {k.api_key: (k.min_version, k.max_version) for k in h.call(API_VERSIONS, 3, {}).api_keys}
    assert keys[8] == (2, 10) and keys[9] == (1, 10) and keys[10] == (0, 6) and keys[11] == (0, 9)
    assert keys[12] == (0, 4) and keys[13] == (0, 5) and keys[14] == (0, 5) and keys[15] == (0, 6)
    assert keys[16] == (0, 5) and keys[42] == (0, 2) and keys[47] == (0, 0)
    assert keys[68] == (0, 1) and keys[69] == (0, 1)


# --- the rebalance protocol --------------------------------------------------------------------


def test_three_members_then_a_fourth_rebalances(h: GroupHarness) -> None:
    ids, gen = form_group(h, "g", 3)
    for m in ids:
        assert heartbeat(h, "g", m, gen) == 0
    # A fourth member: its JoinGroup waits until the three rejoin, which the heartbeats tell them to.
    d = join_new(h, "g")
    pending = h.start(JOIN_GROUP, 9, join_body("g", d))
    h.settle()
    assert not pending.done()
    assert [heartbeat(h, "g", m, gen) for m in ids] == [E.REBALANCE_IN_PROGRESS] * 3
    rejoined = h.together(*(h.call_async(JOIN_GROUP, 9, join_body("g", m)) for m in ids))
    h.settle()
    assert pending.done()
    everyone = [*rejoined, pending.result()]
    assert {j.generation_id for j in everyone} == {gen + 1}
    leaders = [j for j in everyone if j.members]
    assert len(leaders) == 1 and sorted(m.member_id for m in leaders[0].members) == sorted([*ids, d])


def test_join_waits_without_blocking_other_requests(h: GroupHarness) -> None:
    ids, _gen = form_group(h, "g", 1)
    newcomer = h.start(JOIN_GROUP, 9, join_body("g", join_new(h, "g")))
    h.settle()
    # While that JoinGroup waits for the leader to rejoin, everything else is answered.
    assert h.call(METADATA, 12, {"topics": None}).topics
    assert h.call(DESCRIBE_GROUPS, 5, {"groups": ["g"]}).groups[0].group_state == "PreparingRebalance"
    assert not newcomer.done()
    h.call(JOIN_GROUP, 9, join_body("g", ids[0]))
    h.settle()
    assert newcomer.result().error_code == 0


def test_session_timeout_removes_a_member_and_rebalances(h: GroupHarness) -> None:
    ids, gen = form_group(h, "g", 2)
    h.advance(6_000)
    assert heartbeat(h, "g", ids[0], gen) == 0
    h.advance(6_000)  # ids[1] has not been heard of for 12 s > its 10 s session: the timer removes it
    described = h.call(DESCRIBE_GROUPS, 5, {"groups": ["g"]}).groups[0]
    assert [m.member_id for m in described.members] == [ids[0]]
    assert described.group_state == "PreparingRebalance"
    assert heartbeat(h, "g", ids[1], gen) == E.UNKNOWN_MEMBER_ID
    assert heartbeat(h, "g", ids[0], gen) == E.REBALANCE_IN_PROGRESS
    j = h.call(JOIN_GROUP, 9, join_body("g", ids[0]))
    assert (j.error_code, j.generation_id, [m.member_id for m in j.members]) == (0, gen + 1, [ids[0]])


def test_rebalance_timeout_answers_the_waiting_join_through_the_timer(h: GroupHarness) -> None:
    ids, gen = form_group(h, "g", 2)
    waiting = h.start(JOIN_GROUP, 9, join_body("g", ids[0], rebalance=3_000))
    h.settle()
    assert not waiting.done()
    h.advance(3_500)
    h.settle()
    assert not waiting.done()  # the group's rebalance timeout is its members' longest: 10 s
    h.advance(7_000)  # ids[1] never rejoins: the join phase ends without it, from the timer alone
    h.settle()
    j = waiting.result()
    assert (j.error_code, j.generation_id, [m.member_id for m in j.members]) == (0, gen + 1, [ids[0]])


def test_initial_rebalance_delay_is_honoured(broker_harness: HarnessFactory) -> None:
    h = broker_harness({"group.initial.rebalance.delay.ms": "3000"}, kind=GroupHarness)
    first = h.start(JOIN_GROUP, 9, join_body("g", join_new(h, "g")))
    h.settle()
    assert not first.done()
    h.advance(3_000)
    h.settle()
    assert first.result().error_code == 0 and first.result().generation_id == 1


def test_old_join_versions(h: GroupHarness) -> None:
    # v0: no rebalance timeout and no MEMBER_ID_REQUIRED round; protocol_name is a plain string.
    body = join_body("g0")
    del body["rebalance_timeout_ms"], body["group_instance_id"]
    r = h.call(JOIN_GROUP, 0, body)
    assert (r.error_code, r.generation_id, r.protocol_name, r.leader == r.member_id) == (0, 1, "range", True)
    # v6: a failed join has protocol_name "" (not nullable below v7); v7 echoes protocol_type.
    bad = h.call(JOIN_GROUP, 6, join_body("g0", "nobody"))
    assert (bad.error_code, bad.protocol_name) == (E.UNKNOWN_MEMBER_ID, "")
    bad7 = h.call(JOIN_GROUP, 7, join_body("g0", "nobody"))
    assert (bad7.error_code, bad7.protocol_name, bad7.protocol_type) == (E.UNKNOWN_MEMBER_ID, None, None)
    again = h.call(JOIN_GROUP, 7, join_body("g0", r.member_id))
    assert (again.protocol_type, again.protocol_name) == ("consumer", "range")


def test_protocol_selection_and_inconsistent_protocols(h: GroupHarness) -> None:
    a = join_new(h, "g", protocols=("cooperative-sticky", "range"))
    b = join_new(h, "g", protocols=("range", "roundrobin"))
    alone = h.call(JOIN_GROUP, 9, join_body("g", a, protocols=("cooperative-sticky", "range")))
    assert alone.protocol_name == "cooperative-sticky"  # the first choice of the only member
    jb = h.start(JOIN_GROUP, 9, join_body("g", b, protocols=("range", "roundrobin")))
    ja = h.start(JOIN_GROUP, 9, join_body("g", a, protocols=("cooperative-sticky", "range")))
    h.settle()
    assert ja.result().protocol_name == jb.result().protocol_name == "range"  # the only one both support
    c = h.call(JOIN_GROUP, 9, join_body("g", protocols=("sticky",)))
    assert c.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_sync_group_v5_checks_protocol(h: GroupHarness) -> None:
    ids, gen = form_group(h, "g", 1)
    body = {**sync_body("g", ids[0], gen), "protocol_type": "consumer", "protocol_name": "roundrobin"}
    assert h.call(SYNC_GROUP, 5, body).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    ok = h.call(SYNC_GROUP, 5, {**body, "protocol_name": "range"})
    assert (ok.error_code, ok.protocol_type, ok.protocol_name) == (0, "consumer", "range")
    assert decode_assignment(ok.assignment) == {"t": [0, 1, 2, 3, 4, 5]}


def test_static_member_rejoin_skips_assignment_from_v9(h: GroupHarness) -> None:
    mid = h.call(JOIN_GROUP, 9, join_body("g", instance="i1")).member_id
    sync(h, "g", mid, 1, {mid: encode_assignment({"t": [0]})})
    again = h.call(JOIN_GROUP, 9, join_body("g", instance="i1"))  # restarted: new id, same place
    assert (again.error_code, again.skip_assignment, again.generation_id) == (0, True, 1)
    assert again.member_id != mid and len(again.members) == 1
    old = h.call(JOIN_GROUP, 8, join_body("g", instance="i1"))
    assert (old.error_code, old.members) == (0, [])  # below v9 the leader gets no member list instead
    # The v8 rejoin replaced it again: the id before is fenced.
    hb = h.call(HEARTBEAT, 3, {"group_id": "g", "generation_id": 1, "member_id": again.member_id,
                               "group_instance_id": "i1"})  # fmt: skip
    assert hb.error_code == E.FENCED_INSTANCE_ID


def test_leave_group_versions(h: GroupHarness) -> None:
    ids, gen = form_group(h, "g", 3)
    assert h.call(LEAVE_GROUP, 0, {"group_id": "g", "member_id": ids[0]}).error_code == 0
    assert h.call(LEAVE_GROUP, 2, {"group_id": "g", "member_id": ids[0]}).error_code == E.UNKNOWN_MEMBER_ID
    r = h.call(
        LEAVE_GROUP,
        5,
        {"group_id": "g", "members": [{"member_id": ids[1], "reason": "bye"}, {"member_id": "ghost"}]},
    )
    assert r.error_code == 0
    assert [(m.member_id, m.error_code) for m in r.members] == [(ids[1], 0), ("ghost", E.UNKNOWN_MEMBER_ID)]
    assert (
        h.call(LEAVE_GROUP, 3, {"group_id": "nope", "members": [{"member_id": "x"}]}).error_code
        == E.UNKNOWN_MEMBER_ID
    )
    # The one left is asked to rejoin, and is alone in the next generation.
    assert heartbeat(h, "g", ids[2], gen) == E.REBALANCE_IN_PROGRESS
    assert [m.member_id for m in h.call(JOIN_GROUP, 9, join_body("g", ids[2])).members] == [ids[2]]


# --- bad input ---------------------------------------------------------------------------------


def test_bad_input_gets_kafkas_errors_and_leaves_the_group_intact(h: GroupHarness) -> None:
    ids, gen = form_group(h, "g", 2)
    assert heartbeat(h, "g", "unknown-member", gen) == E.UNKNOWN_MEMBER_ID
    assert heartbeat(h, "g", ids[0], gen - 1) == E.ILLEGAL_GENERATION
    assert heartbeat(h, "g", ids[0], gen + 5) == E.ILLEGAL_GENERATION
    assert heartbeat(h, "nope", ids[0], gen) == E.UNKNOWN_MEMBER_ID
    assert sync(h, "g", "unknown-member", gen).error_code == E.UNKNOWN_MEMBER_ID
    assert sync(h, "g", ids[1], gen + 1).error_code == E.ILLEGAL_GENERATION
    assert h.call(JOIN_GROUP, 9, join_body("g", "unknown-member")).error_code == E.UNKNOWN_MEMBER_ID
    assert h.call(JOIN_GROUP, 9, join_body("", "")).error_code == E.INVALID_GROUP_ID
    assert h.call(JOIN_GROUP, 9, join_body("g", session=10)).error_code == E.INVALID_SESSION_TIMEOUT
    # None of that disturbed the group.
    assert [heartbeat(h, "g", m, gen) for m in ids] == [0, 0]
    g = h.call(DESCRIBE_GROUPS, 5, {"groups": ["g"]}).groups[0]
    assert (g.group_state, sorted(m.member_id for m in g.members)) == ("Stable", sorted(ids))


def test_heartbeat_for_a_group_it_left(h: GroupHarness) -> None:
    ids, gen = form_group(h, "g", 1)
    assert (
        h.call(LEAVE_GROUP, 4, {"group_id": "g", "members": [{"member_id": ids[0]}]}).members[0].error_code
        == 0
    )
    assert heartbeat(h, "g", ids[0], gen) == E.UNKNOWN_MEMBER_ID
    assert heartbeat(h, "g", ids[0], gen, version=0) == E.UNKNOWN_MEMBER_ID
    assert h.call(DESCRIBE_GROUPS, 5, {"groups": ["g"]}).groups[0].group_state == "Empty"


# --- describe, list, delete --------------------------------------------------------------------


def test_describe_groups(h: GroupHarness) -> None:
    ids, _gen = form_group(h, "g", 2)
    r = h.call(DESCRIBE_GROUPS, 5, {"groups": ["g", "missing"], "include_authorized_operations": True})
    g, missing = r.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    assert sorted(m.member_id for m in g.members) == sorted(ids)
    assert {m.client_id for m in g.members} == {"test"}
    assert all(decode_assignment(m.member_assignment)["t"] for m in g.members)
    assert g.authorized_operations == sum(1 << op for op in (3, 6, 8, 10, 11))
    assert (missing.error_code, missing.group_state, missing.members) == (0, "Dead", [])
    g6, missing6 = h.call(DESCRIBE_GROUPS, 6, {"groups": ["g", "missing"]}).groups  # KIP-1043
    assert (g6.error_code, g6.error_message, g6.group_state, len(g6.members)) == (0, None, "Stable", 2)
    assert (missing6.error_code, missing6.error_message) == (E.GROUP_ID_NOT_FOUND, "Group missing not found.")
    v0 = h.call(DESCRIBE_GROUPS, 0, {"groups": ["g"]}).groups[0]
    assert v0.group_state == "Stable" and len(v0.members) == 2
    assert h.call(DESCRIBE_GROUPS, 3, {"groups": ["g"]}).groups[0].authorized_operations == -(2**31)


def test_list_groups_with_filters(h: GroupHarness) -> None:
    form_group(h, "stable", 1)
    join_new(h, "other")
    ids, _ = form_group(h, "empty", 1)
    h.call(LEAVE_GROUP, 5, {"group_id": "empty", "members": [{"member_id": ids[0]}]})
    everything = h.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert everything.error_code == 0
    listed = {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in everything.groups}
    assert listed["stable"] == ("consumer", "Stable", "classic") and listed["empty"] == (
        "consumer",
        "Empty",
        "classic",
    )
    only = h.call(LIST_GROUPS, 4, {"states_filter": ["stable"]})
    assert [g.group_id for g in only.groups] == ["stable"]
    assert h.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]}).groups == []
    assert {g.group_id for g in h.call(LIST_GROUPS, 0, {}).groups} >= {"stable", "empty"}


def test_list_groups_does_not_create_consumer_offsets(h: GroupHarness) -> None:
    assert h.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}).groups == []
    assert h.call(DESCRIBE_GROUPS, 5, {"groups": ["x"]}).groups[0].group_state == "Dead"
    assert h.broker.metadata.topic(CONSUMER_OFFSETS) is None


def test_delete_groups(h: GroupHarness) -> None:
    _ids, _gen = form_group(h, "busy", 1)
    empty_ids, _ = form_group(h, "done", 1)
    h.call(LEAVE_GROUP, 5, {"group_id": "done", "members": [{"member_id": empty_ids[0]}]})
    r = h.call(DELETE_GROUPS, 2, {"groups_names": ["busy", "done", "never", ""]})
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("busy", E.NON_EMPTY_GROUP),
        ("done", 0),
        ("never", E.GROUP_ID_NOT_FOUND),
        ("", E.INVALID_GROUP_ID),
    ]
    assert h.call(DELETE_GROUPS, 0, {"groups_names": ["done"]}).results[0].error_code == E.GROUP_ID_NOT_FOUND
    assert h.call(DESCRIBE_GROUPS, 5, {"groups": ["done"]}).groups[0].group_state == "Dead"
    part = rec.offsets_partition("done", 3)
    assert (rec.GroupMetadataKey("done"), True) in stored_keys(h, part)  # the tombstone compaction keeps last


# --- __consumer_offsets and restarts -----------------------------------------------------------


def test_records_go_to_the_groups_partition(h: GroupHarness) -> None:
    groups = ["g-a", "g-b", "g-c", "g-d"]
    for g in groups:
        form_group(h, g, 1)
    for p in range(3):
        keyed = {rec.group_of(k) for k, _ in stored_keys(h, p)}
        assert keyed == {g for g in groups if rec.offsets_partition(g, 3) == p}


def test_group_survives_a_restart(h: GroupHarness) -> None:
    ids, gen = form_group(h, "g", 2)
    h.restart()
    g = h.call(DESCRIBE_GROUPS, 5, {"groups": ["g"]}).groups[0]
    assert (g.group_state, sorted(m.member_id for m in g.members)) == ("Stable", sorted(ids))
    assert [heartbeat(h, "g", m, gen) for m in ids] == [0, 0]
    s = sync(h, "g", ids[1], gen)
    assert (s.error_code, decode_assignment(s.assignment)) == (0, {"t": [1, 3, 5]})


def test_a_request_waiting_when_the_broker_closes_gets_not_coordinator(h: GroupHarness) -> None:
    """As Kafka unloads its shards at shutdown: a JoinGroup waiting in a group gets NOT_COORDINATOR."""
    ids, _gen = form_group(h, "g", 2)
    waiting = h.start(JOIN_GROUP, 9, join_body("g", ids[0]))
    h.settle()
    h.run(h.broker.group_service.close())
    h.settle()
    assert waiting.done() and waiting.result().error_code == E.NOT_COORDINATOR
    assert h.broker.group_service._waiting == {}


def test_abandoned_wait_leaves_no_future_behind(h: GroupHarness) -> None:
    ids, _gen = form_group(h, "g", 2)
    waiting = h.start(JOIN_GROUP, 9, join_body("g", ids[0]))
    h.settle()
    assert len(h.broker.group_service._waiting) == 1
    waiting.cancel()
    h.run(asyncio.sleep(0))
    assert h.broker.group_service._waiting == {}


def test_a_coordinator_no_longer_active_answers_coordinator_not_available(h: GroupHarness) -> None:
    """Kafka's GroupCoordinatorService, once not active (its broker shutting down), answers
    COORDINATOR_NOT_AVAILABLE, which members take as "find the coordinator again", keeping their
    ids; it does not close their connections (issue 26)."""
    member = join_new(h, "g")
    joined = h.call(JOIN_GROUP, 9, join_body("g", member))
    assert sync(h, "g", member, joined.generation_id, {member: b"a"}).error_code == 0
    h.run(h.broker.group_service.close())
    assert heartbeat(h, "g", member, joined.generation_id) == E.COORDINATOR_NOT_AVAILABLE
    assert h.call(JOIN_GROUP, 9, join_body("g", member)).error_code == E.COORDINATOR_NOT_AVAILABLE
