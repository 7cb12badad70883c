"""What every coordinator operation returns: a response (or a promise of one) plus its effects.

This is Kafka's CoordinatorResult: the records to append to `__consumer_offsets`, and, because
JoinGroup and SyncGroup may be answered later, the answers to earlier requests that this call made
ready ("completions"), each tagged with the token that the deferred call handed out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kcompat.coordinator.records import Record

T = TypeVar("T")


@dataclass(frozen=True)
class Completion:
    """The answer to a request that was deferred under `token`."""

    token: int
    response: Any


@dataclass
class CoordinatorResult(Generic[T]):
    """`response` is the answer now; when it is None, `token` names the answer a later call completes.

    `records` must be appended to `__consumer_offsets` (in order) before `response` or any of
    `completions` is sent, so that no client sees state a restart could lose.
    """

    response: T | None = None
    token: int | None = None
    records: list[Record] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)


@dataclass
class TickResult:
    """What time passing did: records to append, deferred answers now due, and when to tick next."""

    records: list[Record] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    next_deadline_ms: int | None = None
