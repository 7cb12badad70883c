"""Fixtures for cluster mode: a real Kafka 4.3 KRaft controller quorum (kcompat.testing_cluster).

A controller JVM takes seconds to start, so one quorum serves a whole test module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kcompat.testing_cluster import ControllerQuorum


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
