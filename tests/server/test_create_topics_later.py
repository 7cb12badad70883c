"""CreateTopics answers once the topics are recorded, as Kafka's controller answers once its records
are committed: the partition logs are made after the answer, in a worker thread (a partition used
first is made then), and a topic deleted or a broker stopped before that leaves nothing half-made."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.delete_topics import DELETE_TOPICS
from tests.server.broker_harness import BrokerHarness, HarnessFactory


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    return broker_harness()


def create(h: BrokerHarness, names: list[str], partitions: int) -> None:
    topics = [
        {"name": n, "num_partitions": partitions, "replication_factor": -1, "configs": []} for n in names
    ]
    r = h.call(CREATE_TOPICS, 7, {"topics": topics, "timeout_ms": 100, "validate_only": False}).topics
    assert [t.error_code for t in r] == [0] * len(names)


def dirs(h: BrokerHarness, prefix: str) -> set[str]:
    return {d.name for d in Path(h.props["log.dirs"]).iterdir() if d.name.startswith(prefix)}


def settle(h: BrokerHarness) -> None:
    """Run the loop until the logs queued for creation are made."""
    creator = h.broker.replicas._creator
    if creator is not None:
        h.run(creator)


def test_answered_before_the_logs_are_made_and_made_after(h: BrokerHarness) -> None:
    lock = h.broker.replicas.maintenance_lock  # held: the creation cannot start before we let it
    h.run(lock.acquire())
    create(h, ["a", "b"], 20)
    assert dirs(h, "a-") | dirs(h, "b-") == set()  # the answer did not wait for 40 directories
    lock.release()
    settle(h)
    assert dirs(h, "a-") | dirs(h, "b-") == {f"{t}-{p}" for t in "ab" for p in range(20)}


def test_a_partition_used_before_its_turn_is_made_then(h: BrokerHarness) -> None:
    lock = h.broker.replicas.maintenance_lock
    h.run(lock.acquire())
    create(h, ["c"], 10)
    plog = h.broker.replicas.partition_log("c", 7)
    assert dirs(h, "c-") == {"c-7"}
    lock.release()
    settle(h)
    assert h.broker.replicas.partition_log("c", 7) is plog
    assert len(dirs(h, "c-")) == 10


def test_a_topic_deleted_before_its_turn_leaves_no_directory(h: BrokerHarness) -> None:
    create(h, ["d"], 10)
    r = h.call(DELETE_TOPICS, 5, {"topic_names": ["d"], "timeout_ms": 100}).responses
    assert r[0].error_code == 0
    settle(h)
    assert dirs(h, "d-") == set()
    create(h, ["d"], 3)  # the same name again: the new topic's logs only
    settle(h)
    assert dirs(h, "d-") == {"d-0", "d-1", "d-2"}


def test_a_stop_before_their_turn_leaves_them_to_the_next_start(h: BrokerHarness) -> None:
    create(h, ["e"], 10)
    h.restart()
    assert len(dirs(h, "e-")) == 10
    assert h.broker.replicas._pending == 0
