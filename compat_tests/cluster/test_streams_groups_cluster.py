"""Cluster mode, streams groups (KIP-1071): three kcompat brokers under one Kafka 4.3.1 controller
formatted with Kafka's defaults (streams.version=1). Kafka Streams 4.3.1 (StreamsGroupApp.java,
`group.protocol=streams`, exactly_once_v2) runs against them: the group's coordinator is the
leader of its `__consumer_offsets` partition, the internal topics (RF 3) are created through the
controller, and the output is exactly each word's running counts. The slow round kills -9 the
coordinator's broker mid-stream: another broker takes the group over from the replicated records
and the output stays exact (nothing lost, nothing twice).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from support import ROOT

from compat_tests.cluster.test_group_coordinator import Cluster as GroupCluster
from compat_tests.groups_members import compile_java
from compat_tests.test_streams_groups import (
    PARTITIONS,
    STREAMS_JARS,
    App,
    Output,
    expected_output,
    labels,
    produce_lines,
)
from kcompat.testing import wait_until
from kcompat.testing_cluster import ControllerQuorum
from kcompat.wire.messages.find_coordinator import FIND_COORDINATOR

pytestmark = pytest.mark.timeout(420)

BROKER_IDS = (1, 2, 3)


class Cluster(GroupCluster):
    SETTINGS: ClassVar[dict[str, str]] = {
        **GroupCluster.SETTINGS,
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "transaction.state.log.num.partitions": "3",
    }

    def coordinator(self, group: str) -> int:
        def got() -> int | None:
            for b in self.live():
                r: Any = self.call(b, FIND_COORDINATOR.key, 4, {"key_type": 0, "coordinator_keys": [group]})
                c = r.coordinators[0]
                if c.error_code == 0 and c.node_id in self.live_ids():
                    return int(c.node_id)
            return None

        return wait_until(got, f"the coordinator of {group}", timeout=40)  # type: ignore[return-value]


@pytest.fixture(scope="module")
def cluster(kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(kraft_quorum, tmp_path_factory.mktemp("streams-cluster"))
    with c.running(BROKER_IDS):
        yield c


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_java(
        tmp_path_factory.mktemp("streams-classes"),
        STREAMS_JARS,
        ROOT / "compat_tests" / "java" / "StreamsGroupApp.java",
    )


def topics(cluster: Cluster, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic(n, PARTITIONS, 3) for n in names]).values():
        f.result(30)
    for n in names:
        cluster.leaders(n, PARTITIONS)


def run(cluster: Cluster, classes: Path, tmp_path: Path, app_id: str, kill: bool) -> None:
    lines, table, out = f"{app_id}-lines", f"{app_id}-labels", f"{app_id}-out"
    topics(cluster, lines, table, out)
    bs = cluster.bootstrap
    labels(bs, table)
    counts = produce_lines(bs, lines, 300, seed=5)
    output = Output(bs, out)
    app = App(classes, [bs, app_id, lines, table, out, str(tmp_path / "state"), "0", "3"])
    try:
        app.wait_running(120)
        output.wait("the output", expected_output(counts), 120)
        for name in (f"{app_id}-words-repartition", f"{app_id}-counts-changelog"):
            assert len(cluster.leaders(name, PARTITIONS)) == PARTITIONS
        if kill:
            coordinator = cluster.coordinator(app_id)
            more = produce_lines(bs, lines, 300, seed=6)
            counts += more
            time.sleep(0.5)  # some of it in flight
            cluster.brokers[coordinator].kill()
            assert cluster.coordinator(app_id) != coordinator
            output.wait("the output after the kill", expected_output(counts), 180)
        assert all(e.get("error") is None for e in app.events()), app.out[-30:]
    finally:
        output.close()
        app.stop()
        cluster.restart_stopped()


def test_streams_app_on_a_kcompat_cluster(cluster: Cluster, classes: Path, tmp_path: Path) -> None:
    run(cluster, classes, tmp_path, "cl-streams", kill=False)


@pytest.mark.slow
def test_exactly_once_through_a_kill9_of_the_coordinator(
    cluster: Cluster, classes: Path, tmp_path: Path
) -> None:
    run(cluster, classes, tmp_path, "cl-kill", kill=True)
