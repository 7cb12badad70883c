"""ListOffsets, OffsetForLeaderEpoch, DeleteRecords, InitProducerId."""

from __future__ import annotations

from typing import Any

import pytest

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.delete_records import DELETE_RECORDS
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.init_producer_id import INIT_PRODUCER_ID
from kcompat.wire.messages.list_offsets import LIST_OFFSETS
from kcompat.wire.messages.offset_for_leader_epoch import OFFSET_FOR_LEADER_EPOCH
from kcompat.wire.messages.produce import PRODUCE
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    return broker_harness({"num.partitions": "1"})


def produce(h: BrokerHarness, records: bytes, topic: str = "t") -> int:
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    r = h.call(PRODUCE, 9, body).responses[0].partition_responses[0]
    assert r.error_code == 0
    return r.base_offset


def create(h: BrokerHarness, name: str) -> None:
    body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 100}
    assert h.call(CREATE_TOPICS, 7, body).topics[0].error_code == 0


def list_offset(h: BrokerHarness, ts: int, version: int = 7, topic: str = "t", **extra: Any) -> Any:
    body = {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": ts, **extra}]}]}  # fmt: skip
    return h.call(LIST_OFFSETS, version, body).topics[0].partitions[0]


def test_list_offsets_specs(h: BrokerHarness) -> None:
    produce(h, batch(b"a", b"b", ts=1000))  # offsets 0, 1 at 1000, 1001
    produce(h, batch(b"c", ts=5000))  # offset 2 at 5000
    produce(h, batch(b"d", ts=3000))  # offset 3 at 3000 (timestamps need not grow)
    latest = list_offset(h, -1)
    assert (latest.error_code, latest.offset, latest.timestamp, latest.leader_epoch) == (0, 4, -1, 0)
    assert list_offset(h, -2).offset == 0
    mx = list_offset(h, -3)
    assert (mx.offset, mx.timestamp) == (2, 5000)
    by_ts = list_offset(h, 1001)
    assert (by_ts.offset, by_ts.timestamp) == (1, 1001)
    assert (list_offset(h, 4000).offset, list_offset(h, 4000).timestamp) == (2, 5000)
    none = list_offset(h, 6000)
    assert (none.error_code, none.offset, none.timestamp) == (0, -1, -1)
    assert list_offset(h, -4, version=8).offset == 0
    assert list_offset(h, -5, version=9).offset == -1
    pending = list_offset(h, -6, version=11)  # KIP-1023: nothing is pending upload without remote storage
    assert (pending.error_code, pending.offset, pending.timestamp) == (0, -1, -1)


@pytest.mark.parametrize(("ts", "first"), [(-3, 7), (-4, 8), (-5, 9), (-6, 11)])
def test_list_offsets_sentinels_need_their_version(h: BrokerHarness, ts: int, first: int) -> None:
    produce(h, batch(b"a"))
    assert list_offset(h, ts, version=first - 1).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert list_offset(h, ts, version=first).error_code == 0


@pytest.mark.parametrize("version", range(1, 12))
def test_list_offsets_every_version(h: BrokerHarness, version: int) -> None:
    produce(h, batch(b"a"))
    r = list_offset(h, -1, version=version)
    assert (r.error_code, r.offset) == (0, 1)


def test_list_offsets_errors(h: BrokerHarness) -> None:
    produce(h, batch(b"a"))
    assert list_offset(h, -1, topic="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert list_offset(h, -1, current_leader_epoch=3).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    body = {
        "replica_id": -1,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "timestamp": -1},
                    {"partition_index": 0, "timestamp": -2},
                ],
            }
        ],
    }
    parts = h.call(LIST_OFFSETS, 5, body).topics[0].partitions
    assert [p.error_code for p in parts] == [ErrorCode.INVALID_REQUEST] * 2


def test_max_timestamp_of_an_empty_partition(h: BrokerHarness) -> None:
    create(h, "empty")
    r = list_offset(h, -3, topic="empty")
    assert (r.error_code, r.offset, r.timestamp) == (0, -1, -1)
    assert (list_offset(h, -1, topic="empty").offset, list_offset(h, -2, topic="empty").offset) == (0, 0)


def test_offset_for_leader_epoch(h: BrokerHarness) -> None:
    produce(h, batch(b"a", b"b"))

    def ask(epoch: int, current: int = -1, topic: str = "t") -> Any:
        body = {
            "replica_id": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [{"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}],
                }
            ],
        }
        return h.call(OFFSET_FOR_LEADER_EPOCH, 4, body).topics[0].partitions[0]

    r = ask(0, current=0)
    assert (r.error_code, r.leader_epoch, r.end_offset) == (0, 0, 2)
    r = ask(7)
    assert (r.leader_epoch, r.end_offset) == (-1, -1)
    assert ask(0, current=9).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert ask(0, topic="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_offset_for_leader_epoch_of_an_empty_partition(h: BrokerHarness) -> None:
    create(h, "empty")
    body = {
        "replica_id": -1,
        "topics": [{"topic": "empty", "partitions": [{"partition": 0, "leader_epoch": 0}]}],
    }
    r = h.call(OFFSET_FOR_LEADER_EPOCH, 2, body).topics[0].partitions[0]
    assert (r.error_code, r.leader_epoch, r.end_offset) == (0, 0, 0)


def test_delete_records_moves_the_log_start(h: BrokerHarness) -> None:
    for i in range(5):
        produce(h, batch(b"%d" % i))

    def delete(offset: int, topic: str = "t") -> Any:
        body = {
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}],
            "timeout_ms": 100,
        }
        return h.call(DELETE_RECORDS, 2, body).topics[0].partitions[0]

    r = delete(3)
    assert (r.error_code, r.low_watermark) == (0, 3)
    assert list_offset(h, -2).offset == 3
    fetch = {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "topics": [
            {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 1, "partition_max_bytes": 1000}]}
        ],
    }
    p = h.call(FETCH, 12, fetch).responses[0].partitions[0]
    assert (p.error_code, p.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, 3)
    assert delete(1).low_watermark == 3  # never backwards
    assert delete(9).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert delete(-1).low_watermark == 5  # -1: up to the high watermark
    assert delete(0, topic="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    h.restart()
    assert list_offset(h, -2).offset == 5


def init_pid(h: BrokerHarness, version: int = 4, **body: Any) -> Any:
    return h.call(
        INIT_PRODUCER_ID, version, {"transactional_id": None, "transaction_timeout_ms": 60000, **body}
    )


def test_init_producer_id(h: BrokerHarness) -> None:
    a, b = init_pid(h, 0), init_pid(h, 2)
    assert (a.error_code, a.producer_epoch, b.producer_epoch) == (0, 0, 0)
    assert a.producer_id != b.producer_id
    # A bump asked for by an idempotent producer (v3+): a new id with epoch 0, as Kafka answers it.
    bumped = init_pid(h, 3, producer_id=a.producer_id, producer_epoch=0)
    assert bumped.error_code == 0 and bumped.producer_epoch == 0
    assert bumped.producer_id not in (a.producer_id, b.producer_id)
    assert (
        init_pid(h, 3, producer_id=a.producer_id, producer_epoch=-1).error_code == ErrorCode.INVALID_REQUEST
    )
    assert init_pid(h, 5, producer_id=-1, producer_epoch=4).error_code == ErrorCode.INVALID_REQUEST
    stranger = init_pid(h, 5, producer_id=10**12, producer_epoch=3)
    assert stranger.error_code == 0 and stranger.producer_epoch == 0
    assert stranger.producer_id not in (10**12, a.producer_id, b.producer_id, bumped.producer_id)
    worn = init_pid(h, 5, producer_id=bumped.producer_id, producer_epoch=32766)
    assert worn.producer_id not in (bumped.producer_id, stranger.producer_id) and worn.producer_epoch == 0
    # Ids stay unique across a restart, bumps included.
    h.restart()
    after = init_pid(h, 5, producer_id=worn.producer_id, producer_epoch=0)
    assert after.error_code == 0 and after.producer_id > worn.producer_id and after.producer_epoch == 0
    txn = h.call(INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout_ms": 60000})
    assert txn.error_code == 0 and txn.producer_id > after.producer_id  # the transaction coordinator's
