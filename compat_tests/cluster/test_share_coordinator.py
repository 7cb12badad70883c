"""Cluster mode, the share coordinator: three kcompat brokers under one Kafka 4.3.1 controller,
`__share_group_state` with RF=3 and min.insync.replicas=2. The coordinator of a share-partition's
state is the leader of its state partition (FindCoordinator key type 2); a write there is answered
once replicated, so when that broker is killed -9 the new leader loads the partition and every
answered write reads back. A broker that does not lead the partition answers NOT_COORDINATOR.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from compat_tests.cluster.test_group_coordinator import Cluster
from kcompat.coordinator.share_coordinator import ShareKey, state_partition
from kcompat.kafka_uuid import to_base64
from kcompat.testing import wait_until
from kcompat.testing_cluster import ControllerQuorum
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.find_coordinator import FIND_COORDINATOR
from kcompat.wire.messages.initialize_share_group_state import INITIALIZE_SHARE_GROUP_STATE
from kcompat.wire.messages.read_share_group_state import READ_SHARE_GROUP_STATE
from kcompat.wire.messages.write_share_group_state import WRITE_SHARE_GROUP_STATE

pytestmark = pytest.mark.timeout(180)

BROKER_IDS = (1, 2, 3)
STATE_PARTITIONS = 3
ACKNOWLEDGED = 2


class ShareCluster(Cluster):
    SETTINGS: ClassVar[dict[str, str]] = {
        **Cluster.SETTINGS,
        "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
        "share.coordinator.state.topic.replication.factor": "3",
        "share.coordinator.state.topic.min.isr": "2",
        "share.coordinator.snapshot.update.records.per.snapshot": "3",
    }

    def share_coordinator(self, key: str) -> int:
        def got() -> int | None:
            for b in self.live():
                r: Any = self.call(b, FIND_COORDINATOR.key, 6, {"key_type": 2, "coordinator_keys": [key]})
                c = r.coordinators[0]
                if c.error_code == 0 and c.node_id in self.live_ids():
                    return int(c.node_id)
            return None

        return wait_until(got, f"the share coordinator of {key}", timeout=40)  # type: ignore[return-value]


@pytest.fixture(scope="module")
def cluster(
    kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ShareCluster]:
    c = ShareCluster(kraft_quorum, tmp_path_factory.mktemp("share"))
    with c.running(BROKER_IDS):
        yield c


def _body(group: str, topic_id: uuid.UUID, **fields: Any) -> dict[str, Any]:
    return {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, **fields}]}]}


def _write(
    cluster: ShareCluster, node: int, group: str, topic_id: uuid.UUID, i: int, leader_epoch: int
) -> int:
    body = _body(
        group,
        topic_id,
        state_epoch=0,
        leader_epoch=leader_epoch,
        start_offset=0,
        delivery_complete_count=i + 1,
        state_batches=[
            {"first_offset": i, "last_offset": i, "delivery_state": ACKNOWLEDGED, "delivery_count": 1}
        ],
    )
    r: Any = cluster.call(cluster.brokers[node], WRITE_SHARE_GROUP_STATE.key, 1, body)
    return int(r.results[0].partitions[0].error_code)


def _read(cluster: ShareCluster, node: int, group: str, topic_id: uuid.UUID, leader_epoch: int) -> Any:
    r: Any = cluster.call(
        cluster.brokers[node],
        READ_SHARE_GROUP_STATE.key,
        0,
        _body(group, topic_id, leader_epoch=leader_epoch),
    )
    return r.results[0].partitions[0]


def test_state_moves_with_the_state_partitions_leadership(cluster: ShareCluster) -> None:
    topic_id = cluster.create_topic("share-data", 1, 3, {})
    group = "queue-1"
    key = f"{group}:{to_base64(topic_id)}:0"
    coordinator = cluster.share_coordinator(key)  # creates __share_group_state through the controller
    leaders = cluster.leaders("__share_group_state", STATE_PARTITIONS)
    assert leaders[state_partition(ShareKey(group, topic_id, 0), STATE_PARTITIONS)] == coordinator
    init = _body(group, topic_id, state_epoch=0, start_offset=0)

    def initialized() -> bool:
        r: Any = cluster.call(cluster.brokers[coordinator], INITIALIZE_SHARE_GROUP_STATE.key, 0, init)
        return bool(r.results[0].partitions[0].error_code == 0)

    wait_until(initialized, "the shard loaded", timeout=30)  # as the group coordinator does first
    assert _write(cluster, coordinator, group, topic_id, 0, 1) == 0
    for i in range(1, 10):  # snapshots and updates, each answered once replicated
        assert _write(cluster, coordinator, group, topic_id, i, 1) == 0
    other = next(n for n in BROKER_IDS if n != coordinator)
    assert _write(cluster, other, group, topic_id, 10, 1) == E.NOT_COORDINATOR
    cluster.brokers[coordinator].kill()
    try:
        successor = cluster.share_coordinator(key)
        assert successor != coordinator

        def loaded() -> Any:
            p = _read(cluster, successor, group, topic_id, 2)
            return p if p.error_code == 0 else None

        p = wait_until(loaded, "the new coordinator's state", timeout=40)
        got = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]
        assert (p.start_offset, got) == (0, [(0, 9, ACKNOWLEDGED, 1)])
        # the old share-partition leader (epoch 1) is fenced by the new one's read (epoch 2)
        assert _write(cluster, successor, group, topic_id, 10, 1) == E.FENCED_LEADER_EPOCH
        assert _write(cluster, successor, group, topic_id, 10, 2) == 0
    finally:
        cluster.brokers[coordinator].start()  # same data dir, already formatted
