"""Fixtures shared by the unit layer.

The broker fixtures of the kcompat.testing plugin (real `kcompat serve` subprocesses) are loaded
through its entry point; the one here is the in-process harness most server tests use:

    @pytest.fixture
    def h(broker_harness: HarnessFactory) -> BrokerHarness:
        return broker_harness({"num.partitions": "3"})

    def test_groups(broker_harness: HarnessFactory) -> None:
        h = broker_harness(kind=GroupHarness)      # a GroupHarness, with its fake clock

Every harness made is closed when the test ends, each in a data directory of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.server.broker_harness import BrokerHarness, HarnessFactory

# The layers run on a 2-core machine beside brokers and JVMs: how fast Hypothesis draws its inputs
# there says nothing about the code under test, so neither time check may fail a property.
settings.register_profile("kcompat", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kcompat")


@pytest.fixture
def broker_harness(tmp_path: Path) -> Iterator[HarnessFactory]:
    """`broker_harness(props, kind=BrokerHarness, clock=..., path=...)`: an in-process Broker on a
    private event loop (tests/server/broker_harness.py); all of them closed at the test's end."""
    made: list[BrokerHarness] = []

    def factory(
        props: Mapping[str, str] | None = None,
        /,
        *,
        kind: type[BrokerHarness] = BrokerHarness,
        path: Path | None = None,
        **kw: Any,
    ) -> BrokerHarness:
        where = path or (tmp_path if not made else tmp_path / f"harness-{len(made) + 1}")
        harness = kind(where, props, **kw)
        made.append(harness)
        return harness

    yield factory
    for harness in reversed(made):
        harness.close()


@pytest.fixture(autouse=True)
def fresh_closing_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own throttle of "closing connection" lines: a port reused by a later test would
    otherwise find its lines held back by an earlier test's."""
    import logging

    from kcompat.server.log_throttle import LogThrottle
    from kcompat.server.network import connection

    fresh = LogThrottle(logging.getLogger("kcompat.server"), pass_below=logging.INFO)
    monkeypatch.setattr(connection, "_closing", fresh)
