"""Fixtures for cluster mode: a real Kafka 4.3 KRaft controller quorum (kcompat.testing_cluster)
and `kcompat serve` brokers under it.

A controller JVM takes seconds to start, so one quorum serves a whole test module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcompat.testing import Broker
from kcompat.testing_cluster import ControllerQuorum

ClusterBrokerFactory = Callable[..., Broker]


@pytest.fixture(scope="module")
def kraft_quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerQuorum]:
    """One Kafka controller (process.roles=controller) formatted with kcompat's features."""
    why_not = ControllerQuorum.available()
    if why_not is not None:
        pytest.fail(why_not, pytrace=False)
    with ControllerQuorum(tmp_path_factory.mktemp("quorum"), voters=1) as quorum:
        yield quorum


@pytest.fixture(scope="module")
def kraft_quorum_3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerQuorum]:
    """Three Kafka controllers formatted as one dynamic quorum (--initial-controllers)."""
    why_not = ControllerQuorum.available()
    if why_not is not None:
        pytest.fail(why_not, pytrace=False)
    with ControllerQuorum(tmp_path_factory.mktemp("quorum3"), voters=3) as quorum:
        yield quorum


def cluster_broker(quorum: ControllerQuorum, base: Path, node_id: int, **overrides: str) -> Broker:
    """A (not yet started) `kcompat serve` in cluster mode under `quorum`: data in base/data-<id>,
    its log in base/kcompat-<id>.log; `overrides` are more properties (Kafka's names)."""
    return Broker(
        base / f"data-{node_id}",
        base / f"kcompat-{node_id}.log",
        overrides={
            "process.roles": "broker",
            "node.id": str(node_id),
            "cluster.id": quorum.cluster_id,
            "controller.quorum.bootstrap.servers": quorum.bootstrap_servers,
            "controller.listener.names": "CONTROLLER",
            "broker.heartbeat.interval.ms": "500",
            **overrides,
        },
    )


@pytest.fixture
def cluster_broker_factory(tmp_path: Path) -> Iterator[ClusterBrokerFactory]:
    """`factory(quorum, node_id, **overrides)`: a cluster-mode Broker, not started; every broker
    made here is stopped when the test ends."""
    made: list[Broker] = []

    def factory(quorum: ControllerQuorum, node_id: int, **overrides: str) -> Broker:
        broker = cluster_broker(quorum, tmp_path, node_id, **overrides)
        made.append(broker)
        return broker

    yield factory
    for broker in made:
        broker.stop()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def log_has(broker: Broker, text: str) -> bool:
    return text in broker.logs()
