"""Share groups through real request frames on an in-process Broker: ShareGroupHeartbeat,
ShareFetch and ShareAcknowledge with their share sessions, Kafka's error codes for bad input,
group config overrides (share.auto.offset.reset, share.isolation.level), lock expiry, ListGroups."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.alter_share_group_offsets import ALTER_SHARE_GROUP_OFFSETS
from kcompat.wire.messages.consumer_group_heartbeat import CONSUMER_GROUP_HEARTBEAT
from kcompat.wire.messages.delete_groups import DELETE_GROUPS
from kcompat.wire.messages.delete_share_group_offsets import DELETE_SHARE_GROUP_OFFSETS
from kcompat.wire.messages.describe_share_group_offsets import DESCRIBE_SHARE_GROUP_OFFSETS
from kcompat.wire.messages.join_group import JOIN_GROUP
from kcompat.wire.messages.list_groups import LIST_GROUPS
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.messages.share_acknowledge import SHARE_ACKNOWLEDGE
from kcompat.wire.messages.share_fetch import SHARE_FETCH
from kcompat.wire.messages.share_group_describe import SHARE_GROUP_DESCRIBE
from kcompat.wire.messages.share_group_heartbeat import SHARE_GROUP_HEARTBEAT
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch
from tests.server.test_transactions import add, end, init
from tests.server.test_transactions import produce as txn_produce

ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    from kcompat.wire.messages.create_topics import CREATE_TOPICS

    props = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
             "group.share.record.lock.duration.ms": "1000", "group.share.delivery.count.limit": "3"}  # fmt: skip
    harness = broker_harness(props)
    resp = harness.call(CREATE_TOPICS, 7, {"topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1,
                                                       "configs": []}], "timeout_ms": 1000})  # fmt: skip
    assert resp.topics[0].error_code == 0
    return harness


def overrides(h: BrokerHarness, values: Mapping[str, str]) -> None:
    h.broker.share_service.group_overrides = lambda group_id: values


def tid(h: BrokerHarness) -> uuid.UUID:
    t = h.broker.metadata.topic("t")
    assert t is not None
    return t.topic_id


def heartbeat(h: BrokerHarness, member: str, epoch: int, group: str = "g") -> Any:
    return h.call(SHARE_GROUP_HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": epoch,
                                             "subscribed_topic_names": ["t"] if epoch == 0 else None})  # fmt: skip


def produce(h: BrokerHarness, *values: bytes, partition: int = 0) -> None:
    body = {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": partition, "records": batch(*values)}]}]}  # fmt: skip
    assert h.call(PRODUCE, 9, body).responses[0].partition_responses[0].error_code == 0


def share_fetch(h: BrokerHarness, member: str, epoch: int, acks: list[tuple[int, int, list[int]]] | None = None,
                partition: int = 0, max_records: int = 100, group: str = "g", mode: int = 0) -> Any:  # fmt: skip
    batches = [
        {"first_offset": f, "last_offset": last, "acknowledge_types": types} for f, last, types in acks or []
    ]
    return h.call(SHARE_FETCH, 2, {"group_id": group, "member_id": member, "share_session_epoch": epoch,
                                   "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                                   "max_records": max_records, "batch_size": max_records, "share_acquire_mode": mode,
                                   "topics": [{"topic_id": tid(h), "partitions": [
                                       {"partition_index": partition, "acknowledgement_batches": batches}]}]})  # fmt: skip


def acknowledge(h: BrokerHarness, member: str, epoch: int, acks: list[tuple[int, int, list[int]]],
                partition: int = 0) -> Any:  # fmt: skip
    batches = [
        {"first_offset": f, "last_offset": last, "acknowledge_types": types} for f, last, types in acks
    ]
    return h.call(SHARE_ACKNOWLEDGE, 2, {"group_id": "g", "member_id": member, "share_session_epoch": epoch,
                                         "topics": [{"topic_id": tid(h), "partitions": [
                                             {"partition_index": partition, "acknowledgement_batches": batches}]}]})  # fmt: skip


def acquired(resp: Any) -> list[tuple[int, int, int]]:
    assert resp.error_code == 0, E.of(resp.error_code).name
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]  # fmt: skip


def ack_errors(resp: Any) -> list[int]:
    return [p.acknowledge_error_code for t in resp.responses for p in t.partitions]


def test_heartbeat_assigns_with_the_simple_assignor_and_describe_lists_members(h: BrokerHarness) -> None:
    # Epoch 1: a joined; epoch 2: its partitions' share state initialized, so they are assigned.
    a = heartbeat(h, "a", 0)
    assert a.error_code == 0 and a.member_epoch == 2
    assert sorted(a.assignment.topic_partitions[0].partitions) == [0, 1]
    b = heartbeat(h, "b", 0)
    assert b.member_epoch == 3 and len(b.assignment.topic_partitions[0].partitions) == 1
    assert (
        heartbeat(h, "a", 2).assignment.topic_partitions[0].partitions
        != b.assignment.topic_partitions[0].partitions
    )
    assert heartbeat(h, "nobody", 5).error_code == E.UNKNOWN_MEMBER_ID
    assert heartbeat(h, "", 0).error_code == E.INVALID_REQUEST
    assert heartbeat(h, "a", 2).error_code == E.FENCED_MEMBER_EPOCH
    d = h.call(SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["g", "none"], "include_authorized_operations": False})
    assert d.groups[0].group_state == "Stable" and {m.member_id for m in d.groups[0].members} == {"a", "b"}
    assert d.groups[0].members[0].assignment.topic_partitions[0].topic_name == "t"
    assert d.groups[1].error_code == E.GROUP_ID_NOT_FOUND
    listed = h.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]}).groups
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed] == [("g", "share", "share")]
    assert heartbeat(h, "a", -1).member_epoch == -1


def test_fetch_acknowledge_and_the_errors_of_bad_input(h: BrokerHarness) -> None:
    overrides(h, {"share.auto.offset.reset": "earliest"})
    produce(h, b"a", b"b", b"c", b"d")
    heartbeat(h, "a", 0)
    heartbeat(h, "b", 0)
    assert share_fetch(h, "a", 0, acks=[(0, 0, [ACCEPT])]).error_code == E.INVALID_REQUEST
    r = share_fetch(h, "a", 0)
    assert acquired(r) == [(0, 3, 1)] and r.acquisition_lock_timeout_ms == 1000
    assert r.responses[0].partitions[0].records  # the stored batch
    assert share_fetch(h, "a", 5).error_code == E.INVALID_SHARE_SESSION_EPOCH
    assert share_fetch(h, "b", 3).error_code == E.SHARE_SESSION_NOT_FOUND
    assert acknowledge(h, "a", 0, [(0, 0, [ACCEPT])]).error_code == E.INVALID_SHARE_SESSION_EPOCH
    # b opens a session but acknowledges what a holds: INVALID_RECORD_STATE, nothing changes
    assert acquired(share_fetch(h, "b", 0)) == []
    bad = acknowledge(h, "b", 1, [(0, 1, [ACCEPT])])
    assert [p.error_code for t in bad.responses for p in t.partitions] == [E.INVALID_RECORD_STATE]
    # a accepts 0, releases 1, rejects 2, per offset; 3 stays acquired
    ok = acknowledge(h, "a", 1, [(0, 2, [ACCEPT, RELEASE, REJECT])])
    assert [p.error_code for t in ok.responses for p in t.partitions] == [0]
    assert (
        acknowledge(h, "a", 2, [(0, 0, [ACCEPT])]).responses[0].partitions[0].error_code
        == E.INVALID_RECORD_STATE
    )
    # b gets the released record with its delivery count raised
    assert acquired(share_fetch(h, "b", 2)) == [(1, 1, 2)]
    # a closes its session: offset 3 comes back; a piggy-backed accept of b is answered in the fetch
    closing = share_fetch(h, "a", -1)
    assert closing.error_code == 0
    r = share_fetch(h, "b", 3, acks=[(1, 1, [ACCEPT])])
    assert ack_errors(r) == [0]
    assert acquired(r) == [(3, 3, 2)]
    sp = h.broker.share_service.partitions.partitions[("g", tid(h), 0)]
    assert sp.start_offset == 3


def test_max_records_is_soft_in_batch_optimized_mode_and_strict_in_record_limit(h: BrokerHarness) -> None:
    overrides(h, {"share.auto.offset.reset": "earliest"})
    produce(h, b"a", b"b", b"c", b"d", b"e")  # one batch, 0-4
    produce(h, b"f", b"g")  # 5-6
    heartbeat(h, "a", 0)
    heartbeat(h, "b", 0)
    r = share_fetch(h, "a", 0, max_records=2)  # batch_optimized (0, v1's only mode): the batch to its end
    assert acquired(r) == [(0, 4, 1)]
    stored = r.responses[0].partitions[0].records
    r = share_fetch(h, "b", 0, max_records=1, mode=1)  # record_limit: one record of the next batch
    assert acquired(r) == [(5, 5, 1)]
    assert len(r.responses[0].partitions[0].records) < len(stored)  # the 2-record batch alone


def test_lock_expiry_and_the_delivery_count_limit(h: BrokerHarness) -> None:
    overrides(h, {"share.auto.offset.reset": "earliest"})
    produce(h, b"x")
    heartbeat(h, "a", 0)
    assert acquired(share_fetch(h, "a", 0)) == [(0, 0, 1)]
    assert acquired(share_fetch(h, "a", 1)) == []  # still locked
    h.sleep(1.3)
    assert acquired(share_fetch(h, "a", 2)) == [(0, 0, 2)]
    acknowledge(h, "a", 3, [(0, 0, [RELEASE])])
    assert acquired(share_fetch(h, "a", 4)) == [(0, 0, 3)]
    acknowledge(h, "a", 5, [(0, 0, [RELEASE])])  # the third delivery was the last: archived
    assert acquired(share_fetch(h, "a", 6)) == []
    sp = h.broker.share_service.partitions.partitions[("g", tid(h), 0)]
    assert sp.start_offset == 1


def test_latest_starts_at_the_end_and_the_member_leaving_releases(h: BrokerHarness) -> None:
    produce(h, b"old")
    heartbeat(h, "a", 0)
    heartbeat(h, "b", 0)
    assert acquired(share_fetch(h, "a", 0)) == []
    produce(h, b"new1", b"new2")
    assert acquired(share_fetch(h, "a", 1)) == [(1, 2, 1)]
    heartbeat(h, "a", -1)  # leaves holding 1-2, as a client closing sends its leave first
    assert acquired(share_fetch(h, "b", 0)) == []  # still a's
    # its final acknowledgement still counts; the closing session releases the rest
    assert ack_errors(share_fetch(h, "a", -1, acks=[(1, 1, [ACCEPT])])) == [0]
    assert share_fetch(h, "a", 2).error_code == E.SHARE_SESSION_NOT_FOUND
    assert acquired(share_fetch(h, "b", 1)) == [(2, 2, 2)]


def test_a_member_whose_session_times_out_loses_its_records_and_session(h: BrokerHarness) -> None:
    overrides(h, {"share.auto.offset.reset": "earliest", "share.session.timeout.ms": "300"})
    produce(h, b"x", b"y")
    heartbeat(h, "a", 0)
    assert acquired(share_fetch(h, "a", 0)) == [(0, 1, 1)]
    heartbeat(h, "b", 0)
    h.sleep(0.2)
    heartbeat(h, "b", 3)  # b keeps heartbeating, a does not
    h.sleep(0.25)
    assert [m for m in h.broker.share_service.group("g").members] == ["b"]  # type: ignore[union-attr]
    assert share_fetch(h, "a", 1).error_code == E.SHARE_SESSION_NOT_FOUND
    assert acquired(share_fetch(h, "b", 0)) == [(0, 1, 2)]  # long before the 1 s lock ran out


def test_read_committed_skips_aborted_records(h: BrokerHarness) -> None:
    overrides(h, {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"})
    heartbeat(h, "a", 0)
    r = init(h)
    pid, epoch = r.producer_id, r.producer_epoch
    add(h, pid, epoch, [0])
    txn_produce(h, pid, epoch, 0, b"aborted1", b"aborted2")  # offsets 0-1
    assert acquired(share_fetch(h, "a", 0)) == []  # not below the LSO yet
    assert end(h, pid, epoch, commit=False) == 0  # marker at 2
    add(h, pid, epoch, [0])
    txn_produce(h, pid, epoch, 2, b"committed")  # offset 3
    assert end(h, pid, epoch, commit=True) == 0  # marker at 4
    produce(h, b"plain")  # offset 5
    assert acquired(share_fetch(h, "a", 1)) == [(3, 3, 1), (5, 5, 1)]
    sp = h.broker.share_service.partitions.partitions[("g", tid(h), 0)]
    assert sp.start_offset == 3  # the aborted records and the marker were archived


def test_unknown_topic_id_and_describe_share_group_offsets(h: BrokerHarness) -> None:
    overrides(h, {"share.auto.offset.reset": "earliest"})
    produce(h, b"a", b"b", b"c")
    heartbeat(h, "a", 0)
    r = h.call(SHARE_FETCH, 2, {"group_id": "g", "member_id": "a", "share_session_epoch": 0, "max_wait_ms": 0,
                                "max_bytes": 1 << 20, "max_records": 10, "topics": [
                                    {"topic_id": uuid.uuid4(), "partitions": [{"partition_index": 0}]}]})  # fmt: skip
    assert [p.error_code for t in r.responses for p in t.partitions] == [E.UNKNOWN_TOPIC_ID]
    assert acquired(share_fetch(h, "a", 1)) == [(0, 2, 1)]
    acknowledge(h, "a", 2, [(0, 0, [ACCEPT])])
    d = h.call(DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
        {"group_id": "g", "topics": None}, {"group_id": "none", "topics": None},
        {"group_id": "g", "topics": [{"topic_name": "t", "partitions": [0, 1]}]}]})  # fmt: skip
    rows = [(p.partition_index, p.start_offset, p.lag) for t in d.groups[0].topics for p in t.partitions]
    # offset 0 accepted: 1 and 2 still to go; partition 1 initialized (assigned), never fetched
    assert rows == [(0, 1, 2), (1, -1, -1)]
    assert d.groups[1].error_code == E.GROUP_ID_NOT_FOUND
    rows = [(p.partition_index, p.start_offset, p.lag) for t in d.groups[2].topics for p in t.partitions]
    assert rows == [(0, 1, 2), (1, -1, -1)]  # partition 1 was never fetched


def test_delete_groups_deletes_an_empty_share_group_and_its_state(h: BrokerHarness) -> None:
    overrides(h, {"share.auto.offset.reset": "earliest"})
    produce(h, b"a")
    heartbeat(h, "a", 0)
    assert acquired(share_fetch(h, "a", 0)) == [(0, 0, 1)]
    r = h.call(DELETE_GROUPS, 2, {"groups_names": ["g"]})
    assert [x.error_code for x in r.results] == [E.NON_EMPTY_GROUP]
    heartbeat(h, "a", -1)
    r = h.call(DELETE_GROUPS, 2, {"groups_names": ["g"]})
    assert [x.error_code for x in r.results] == [0]
    assert h.call(LIST_GROUPS, 5, {"types_filter": ["share"]}).groups == []
    # a new group of that name starts again from its reset point, nothing remembered
    heartbeat(h, "b", 0)
    assert acquired(share_fetch(h, "b", 0)) == [(0, 0, 1)]


def test_alter_and_delete_share_group_offsets(h: BrokerHarness) -> None:
    produce(h, b"a", b"b", b"c", b"d")
    # before any consumer: set the start, the group is made
    r = h.call(ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 2}]}]})  # fmt: skip
    assert r.error_code == 0 and [p.error_code for t in r.responses for p in t.partitions] == [0]
    heartbeat(h, "a", 0)
    assert acquired(share_fetch(h, "a", 0)) == [(2, 3, 1)]
    r = h.call(ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 0}]}]})  # fmt: skip
    assert r.error_code == E.NON_EMPTY_GROUP
    heartbeat(h, "a", -1)
    r = h.call(
        DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": [{"topic_name": "t"}, {"topic_name": "x"}]}
    )
    assert [t.error_code for t in r.responses] == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
    # the state is gone: latest again (the end of the log), nothing of 0-3 comes back
    heartbeat(h, "b", 0)
    assert acquired(share_fetch(h, "b", 0)) == []
    produce(h, b"e")
    assert acquired(share_fetch(h, "b", 1)) == [(4, 4, 1)]


def test_share_session_cache_limit_and_eviction_of_departed_members() -> None:
    from kcompat.server.share.share_sessions import ShareSession, ShareSessionCache

    cache = ShareSessionCache(2)
    assert isinstance(cache.open("g", "a", lambda g, m: True), ShareSession)
    assert isinstance(cache.open("g", "b", lambda g, m: True), ShareSession)
    assert cache.open("g", "c", lambda g, m: True) == E.SHARE_SESSION_LIMIT_REACHED
    assert isinstance(cache.open("g", "c", lambda g, m: m != "a"), ShareSession)  # a left its group
    assert cache.next("g", "a", 1) == E.SHARE_SESSION_NOT_FOUND
    s = cache.next("g", "b", 1)
    assert isinstance(s, ShareSession) and s.epoch == 2
    assert cache.next("g", "b", 1) == E.INVALID_SHARE_SESSION_EPOCH
    assert cache.next("g", "b", -1) is s and len(cache) == 1


def test_a_closed_connection_ends_only_the_share_sessions_it_opened() -> None:
    from kcompat.server.share.share_sessions import ShareSession, ShareSessionCache

    cache = ShareSessionCache(5)
    a = cache.open("g", "a", lambda g, m: True, "conn-1")
    cache.open("g", "b", lambda g, m: True, "conn-1")
    cache.open("g", "b", lambda g, m: True, "conn-2")  # b reopened from another connection
    assert isinstance(a, ShareSession)
    assert [(s.group_id, s.member_id) for s in cache.remove_connection("conn-1")] == [("g", "a")]
    assert cache.next("g", "a", 1) == E.SHARE_SESSION_NOT_FOUND
    assert isinstance(cache.next("g", "b", 1), ShareSession)
    assert cache.remove_connection("") == []  # a request with no connection (in-process) owns nothing


def test_a_share_group_id_is_refused_to_classic_and_consumer_members(h: BrokerHarness) -> None:
    heartbeat(h, "a", 0)
    j = h.call(JOIN_GROUP, 9, {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                               "member_id": "", "protocol_type": "consumer",
                               "protocols": [{"name": "range", "metadata": b""}]})  # fmt: skip
    assert j.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    c = h.call(CONSUMER_GROUP_HEARTBEAT, 1, {"group_id": "g", "member_id": "m1", "member_epoch": 0,
                                             "rebalance_timeout_ms": 10000, "subscribed_topic_names": ["t"],
                                             "topic_partitions": []})  # fmt: skip
    assert c.error_code == E.GROUP_ID_NOT_FOUND
    # and a consumer group's id is refused to share members
    c = h.call(CONSUMER_GROUP_HEARTBEAT, 1, {"group_id": "cg", "member_id": "m1", "member_epoch": 0,
                                             "rebalance_timeout_ms": 10000, "subscribed_topic_names": ["t"],
                                             "topic_partitions": []})  # fmt: skip
    assert c.error_code == 0
    assert heartbeat(h, "s", 0, group="cg").error_code == E.GROUP_ID_NOT_FOUND


def test_a_group_coordinated_elsewhere_is_forgotten_without_releasing(h: BrokerHarness) -> None:
    """Cluster mode, its __consumer_offsets partition led elsewhere now: the group goes (its members
    rejoin the new coordinator), but its members' records stay theirs until their locks run out."""
    overrides(h, {"share.auto.offset.reset": "earliest", "share.session.timeout.ms": "300"})
    produce(h, b"x", b"y")
    heartbeat(h, "a", 0)
    assert acquired(share_fetch(h, "a", 0)) == [(0, 1, 1)]
    h.broker.group_service.coordinator.unload(lambda group_id: True)  # the shard's onResignation
    h.sleep(0.4)  # past a's session: a coordinator would expire it and release its records
    assert h.broker.share_service.group("g") is None
    sp = h.broker.share_service.partitions.partitions[("g", tid(h), 0)]
    assert sp.acquired_count() == 2  # still a's: not released by an expiry here


def test_acknowledgements_after_a_reset_are_written_with_its_state_epoch(h: BrokerHarness) -> None:
    """A reset initializes the state again at the next state epoch; the share-partition, loaded
    after it, writes with that epoch. Writes at the old epoch were fenced (FENCED_STATE_EPOCH), so
    what was acknowledged after a reset was never saved and came back after a reload."""
    produce(h, b"a", b"b", b"c", b"d")
    for start in (0, 1):  # a new group (its state epoch 0 -> 1), then one with state (1 -> 2)
        r = h.call(ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": [
            {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": start}]}]})  # fmt: skip
        assert [p.error_code for t in r.responses for p in t.partitions] == [0]
        heartbeat(h, "a", 0)
        assert acquired(share_fetch(h, "a", 0)) == [(start, 3, 1)]
        r = acknowledge(h, "a", 1, [(start, 3, [ACCEPT])])
        assert r.error_code == 0
        assert [E.of(p.error_code).name for t in r.responses for p in t.partitions] == ["NONE"]
        d = h.call(DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
            {"group_id": "g", "topics": [{"topic_name": "t", "partitions": [0]}]}]})  # fmt: skip
        assert [(p.start_offset, p.lag) for t in d.groups[0].topics for p in t.partitions] == [(4, 0)]
        heartbeat(h, "a", -1)
    # loaded again from the share coordinator: nothing acknowledged comes back
    h.broker.share_service.partitions.partitions.clear()
    heartbeat(h, "b", 0)
    assert acquired(share_fetch(h, "b", 0)) == []


def _fail_one_write(h: BrokerHarness) -> None:
    persister = h.broker.share_service.partitions.persister
    write = persister.write_state

    async def fail_once(key: Any, w: Any) -> int:
        persister.write_state = write  # type: ignore[method-assign]
        return int(E.COORDINATOR_NOT_AVAILABLE)

    persister.write_state = fail_once  # type: ignore[method-assign]


def _stored_start(h: BrokerHarness) -> int:
    """The share-partition's start offset as the persister holds it."""
    from kcompat.server.share.persister import SharePartitionKey

    persister = h.broker.share_service.partitions.persister
    read = h.run(persister.read_state(SharePartitionKey("g", tid(h).bytes, 0), -1))
    assert read.error_code == 0
    return int(read.start_offset)


def _refused_acknowledgement(h: BrokerHarness, ack_type: int) -> None:
    """a holds records 0-1 and b is in the group too; a's acknowledgement of them (`ack_type`) is
    answered with the persister's refusal."""
    overrides(h, {"share.auto.offset.reset": "earliest"})
    produce(h, b"a", b"b")
    heartbeat(h, "a", 0)
    heartbeat(h, "b", 0)
    assert acquired(share_fetch(h, "a", 0)) == [(0, 1, 1)]
    _fail_one_write(h)
    r = acknowledge(h, "a", 1, [(0, 1, [ack_type])])
    assert [E.of(p.error_code).name for t in r.responses for p in t.partitions] == [
        "COORDINATOR_NOT_AVAILABLE"
    ]


def test_an_acknowledgement_the_persister_did_not_take_is_rolled_back(h: BrokerHarness) -> None:
    """The member is told its acknowledgement failed, and its records are its own again, as they
    were (Kafka's SharePartition rolls the transition back): neither acknowledged in memory only,
    nor handed to anyone else while its lock runs; acknowledged again, they are stored."""
    _refused_acknowledgement(h, ACCEPT)
    sp = h.broker.share_service.partitions.partitions[("g", tid(h), 0)]
    assert sp.start_offset == 0
    assert [(r.first, r.last, r.state.name, r.delivery_count, r.member) for r in sp.runs] == [
        (0, 1, "ACQUIRED", 1, "a")
    ]
    assert acquired(share_fetch(h, "b", 0)) == []  # still a's: its lock has not run out
    r = acknowledge(h, "a", 2, [(0, 1, [ACCEPT])])
    assert [E.of(p.error_code).name for t in r.responses for p in t.partitions] == ["NONE"]
    assert sp.start_offset == 2 and sp.runs == []
    assert _stored_start(h) == 2


def test_acknowledgements_in_flight_together_never_move_the_stored_start_offset_back(
    h: BrokerHarness,
) -> None:
    """Two members' acknowledgements of one share-partition awaiting the persister at once: each
    write is made when the one before it has been answered, so the start offsets written only
    grow (a write made beside another would stop at the other's records and carry an older start,
    and the share coordinator would move the start back over batches it had pruned)."""
    import asyncio

    overrides(h, {"share.auto.offset.reset": "earliest"})
    produce(h, b"0", b"1")
    produce(h, b"2", b"3")
    heartbeat(h, "a", 0)
    heartbeat(h, "b", 0)
    assert acquired(share_fetch(h, "a", 0, max_records=2, mode=1)) == [(0, 1, 1)]
    assert acquired(share_fetch(h, "b", 0, max_records=2, mode=1)) == [(2, 3, 1)]
    manager = h.broker.share_service.partitions
    persister = manager.persister
    write = persister.write_state
    starts: list[int] = []

    async def slow_write(key: Any, w: Any) -> int:
        starts.append(w.start_offset)
        await asyncio.sleep(0.05)
        return int(await write(key, w))

    persister.write_state = slow_write  # type: ignore[method-assign]
    t = h.broker.metadata.topic("t")
    assert t is not None

    async def both() -> list[E]:
        return list(
            await asyncio.gather(
                manager.acknowledge("g", "a", t, 0, [(0, 1, [ACCEPT])]),
                manager.acknowledge("g", "b", t, 0, [(2, 3, [ACCEPT])]),
            )
        )

    assert h.run(both()) == [E.NONE, E.NONE]
    assert starts == sorted(starts) and starts[-1] == 4, starts
    assert _stored_start(h) == 4


def test_an_acknowledgement_whose_request_is_cancelled_is_still_stored_and_settled(h: BrokerHarness) -> None:
    """The connection closes while the acknowledgement's write is in flight (the request task is
    cancelled): the write goes on and its transition is committed, not left open with its records
    neither acquirable nor expiring."""
    import asyncio

    overrides(h, {"share.auto.offset.reset": "earliest"})
    produce(h, b"a", b"b")
    heartbeat(h, "a", 0)
    assert acquired(share_fetch(h, "a", 0)) == [(0, 1, 1)]
    manager = h.broker.share_service.partitions
    persister = manager.persister
    write = persister.write_state

    async def slow_write(key: Any, w: Any) -> int:
        await asyncio.sleep(0.05)
        return int(await write(key, w))

    persister.write_state = slow_write  # type: ignore[method-assign]
    t = h.broker.metadata.topic("t")
    assert t is not None

    async def cancelled() -> None:
        task = asyncio.ensure_future(manager.acknowledge("g", "a", t, 0, [(0, 1, [ACCEPT])]))
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.sleep(0.1)
        assert task.cancelled()

    h.run(cancelled())
    sp = manager.partitions[("g", tid(h), 0)]
    assert sp.start_offset == 2 and sp.runs == []
    assert _stored_start(h) == 2


def test_a_rolled_back_acknowledgement_keeps_the_delivery_count_when_the_lock_runs_out(
    h: BrokerHarness,
) -> None:
    """After the rollback the member's lock still runs: when it runs out the records come again,
    counted from their first delivery (a reload from the persister, which never saw that delivery,
    would count from 1 again and let a poison record past share.delivery.count.limit)."""
    _refused_acknowledgement(h, RELEASE)
    assert acquired(share_fetch(h, "b", 0)) == []  # the release was not stored: still a's
    h.sleep(1.3)  # the 1 s lock runs out
    assert acquired(share_fetch(h, "b", 1)) == [(0, 1, 2)]
