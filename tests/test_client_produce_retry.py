"""kcompat.client.records.produce sends again, after a metadata refresh, the partitions whose leader
was not known yet or has moved (as Kafka's producer does), and gives up on other errors at once.

The cluster here is a stand-in that answers as a Kafka broker does right after CreateTopics: first
NOT_LEADER_OR_FOLLOWER for a partition, then its leader takes it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kcompat.client import records
from kcompat.client.cluster import PartitionInfo, TopicInfo
from kcompat.client.errors import KafkaError
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.records import Record


def topic_info(leaders: dict[int, int]) -> TopicInfo:
    info = TopicInfo("t", None, False, 0)
    for p, leader in leaders.items():
        info.partitions[p] = PartitionInfo(p, leader, 0, [1], [1], [], 0)
    return info


class StandIn:
    """Broker 1 answers each Produce from `answers` (partition -> error codes in turn, then 0)."""

    timeout = 2.0

    def __init__(self, answers: dict[int, list[int]], leaders: list[dict[int, int]]) -> None:
        self.answers = answers
        self.leaders = leaders  # what each metadata refresh finds
        self.sent: list[list[int]] = []
        self.refreshes = 0

    def topic(self, name: str) -> TopicInfo:
        self.refreshes += 1
        return topic_info(self.leaders[min(self.refreshes, len(self.leaders)) - 1])

    def node(self, node_id: int) -> StandIn:
        return self

    def request(self, api: int, body: dict[str, Any]) -> tuple[int, Any]:
        parts = [d["index"] for d in body["topic_data"][0]["partition_data"]]
        self.sent.append(parts)
        out = []
        for p in parts:
            code = self.answers[p].pop(0) if self.answers.get(p) else 0
            out.append(SimpleNamespace(index=p, error_code=code, base_offset=-1 if code else 10 * p))
        return 0, SimpleNamespace(responses=[SimpleNamespace(partition_responses=out)])


def batch(n: int) -> list[Record]:
    return [Record(offset=i, timestamp=0, key=b"k", value=b"v", headers=()) for i in range(n)]


def test_a_partition_not_led_yet_is_sent_again_alone_after_a_refresh() -> None:
    cluster = StandIn({0: [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE]}, [{0: 1, 1: 1}])
    got = records.produce(cluster, topic_info({0: 1, 1: 1}), {0: batch(2), 1: batch(3)})  # type: ignore[arg-type]
    assert got == {0: 0, 1: 10}
    assert cluster.sent == [[0, 1], [0], [0]]  # partition 1 was written once
    assert cluster.refreshes == 2


def test_a_partition_without_a_leader_waits_for_one() -> None:
    cluster = StandIn({}, [{0: -1}, {0: 1}])
    assert records.produce(cluster, topic_info({0: -1}), {0: batch(1)}) == {0: 0}  # type: ignore[arg-type]
    assert cluster.sent == [[0]]


def test_other_errors_and_a_leader_that_never_comes_fail() -> None:
    cluster = StandIn({0: [ErrorCode.RECORD_LIST_TOO_LARGE]}, [{0: 1}])
    with pytest.raises(KafkaError) as e:
        records.produce(cluster, topic_info({0: 1}), {0: batch(1)})  # type: ignore[arg-type]
    assert e.value.code == ErrorCode.RECORD_LIST_TOO_LARGE and cluster.refreshes == 0
    cluster = StandIn({0: [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 100}, [{0: 1}])
    cluster.timeout = 0.5
    with pytest.raises(KafkaError) as e:
        records.produce(cluster, topic_info({0: 1}), {0: batch(1)})  # type: ignore[arg-type]
    assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER and 2 <= len(cluster.sent) <= 4
