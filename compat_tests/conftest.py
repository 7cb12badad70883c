"""Fixtures for the compatibility tests; their helpers are in support.py (import them from there).

The broker fixtures (kcompat_broker, kcompat_broker_factory, kcompat_session_broker) come from the
kcompat.testing plugin, which pytest loads through its entry point.

    def test_topics(kcompat_broker, kafka_tool):
        kafka_tool("kafka-topics", "--bootstrap-server", kcompat_broker.bootstrap,
                   "--create", "--topic", "t", "--partitions", "3")

Cluster mode: a real Kafka 4.3 KRaft controller quorum (kcompat.testing_cluster) and `kcompat serve`
brokers under it. A controller JVM takes seconds to start, so one quorum serves a whole test module.
"""

from __future__ import annotations

import subprocess
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import ClusterBrokerFactory, ReportFigure, cluster_broker, kafka_tool, kcat_executable

from kcompat.testing import Broker
from kcompat.testing_cluster import ControllerQuorum


@pytest.fixture(name="kafka_tool")
def kafka_tool_fixture() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The kafka_tool function, as a fixture."""
    return kafka_tool


@pytest.fixture(name="kcat")
def kcat_fixture() -> str:
    """Path of the kcat executable."""
    return kcat_executable()


def _quorum(tmp_path_factory: pytest.TempPathFactory, name: str, voters: int) -> Iterator[ControllerQuorum]:
    why_not = ControllerQuorum.available()
    if why_not is not None:
        pytest.fail(why_not, pytrace=False)
    with ControllerQuorum(tmp_path_factory.mktemp(name), voters=voters) as quorum:
        yield quorum


@pytest.fixture(scope="module")
def kraft_quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerQuorum]:
    """One Kafka controller (process.roles=controller) formatted with kcompat's features."""
    yield from _quorum(tmp_path_factory, "quorum", voters=1)


@pytest.fixture(scope="module")
def kraft_quorum_3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerQuorum]:
    """Three Kafka controllers formatted as one dynamic quorum (--initial-controllers)."""
    yield from _quorum(tmp_path_factory, "quorum3", voters=3)


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


# -- figures: what tests measured, printed once at the end of the session -------------------------

# A figure rides on its test's report (user_properties), so that it reaches the process that
# prints the summary when the tests ran on xdist workers.
_FIGURE = "kcompat-figure"
_FIGURES = pytest.StashKey[dict[str, str]]()


@pytest.fixture
def report_figure(request: pytest.FixtureRequest) -> ReportFigure:
    """`report_figure(name, text)` keeps a figure for the end-of-session report (a measurement, not a check)."""

    def report(name: str, text: str) -> None:
        request.node.user_properties.append((_FIGURE, (name, text)))

    return report


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport | pytest.CollectReport, config: pytest.Config) -> None:
    figures = config.stash.setdefault(_FIGURES, {})
    for key, value in getattr(report, "user_properties", ()):  # a CollectReport has none
        if key == _FIGURE:
            name, text = value
            figures[name] = text


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    figures = config.stash.get(_FIGURES, {})
    if figures:
        terminalreporter.section("figures")
        for name, text in figures.items():
            terminalreporter.write_line(f"{name}: {text}")


# kafka-python drops the sockets of connection attempts it abandons (bootstrap, reconnects) without
# closing them, so their __del__ warns; with filterwarnings = error that would fail whichever test
# (or the session's end) the garbage collector happens to run in. A client library's leak, not
# kcompat's: ignored when this layer runs (tests/ alone, with kcompat's own sockets, keeps it an error).
_CLIENT_SOCKET_LEAKS = (
    ("unclosed <socket.socket", ResourceWarning),
    ("Exception ignored in. <socket.socket", pytest.PytestUnraisableExceptionWarning),
)


def pytest_configure(config: pytest.Config) -> None:
    for message, category in _CLIENT_SOCKET_LEAKS:
        config.addinivalue_line(
            "filterwarnings", f"ignore:{message}:{category.__module__}.{category.__qualname__}"
        )
        warnings.filterwarnings("ignore", message, category)  # the session-level filters (end of session)
