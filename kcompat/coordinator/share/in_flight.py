"""The in-flight records of a share-partition, as data: the record state table (Kafka's
RecordState transitions), the runs of offsets in one state, the transition an acknowledgement opens
until the persister answers, and what goes in and out of a SharePartition (share_partition.py).

    AVAILABLE ──acquire──► ACQUIRED ──ACCEPT──► ACKNOWLEDGED
        ▲                     │ ─────REJECT/GAP──► ARCHIVED
        └─RELEASE/lock expiry─┘   (past share.delivery.count.limit: ARCHIVED instead)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class RecordState(IntEnum):
    """Kafka's RecordState ids (the persisted DeliveryState uses 0, 2 and 4)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """AcknowledgementBatches' AcknowledgeTypes (ShareFetch/ShareAcknowledge)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # v2: keep the records, restart their lock


class Event(IntEnum):
    """What happens to a run besides an acknowledgement."""

    ACQUIRE = 10
    EXPIRE = 11  # the acquisition lock timed out, or the member left / closed its session
    ARCHIVE = 12  # never to be delivered: aborted, a control batch, below the log start


# The state table: (state, event or acknowledge type) -> next state. Anything else is refused
# (INVALID_RECORD_STATE for an acknowledgement).
TRANSITIONS: dict[tuple[RecordState, int], RecordState] = {
    (RecordState.AVAILABLE, Event.ACQUIRE): RecordState.ACQUIRED,
    (RecordState.AVAILABLE, Event.ARCHIVE): RecordState.ARCHIVED,
    (RecordState.ACQUIRED, AcknowledgeType.ACCEPT): RecordState.ACKNOWLEDGED,
    (RecordState.ACQUIRED, AcknowledgeType.RELEASE): RecordState.AVAILABLE,
    (RecordState.ACQUIRED, AcknowledgeType.REJECT): RecordState.ARCHIVED,
    (RecordState.ACQUIRED, AcknowledgeType.GAP): RecordState.ARCHIVED,
    (RecordState.ACQUIRED, AcknowledgeType.RENEW): RecordState.ACQUIRED,
    (RecordState.ACQUIRED, Event.EXPIRE): RecordState.AVAILABLE,
}

DONE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})
KNOWN_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)


@dataclass(frozen=True, slots=True)
class ShareLimits:
    delivery_count_limit: int = 5  # share.delivery.count.limit
    max_record_locks: int = 2000  # share.partition.max.record.locks
    lock_duration_ms: int = 30000  # share.record.lock.duration.ms


@dataclass(frozen=True, slots=True)
class Prior:
    """What a run was before a transition that the persister has not taken yet."""

    transition: int
    state: RecordState
    delivery_count: int
    member: str | None
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class Transition:
    """An acknowledgement applied in memory and awaiting the persister: its id and offset span."""

    id: int
    first: int
    last: int


@dataclass(slots=True)
class Run:
    """Offsets first..last (inclusive) in one state; `member` and `deadline_ms` while ACQUIRED;
    `prior` while a transition of the run awaits the persister."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member: str | None = None
    deadline_ms: int = 0
    prior: Prior | None = None

    def split_at(self, offset: int) -> Run:
        """Cut before `offset` (first < offset <= last): self keeps the front, the back is returned."""
        back = Run(
            offset, self.last, self.state, self.delivery_count, self.member, self.deadline_ms, self.prior
        )
        self.last = offset - 1
        return back

    def settled_state(self, transition: Transition | None) -> RecordState:
        """The state as the persister is to see it once `transition` (if any) is stored: a run
        still in another transition as it was before it."""
        p = self.prior
        if p is None or (transition is not None and p.transition == transition.id):
            return self.state
        return p.state


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """A batch read from the log, as the share fetch saw it: offsets and whether it is deliverable
    (control batches and, for read_committed, aborted data are archived, never acquired)."""

    first: int
    last: int
    deliverable: bool = True


@dataclass(frozen=True, slots=True)
class Acquired:
    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run as the persister stores it (ACQUIRED is stored as AVAILABLE: a lock does not survive)."""

    first: int
    last: int
    state: int
    delivery_count: int
