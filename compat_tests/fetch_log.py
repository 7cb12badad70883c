"""A `kcompat serve --log-level DEBUG` broker and the per-Fetch lines its Fetch handler logs
(session, epoch, context, partitions requested / read / answered), for the tests that prove a
client really uses incremental fetch sessions (KIP-227)."""

from __future__ import annotations

import re
from typing import NamedTuple

from kcompat.testing import Broker

FETCH_LINE = re.compile(r"Fetch v(\d+) session (-?\d+) epoch (-?\d+) \((\w+)\): (\d+) partition\(s\) in the request, "
                        r"(\d+) read, (\d+) in the response \(session (-?\d+)\)")  # fmt: skip


class FetchLine(NamedTuple):
    version: int
    session_id: int
    epoch: int
    kind: str  # sessionless, full, incremental
    requested: int
    read: int
    answered: int
    response_session_id: int


class DebugBroker(Broker):
    """`kcompat serve --log-level DEBUG`."""

    def command(self) -> list[str]:
        return [*super().command(), "--log-level", "DEBUG"]


def fetch_lines(broker: Broker) -> list[FetchLine]:
    return [FetchLine(*(g if i == 3 else int(g) for i, g in enumerate(m.groups())))
            for m in FETCH_LINE.finditer(broker.logs())]  # fmt: skip


def assert_incremental_session(lines: list[FetchLine], partitions: int) -> None:
    """A full fetch of `partitions` opened a session; the later fetches of that session are
    incremental with epochs 1, 2, ... (none refused), some name fewer partitions than the session
    holds, and some answers carry fewer."""
    full = [f for f in lines if f.kind == "full" and f.requested == partitions and f.response_session_id != 0]
    assert full, f"no full fetch of the {partitions} partitions opened a session: {lines}"
    session = full[0].response_session_id
    incremental = [f for f in lines if f.session_id == session and f.epoch >= 1]
    assert incremental, f"no incremental fetch in session {session}: {lines}"
    assert all(f.kind == "incremental" and f.read == partitions for f in incremental), lines
    assert [f.epoch for f in incremental] == list(range(1, len(incremental) + 1)), lines
    assert any(f.requested < partitions for f in incremental), (
        f"every incremental fetch named all partitions: {lines}"
    )
    assert any(f.answered < partitions for f in incremental), (
        f"every incremental answer carried all partitions: {lines}"
    )
