"""What every coordinator operation returns: a response (or a promise of one) plus its effects.

This is Kafka's CoordinatorResult: the records to append to `__consumer_offsets`, and, because
JoinGroup and SyncGroup may be answered later, the answers to earlier requests that this call made
ready ("completions"), each tagged with the token that the deferred call handed out.

Inside the coordinator one call's effects are gathered in an `Effects` value that the shard
(coordinator.py) creates per call and passes down explicitly, as Kafka's managers pass their
`records` list; a manager's operation returns its response, or `Deferred(token)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kcompat.coordinator.records import Record, RecordKey, RecordValue, make

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


@dataclass(frozen=True)
class Deferred:
    """An operation's answer is not ready: a later call's completions carry it under `token`."""

    token: int


class Effects:
    """What one call did besides answering: records to append, and earlier deferred requests answered."""

    __slots__ = ("completions", "records")

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.completions: list[Completion] = []

    def emit(self, key: RecordKey, value: RecordValue | None) -> None:
        self.records.append(make(key, value))

    def complete(self, token: int | None, response: Any) -> None:
        if token is not None:
            self.completions.append(Completion(token, response))

    def result(self, answer: T | Deferred) -> CoordinatorResult[T]:
        """The call's CoordinatorResult; a deferred answer that this very call completed is answered now."""
        if not isinstance(answer, Deferred):
            return CoordinatorResult(answer, None, self.records, self.completions)
        for c in self.completions:
            if c.token == answer.token:
                rest = [d for d in self.completions if d.token != answer.token]
                return CoordinatorResult(c.response, None, self.records, rest)
        return CoordinatorResult(None, answer.token, self.records, self.completions)


# A timer as the group managers report it: (deadline in ms, what fires then, called as fire(out, now)).
Timer = tuple[int, Callable[[Effects, int], None]]
