"""Cluster mode, the transaction coordinator's state (steps 1-2 of transactions in a cluster): the
coordinator of a transactional id is the leader of its `__transaction_state` partition, created
through the controller (RF 3 here) on first need; it loads that partition on election and answers
an InitProducerId only once its record is replicated, so after kill -9 of the coordinator's broker
the next leader serves the same producer id (the epoch bumped by the next InitProducerId). Other
brokers answer NOT_COORDINATOR, and FindCoordinator key type 1 names the partition's leader from any
broker. Three kcompat brokers under one Kafka 4.3.1 controller.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import cluster_broker

from compat_tests.crash.wire_client import WireClient
from kcompat.coordinator.transaction.log_records import transaction_partition
from kcompat.testing import Broker, wait_until
from kcompat.testing_cluster import HOST, ControllerQuorum
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.find_coordinator import FIND_COORDINATOR
from kcompat.wire.messages.init_producer_id import INIT_PRODUCER_ID
from kcompat.wire.messages.metadata import METADATA

BROKER_IDS = (1, 2, 3)
TXN_PARTITIONS = 3
TXN_ID = "cluster-tx"


def call(b: Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    client = WireClient(HOST, b.port)
    try:
        return client.call(api_key, version, body)
    finally:
        client.close()


def init(b: Broker) -> Any:
    return call(b, INIT_PRODUCER_ID.key, 4, {"transactional_id": TXN_ID, "transaction_timeout_ms": 60_000,
                                             "producer_id": -1, "producer_epoch": -1})  # fmt: skip


@pytest.fixture(scope="module")
def brokers(
    kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[int, Broker]]:
    root: Path = tmp_path_factory.mktemp("txn")
    made: dict[int, Broker] = {}
    try:
        for node_id in BROKER_IDS:
            kraft_quorum.format_broker(root / f"data-{node_id}", node_id)
            made[node_id] = b = cluster_broker(kraft_quorum, root, node_id, **{
                "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
                "transaction.state.log.replication.factor": "3",
                "transaction.state.log.min.isr": "2",
                "replica.fetch.backoff.ms": "200",
            })  # fmt: skip
            b.start()
        for b in made.values():
            wait_until(lambda b=b: "RECOVERY -> RUNNING" in b.logs(), "brokers unfenced", timeout=40)
        yield made
    finally:
        for b in made.values():
            if b.running:
                b.stop()


def leader_of_state(brokers: dict[int, Broker], exclude: int | None = None) -> int:
    """The live leader of TXN_ID's __transaction_state partition, from Metadata (RF 3 asserted)."""
    p = transaction_partition(TXN_ID, TXN_PARTITIONS)
    live = {i for i, b in brokers.items() if b.running}

    def got() -> int | None:
        for b in (b for b in brokers.values() if b.running):
            r = call(b, METADATA.key, 12, {"topics": [{"name": "__transaction_state", "topic_id": uuid.UUID(int=0)}],
                                           "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})  # fmt: skip
            t = r.topics[0]
            if t.error_code or len(t.partitions) != TXN_PARTITIONS:
                continue
            part = next(x for x in t.partitions if x.partition_index == p)
            assert len(part.replica_nodes) == 3
            if part.leader_id in live and part.leader_id != exclude:
                return int(part.leader_id)
        return None

    return int(wait_until(got, "a live leader of the transactional id's partition", timeout=40))


def test_txn_state_follows_leadership_and_survives_kill_of_the_coordinator(
    brokers: dict[int, Broker],
) -> None:
    # The first need creates __transaction_state through the controller: COORDINATOR_NOT_AVAILABLE meanwhile.
    assert init(brokers[1]).error_code in (E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.NONE)
    leader = leader_of_state(brokers)
    others = [b for i, b in brokers.items() if i != leader]
    first = wait_until(
        lambda: (r := init(brokers[leader])).error_code == 0 and r, "InitProducerId at the leader", timeout=40
    )
    assert first.producer_epoch == 0
    for b in others:
        assert init(b).error_code == E.NOT_COORDINATOR
    for b in brokers.values():  # FindCoordinator for transactions: the partition's leader, from any broker
        r = call(b, FIND_COORDINATOR.key, 4, {"key_type": 1, "coordinator_keys": [TXN_ID]})
        assert (r.coordinators[0].error_code, r.coordinators[0].node_id) == (E.NONE, leader)

    # kill -9 of the coordinator's broker: the next leader loads the partition and knows the id.
    brokers[leader].kill()
    successor = leader_of_state(brokers, exclude=leader)
    again = wait_until(
        lambda: (r := init(brokers[successor])).error_code == 0 and r,
        "InitProducerId after failover",
        timeout=40,
    )
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
