"""The share coordinator on one node: its inter-broker APIs, FindCoordinator key type 2, the
Persister the share-partition leaders use, and __share_group_state replayed after a restart."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcompat.coordinator.share_coordinator import ShareKey, state_partition
from kcompat.coordinator.share_coordinator.records import SNAPSHOT, UPDATE, decode
from kcompat.kafka_uuid import to_base64
from kcompat.server.share.persister import PersisterStateBatch, SharePartitionKey, ShareStateWrite
from kcompat.server.transactions.txn_log import read_state_records
from kcompat.storage.topic_store import SHARE_GROUP_STATE
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.delete_share_group_state import DELETE_SHARE_GROUP_STATE
from kcompat.wire.messages.describe_configs import DESCRIBE_CONFIGS
from kcompat.wire.messages.find_coordinator import FIND_COORDINATOR
from kcompat.wire.messages.initialize_share_group_state import INITIALIZE_SHARE_GROUP_STATE
from kcompat.wire.messages.read_share_group_state import READ_SHARE_GROUP_STATE
from kcompat.wire.messages.read_share_group_state_summary import READ_SHARE_GROUP_STATE_SUMMARY
from kcompat.wire.messages.write_share_group_state import WRITE_SHARE_GROUP_STATE
from tests.server.broker_harness import BrokerHarness, HarnessFactory

PROPS = {
    "share.coordinator.state.topic.num.partitions": "5",
    "share.coordinator.snapshot.update.records.per.snapshot": "2",
}


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    harness: BrokerHarness = broker_harness(PROPS)
    harness.run(harness.broker.metadata.create_topic("t", 3))
    return harness


def _topic_id(h: BrokerHarness) -> uuid.UUID:
    t = h.broker.metadata.topic("t")
    assert t is not None
    return t.topic_id


def _write(
    h: BrokerHarness,
    batches: list[tuple[int, int, int, int]],
    *,
    leader_epoch: int = 0,
    state_epoch: int = 0,
    start: int = 0,
    partition: int = 0,
    version: int = 1,
) -> Any:
    body = {
        "group_id": "g",
        "topics": [
            {
                "topic_id": _topic_id(h),
                "partitions": [
                    {
                        "partition": partition,
                        "state_epoch": state_epoch,
                        "leader_epoch": leader_epoch,
                        "start_offset": start,
                        "delivery_complete_count": 7,
                        "state_batches": [
                            {"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
                            for f, la, s, c in batches
                        ],
                    }
                ],
            }
        ],
    }
    return h.call(WRITE_SHARE_GROUP_STATE, version, body).results[0].partitions[0]


def _init(h: BrokerHarness, partition: int = 0, state_epoch: int = 0, start: int = 0) -> int:
    body = {
        "group_id": "g",
        "topics": [
            {
                "topic_id": _topic_id(h),
                "partitions": [{"partition": partition, "state_epoch": state_epoch, "start_offset": start}],
            }
        ],
    }
    return int(h.call(INITIALIZE_SHARE_GROUP_STATE, 0, body).results[0].partitions[0].error_code)


def _read(
    h: BrokerHarness, *, leader_epoch: int = 0, partition: int = 0, topic_id: uuid.UUID | None = None
) -> Any:
    body = {
        "group_id": "g",
        "topics": [
            {
                "topic_id": topic_id or _topic_id(h),
                "partitions": [{"partition": partition, "leader_epoch": leader_epoch}],
            }
        ],
    }
    return h.call(READ_SHARE_GROUP_STATE, 0, body).results[0].partitions[0]


def _batches(p: Any) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]


def test_find_coordinator_share_key(h: BrokerHarness) -> None:
    assert h.broker.metadata.topic(SHARE_GROUP_STATE) is None
    key = f"g:{to_base64(_topic_id(h))}:0"
    c = h.call(
        FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [key, "g:nope:0", "g:x"]}
    ).coordinators
    assert [(x.error_code, x.node_id) for x in c] == [
        (0, 1),
        (E.INVALID_REQUEST, -1),
        (E.INVALID_REQUEST, -1),
    ]
    t = h.broker.metadata.topic(SHARE_GROUP_STATE)
    assert t is not None and t.partitions == 5 and t.internal
    # before v6 there is no share key type
    assert (
        h.call(FIND_COORDINATOR, 5, {"key_type": 2, "coordinator_keys": [key]}).coordinators[0].error_code
        == E.INVALID_REQUEST
    )
    configs = h.call(
        DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": SHARE_GROUP_STATE,
                    "configuration_keys": ["cleanup.policy"],
                }
            ]
        },
    )
    assert configs.results[0].configs[0].value == "delete"  # KIP-932: ShareUpdate records share a key


def test_write_read_and_replay_after_restart(h: BrokerHarness) -> None:
    # the group coordinator initializes a share-partition before its leader reads or writes it
    assert _read(h).error_code == E.INVALID_REQUEST
    assert _write(h, [(0, 9, 0, 1)]).error_code == E.INVALID_REQUEST
    assert _init(h) == 0
    p = _read(h)
    assert (p.error_code, p.state_epoch, p.start_offset, p.state_batches) == (0, 0, 0, [])
    assert _write(h, [(0, 9, 0, 1)]).error_code == 0
    assert _write(h, [(3, 4, 2, 1)], start=2).error_code == 0
    assert _write(h, [(5, 5, 4, 5)], start=-1, version=0).error_code == 0
    assert _write(h, [(12, 14, 2, 1)], start=-1).error_code == 0  # start unchanged
    want = [(2, 2, 0, 1), (3, 4, 2, 1), (5, 5, 4, 5), (6, 9, 0, 1), (12, 14, 2, 1)]
    p = _read(h)
    assert (p.error_code, p.start_offset, _batches(p)) == (0, 2, want)
    # the records are Kafka's: initialize's snapshot (leader epoch 0), then a snapshot every 2
    # updates; all in the key's partition
    key = ShareKey("g", _topic_id(h), 0)
    part = state_partition(key, 5)
    records = read_state_records(h.broker.replicas.log_now(SHARE_GROUP_STATE, part))
    kinds = [int.from_bytes(k[:2], "big") for k, _ in records]
    assert kinds == [SNAPSHOT, UPDATE, UPDATE, SNAPSHOT, UPDATE]
    assert all(decode(k, v)[0] == key for k, v in records)
    h.restart()
    p = _read(h)
    assert (p.error_code, p.start_offset, _batches(p)) == (0, 2, want)
    s = h.call(
        READ_SHARE_GROUP_STATE_SUMMARY,
        1,
        {
            "group_id": "g",
            "topics": [{"topic_id": _topic_id(h), "partitions": [{"partition": 0, "leader_epoch": 0}]}],
        },
    )
    sp = s.results[0].partitions[0]
    assert (sp.error_code, sp.start_offset, sp.leader_epoch, sp.delivery_complete_count) == (0, 2, 0, 7)


def test_fencing_and_errors(h: BrokerHarness) -> None:
    assert _init(h) == 0
    assert _write(h, [(0, 0, 2, 1)], leader_epoch=3, state_epoch=1).error_code == 0
    r = _write(h, [(1, 1, 2, 1)], leader_epoch=2, state_epoch=1)
    assert r.error_code == E.FENCED_LEADER_EPOCH and r.error_message
    assert _write(h, [(1, 1, 2, 1)], leader_epoch=3, state_epoch=0).error_code == E.FENCED_STATE_EPOCH
    assert _read(h, leader_epoch=2).error_code == E.FENCED_LEADER_EPOCH
    assert _read(h, leader_epoch=4).error_code == 0  # a new leader: the old one is fenced from now on
    assert _write(h, [(1, 1, 2, 1)], leader_epoch=3, state_epoch=1).error_code == E.FENCED_LEADER_EPOCH
    # as Kafka 4.3: a partition that does not exist cannot be initialized, and reads and writes
    # of one find it uninitialized
    assert _init(h, partition=7) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert _write(h, [], partition=7).error_code == E.INVALID_REQUEST
    assert _read(h, topic_id=uuid.uuid4()).error_code == E.INVALID_REQUEST
    # initialize with a newer state epoch resets the state; an older one is fenced
    init = {
        "group_id": "g",
        "topics": [
            {"topic_id": _topic_id(h), "partitions": [{"partition": 0, "state_epoch": 2, "start_offset": 50}]}
        ],
    }
    assert h.call(INITIALIZE_SHARE_GROUP_STATE, 0, init).results[0].partitions[0].error_code == 0
    init["topics"][0]["partitions"][0]["state_epoch"] = 1
    assert (
        h.call(INITIALIZE_SHARE_GROUP_STATE, 0, init).results[0].partitions[0].error_code
        == E.FENCED_STATE_EPOCH
    )
    p = _read(h, leader_epoch=5)
    assert (p.state_epoch, p.start_offset, p.state_batches) == (2, 50, [])
    delete = {"group_id": "g", "topics": [{"topic_id": _topic_id(h), "partitions": [{"partition": 0}]}]}
    assert h.call(DELETE_SHARE_GROUP_STATE, 0, delete).results[0].partitions[0].error_code == 0
    assert _read(h).error_code == E.INVALID_REQUEST
    h.restart()
    assert _read(h).error_code == E.INVALID_REQUEST  # the tombstone is replayed too


def test_local_persister_round_trip(h: BrokerHarness) -> None:
    persister = h.broker.share_persister
    key = SharePartitionKey("grp", _topic_id(h).bytes, 1)
    assert h.run(persister.initialize_state(key, 0, 10)) == 0
    write = ShareStateWrite(
        0, 1, 10, 3, (PersisterStateBatch(10, 12, 2, 1), PersisterStateBatch(13, 13, 0, 2))
    )
    assert h.run(persister.write_state(key, write)) == 0
    h.restart()
    persister = h.broker.share_persister
    got = h.run(persister.read_state(key, 1))
    assert (got.error_code, got.state_epoch, got.start_offset, got.delivery_complete_count) == (0, 0, 10, 3)
    assert got.state_batches == (PersisterStateBatch(10, 12, 2, 1), PersisterStateBatch(13, 13, 0, 2))
    summary = h.run(persister.read_summary(key, 1))
    assert (summary.error_code, summary.leader_epoch, summary.start_offset) == (0, 1, 10)
    stale = ShareStateWrite(0, 0, 10, 3, ())
    assert h.run(persister.write_state(key, stale)) == E.FENCED_LEADER_EPOCH
    assert h.run(persister.delete_state(key)) == 0
    assert h.run(persister.read_state(key, 1)).error_code == E.INVALID_REQUEST


def test_cold_snapshots_let_the_prune_drop_old_records(broker_harness: HarnessFactory) -> None:
    now = [1_700_000_000.0]
    h: BrokerHarness = broker_harness(
        {
            "share.coordinator.state.topic.num.partitions": "1",
            "share.coordinator.cold.partition.snapshot.interval.ms": "60000",
        },
        clock=lambda: now[0],
    )
    h.run(h.broker.metadata.create_topic("t", 3))
    assert _init(h, 0) == 0 and _init(h, 1) == 0
    for i in range(30):  # share-partitions 0 and 1: a snapshot each, then updates
        assert _write(h, [(i, i, 2, 1)], start=-1, partition=i % 2).error_code == 0
    svc = h.broker.share_coordinator
    plog = h.broker.replicas.log_now(SHARE_GROUP_STATE, 0)
    h.run(svc.prune())
    assert plog.log_start_offset == 0  # each share-partition's only snapshot is at the start
    now[0] += 61
    h.run(svc.snapshot_cold(60000))
    assert plog.log_end_offset == 34  # a fresh snapshot of each
    h.run(svc.prune())
    assert plog.log_start_offset == 32
    want = [[(o, o, 2, 1) for o in range(p, 30, 2)] for p in (0, 1)]
    assert [_batches(_read(h, partition=p)) for p in (0, 1)] == want
    h.restart()
    plog = h.broker.replicas.log_now(SHARE_GROUP_STATE, 0)
    assert plog.log_start_offset == 32
    assert [_batches(_read(h, partition=p)) for p in (0, 1)] == want  # from the cold snapshots alone
