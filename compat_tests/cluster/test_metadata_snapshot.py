"""A broker that joins after the controller has written a metadata snapshot is pointed at it
(Fetch answers with SnapshotId) and loads it with FetchSnapshot before following the log."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import ClusterBrokerFactory

from compat_tests.crash.wire_client import WireClient
from kcompat.testing import wait_until
from kcompat.testing_cluster import HOST, ControllerQuorum

BROKER_ID = 4
EARLY_ID = 5
BOOTSTRAP_SNAPSHOT = "00000000000000000000-0000000000.checkpoint"


@pytest.fixture(scope="module")
def snapshotting_quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerQuorum]:
    """One controller that writes a snapshot every second (Kafka's default is every hour)."""
    with ControllerQuorum(tmp_path_factory.mktemp("quorum-snap"),
                          properties={"metadata.log.max.snapshot.interval.ms": "1000"}) as quorum:  # fmt: skip
        yield quorum


def snapshots(quorum: ControllerQuorum) -> list[Path]:
    folder = quorum.controllers[0].log_dir / "__cluster_metadata-0"
    return [p for p in folder.glob("*.checkpoint") if p.name != BOOTSTRAP_SNAPSHOT]


def test_late_broker_loads_the_snapshot(
    snapshotting_quorum: ControllerQuorum, cluster_broker_factory: ClusterBrokerFactory
) -> None:
    early = cluster_broker_factory(snapshotting_quorum, EARLY_ID)
    early.start()
    try:
        wait_until(
            lambda: "RECOVERY -> RUNNING" in early.log_path.read_text(),
            "the first broker to be unfenced",
            timeout=40,
        )
        client = WireClient(HOST, snapshotting_quorum.controllers[0].port)
        try:
            response = client.call(19, 7, {
                "topics": [{"name": "in-snapshot", "num_partitions": 3, "replication_factor": 1,
                            "assignments": [], "configs": []}],
                "timeout_ms": 10000, "validate_only": False,
            })  # fmt: skip
        finally:
            client.close()
        assert response.topics[0].error_code == 0
        wait_until(
            lambda: "metadata: in-snapshot-2 leader" in early.log_path.read_text(),
            "the topic in the first image",
            timeout=40,
        )
        before = set(snapshots(snapshotting_quorum))
        wait_until(
            lambda: bool(set(snapshots(snapshotting_quorum)) - before),
            "a snapshot written after the topic",
            timeout=40,
        )
        late = cluster_broker_factory(snapshotting_quorum, BROKER_ID)
        late.start()
        try:
            wait_until(
                lambda: "RECOVERY -> RUNNING" in late.log_path.read_text(),
                "the late broker to be unfenced",
                timeout=40,
            )
            text = late.log_path.read_text()
            loaded = re.search(
                r"metadata: loaded snapshot (\d+)-(\d+) \((\d+) bytes, (\d+) topics, (\d+) brokers\)", text
            )
            assert loaded is not None, text[-3000:]
            assert int(loaded.group(4)) == 1 and int(loaded.group(5)) >= 1  # the topic and the first broker
            # The heartbeat answer may unfence before the observer fetched the UnfenceBrokerRecord.
            wait_until(
                lambda: f"metadata: broker {BROKER_ID} is unfenced" in late.log_path.read_text(),
                "the unfencing record",
                timeout=40,
            )
        finally:
            late.stop()
    finally:
        early.stop()
