"""Leader discovery under a three-voter Kafka quorum: the broker is pointed first at controllers
that are not the Raft leader, so its registration meets NOT_CONTROLLER and its metadata Fetch meets
NOT_LEADER_OR_FOLLOWER with CurrentLeader/NodeEndpoints; it must still register, be unfenced and
follow the metadata log."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from compat_tests.conftest import kafka_tool
from kcompat.testing import Broker
from kcompat.testing_cluster import ControllerQuorum

BROKER_ID = 7


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def quorum_status(quorum: ControllerQuorum) -> dict[str, str]:
    out = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", quorum.bootstrap_servers,
                     "describe", "--status").stdout  # fmt: skip
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)}


def test_broker_finds_the_leader_of_three_controllers(kraft_quorum_3: ControllerQuorum, tmp_path: Path) -> None:
    leader_id = int(quorum_status(kraft_quorum_3)["LeaderId"])
    ordered = sorted(kraft_quorum_3.controllers, key=lambda c: c.node_id == leader_id)  # the leader last
    assert ordered[0].node_id != leader_id
    broker = Broker(
        tmp_path / "data",
        tmp_path / "kcompat.log",
        overrides={
            "process.roles": "broker",
            "node.id": str(BROKER_ID),
            "cluster.id": kraft_quorum_3.cluster_id,
            "controller.quorum.bootstrap.servers": ",".join(c.endpoint for c in ordered),
            "broker.heartbeat.interval.ms": "500",
        },
    )
    broker.start()
    try:
        wait_for(lambda: "RECOVERY -> RUNNING" in broker.log_path.read_text(), "the broker to be unfenced")
        # The heartbeat answer unfences before the observer has fetched the UnfenceBrokerRecord: wait for it.
        wait_for(lambda: f"metadata: broker {BROKER_ID} is unfenced" in broker.log_path.read_text(), "the unfencing record")
        log_text = broker.log_path.read_text()
        assert f"broker {BROKER_ID} registration: NOT_CONTROLLER from {ordered[0].endpoint}" in log_text
        status = quorum_status(kraft_quorum_3)
        assert f'"id": {BROKER_ID}' in status["CurrentObservers"], status
    finally:
        broker.stop()
