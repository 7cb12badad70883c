"""A share-partition's in-flight records (Kafka's SharePartition), pure: the time is passed in.

    start offset (SPSO) ── in flight: runs of offsets, each one state ──► end offset (SPEO)

Everything below the start offset is done (acknowledged or archived); everything from the end
offset on has never been acquired. In between, the records are kept as runs: a fetched batch is one
run, and an acknowledgement that covers part of it splits it, down to single offsets when each
offset is acknowledged its own way (Kafka's per-batch state that becomes per-offset state). The
record states and their table are in in_flight.py.

Each acquisition raises the delivery count; a record released (by the client, by its lock timing
out or by its member leaving) once its count has reached the limit is archived, not made available
again. The start offset moves over completed runs at the front, so the in-flight window
(`share.partition.max.record.locks` records: nothing new is acquired once it is full) frees up as
consumers acknowledge.

An acknowledgement is a Transition until the persister has taken it (begin_acknowledge, then commit
or rollback), as in Kafka's SharePartition: its runs keep what they were (`prior`), nobody acquires
them, no lock expires them and the start offset does not pass them meanwhile; a write that fails
puts exactly those runs back as they were (acquired by the member, their delivery count and lock
deadline kept) and touches nothing else.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator

from kcompat.coordinator.share.in_flight import (
    DONE,
    KNOWN_ACK_TYPES,
    TRANSITIONS,
    Acquired,
    Event,
    FetchedBatch,
    Prior,
    RecordState,
    Run,
    ShareLimits,
    StateBatch,
    Transition,
)
from kcompat.wire.error_codes import ErrorCode


def _first(r: Run) -> int:
    return r.first


def _ranges(first: int, last: int, types: list[int]) -> Iterator[tuple[int, int, int]]:
    """(first, last, type) ranges of one acknowledgement batch: one for a single type, else one per
    run of equal per-offset types (a client acknowledging each record alike costs one range)."""
    if len(types) == 1:
        yield first, last, types[0]
        return
    start, kind = first, types[0]
    for k, t in enumerate(types):
        if t != kind:
            yield start, first + k - 1, kind
            start, kind = first + k, t
    yield start, last, kind


class SharePartition:
    """One share group's view of one topic-partition, on that partition's leader."""

    def __init__(self, start_offset: int, limits: ShareLimits) -> None:
        self.limits = limits
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.runs: list[Run] = []  # sorted, contiguous from start_offset to end_offset - 1
        self._transitions = 0  # the last Transition id given

    # --- state kept by the persister -------------------------------------------------------------

    def load(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        """The state read back (a restart, a new leader): what was acquired is available again."""
        self.start_offset = self.end_offset = start_offset
        self.runs = []
        for b in sorted(batches, key=lambda b: b.first):
            if b.last < self.end_offset:
                continue
            first = max(b.first, self.end_offset)
            if first > self.end_offset:  # a hole in what was stored: not yet delivered
                self.runs.append(Run(self.end_offset, first - 1, RecordState.AVAILABLE, 0))
            state = RecordState(b.state) if b.state in (2, 4) else RecordState.AVAILABLE
            self.runs.append(Run(first, b.last, state, b.delivery_count))
            self.end_offset = b.last + 1
        self._advance()

    def state_batches(
        self, lo: int | None = None, hi: int | None = None, transition: Transition | None = None
    ) -> tuple[StateBatch, ...]:
        """The in-flight runs overlapping [lo, hi] (all without bounds) in the persister's terms;
        with `transition`, only its own runs, as it made them, from the start offset it moves to
        (the share coordinator prunes what is below). Runs in any other transition are left out:
        the persister gets them from their own write, which may still fail."""
        out = []
        start = self.settled_start_offset(transition) if transition is not None else self.start_offset
        for r in self.runs:
            if r.last < start or (lo is not None and r.last < lo) or (hi is not None and r.first > hi):
                continue
            if r.prior is None:
                if transition is not None:
                    continue
            elif transition is None or r.prior.transition != transition.id:
                continue
            state = RecordState.AVAILABLE if r.state == RecordState.ACQUIRED else r.state
            out.append(StateBatch(r.first, r.last, int(state), r.delivery_count))
        return tuple(out)

    def settled_start_offset(self, transition: Transition | None = None) -> int:
        """The start offset the persister is to see: past the front runs done once `transition`
        (if any) is stored, runs in other transitions counted as they were."""
        for r in self.runs:
            if r.settled_state(transition) not in DONE:
                return r.first
        return self.end_offset

    def delivery_complete_count(self, transition: Transition | None = None) -> int:
        """Records done past the start offset (both as the persister is to see them)."""
        start = self.settled_start_offset(transition)
        return sum(
            r.last - r.first + 1
            for r in self.runs
            if r.first >= start and r.settled_state(transition) in DONE
        )

    # --- fetching --------------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where a share fetch reads from: the first available in-flight record, else the end."""
        for r in self.runs:
            if r.state == RecordState.AVAILABLE and r.prior is None:
                return r.first
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether a fetch could acquire anything: records made available again, or room in the window."""
        return self.next_fetch_offset() < self.end_offset or self._room() > 0

    def _room(self) -> int:
        return self.limits.max_record_locks - (self.end_offset - self.start_offset)

    def reset_to(self, offset: int) -> None:
        """Move the start past records the log no longer holds (retention, DeleteRecords), or to
        where share.auto.offset.reset placed an empty share-partition."""
        if offset <= self.start_offset:
            return
        self.runs = [r for r in self.runs if r.last >= offset]
        if self.runs and self.runs[0].first < offset:
            self.runs[0] = self.runs[0].split_at(offset)
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance()

    def acquire(
        self,
        member: str,
        batches: Iterable[FetchedBatch],
        max_records: int,
        now_ms: int,
        *,
        strict: bool = True,
    ) -> list[Acquired]:
        """Acquire for `member` what `batches` (read from next_fetch_offset) hold: available in-flight
        records, then new ones past the end while the window has room, `max_records` of them.

        `strict` (ShareAcquireMode record_limit) never goes past `max_records` nor the window's
        room; otherwise (batch_optimized, Kafka's default) a log batch begun is acquired to its end,
        as the client gets the whole batch anyway, even past the window (as Kafka rounds up).
        Either way nothing new is begun once the window is full."""
        out: list[Acquired] = []
        budget = max_records
        deadline = now_ms + self.limits.lock_duration_ms
        for b in batches:
            if budget <= 0:
                break
            if b.last < self.start_offset:
                continue
            first = max(b.first, self.start_offset)
            allow = budget if strict else max(budget, b.last - first + 1)  # for this batch
            # the part of the batch already in flight: acquire what is available
            if first < self.end_offset:
                hi = min(b.last, self.end_offset - 1)
                if b.deliverable:
                    left = self._acquire_in_flight(member, first, hi, allow, deadline, out)
                    budget -= allow - left
                    allow = left
                first = hi + 1
            if first > b.last or first != self.end_offset:
                continue
            # new records past the end
            take = b.last - first + 1
            if b.deliverable:
                room = self._room()
                if room <= 0:
                    break
                take = min(take, allow, room) if strict else min(take, allow)
                last = first + take - 1
                self.runs.append(Run(first, last, RecordState.ACQUIRED, 1, member, deadline))
                self._note(out, first, last, 1)
                budget -= take
            else:
                self.runs.append(Run(first, b.last, RecordState.ARCHIVED, 0))
            self.end_offset = first + take
        self._advance()
        return out

    def _acquire_in_flight(
        self, member: str, lo: int, hi: int, budget: int, deadline: int, out: list[Acquired]
    ) -> int:
        i = self._split_range(lo, hi)
        while i < len(self.runs) and self.runs[i].first <= hi and budget > 0:
            r = self.runs[i]
            if r.state == RecordState.AVAILABLE and r.prior is None:  # released, once stored
                if r.last - r.first + 1 > budget:
                    self.runs.insert(i + 1, r.split_at(r.first + budget))
                r.state = TRANSITIONS[(r.state, Event.ACQUIRE)]
                r.delivery_count += 1
                r.member, r.deadline_ms = member, deadline
                self._note(out, r.first, r.last, r.delivery_count)
                budget -= r.last - r.first + 1
            i += 1
        return budget

    @staticmethod
    def _note(out: list[Acquired], first: int, last: int, count: int) -> None:
        if out and out[-1].last + 1 == first and out[-1].delivery_count == count:
            out[-1] = Acquired(out[-1].first, last, count)
        else:
            out.append(Acquired(first, last, count))

    # --- acknowledging ---------------------------------------------------------------------------

    def acknowledge(
        self, member: str, batches: Iterable[tuple[int, int, list[int]]], now_ms: int
    ) -> tuple[ErrorCode, tuple[int, int] | None]:
        """begin_acknowledge and commit at once (no persister in between): the error and the span
        of offsets changed."""
        err, transition = self.begin_acknowledge(member, batches, now_ms)
        if transition is None:
            return err, None
        self.commit(transition)
        return err, (transition.first, transition.last)

    def begin_acknowledge(
        self, member: str, batches: Iterable[tuple[int, int, list[int]]], now_ms: int
    ) -> tuple[ErrorCode, Transition | None]:
        """Apply (first, last, types) acknowledgements of `member`: one type for the whole range,
        or one per offset, the batches in offset order (else INVALID_REQUEST, as Kafka). All or
        nothing: INVALID_RECORD_STATE when any offset is not acquired by this member, is
        acknowledged twice or is in a transition not yet stored, and then nothing changes. Returns
        the error and the Transition to commit or roll back once the persister answered (None
        when nothing changed)."""
        plan: list[tuple[int, int, int]] = []
        prev_last = -1
        for first, last, types in batches:
            if last < first or first < prev_last or not types:
                return ErrorCode.INVALID_REQUEST, None
            if (len(types) != 1 and len(types) != last - first + 1) or not KNOWN_ACK_TYPES.issuperset(types):
                return ErrorCode.INVALID_REQUEST, None
            if first == prev_last:  # Kafka lets a batch start on the last one's end: that offset twice
                return ErrorCode.INVALID_RECORD_STATE, None
            prev_last = last
            plan.extend(_ranges(first, last, types))
        for first, last, _ in plan:
            if not self._all_acquired_by(member, first, last):
                return ErrorCode.INVALID_RECORD_STATE, None
        if not plan:
            return ErrorCode.NONE, None
        deadline = now_ms + self.limits.lock_duration_ms
        self._transitions += 1
        tid = self._transitions
        for first, last, ack in plan:
            i = self._split_range(first, last)
            while i < len(self.runs) and self.runs[i].first <= last:
                r = self.runs[i]
                r.prior = Prior(tid, r.state, r.delivery_count, r.member, r.deadline_ms)
                self._transition(r, ack, deadline)
                i += 1
        self._advance()  # merges only: the start offset waits for the commit
        return ErrorCode.NONE, Transition(tid, min(p[0] for p in plan), max(p[1] for p in plan))

    def commit(self, transition: Transition) -> None:
        """The persister took the transition: its runs stand as they are now."""
        for r in self.runs:
            if r.prior is not None and r.prior.transition == transition.id:
                r.prior = None
        self._advance()

    def rollback(self, transition: Transition) -> None:
        """The persister refused the transition: its runs go back to what they were (acquired by
        their member, with their delivery count and lock deadline), as Kafka rolls back."""
        for r in self.runs:
            p = r.prior
            if p is not None and p.transition == transition.id:
                r.state, r.delivery_count, r.member, r.deadline_ms = (
                    p.state,
                    p.delivery_count,
                    p.member,
                    p.deadline_ms,
                )
                r.prior = None
        self._advance()

    def _all_acquired_by(self, member: str, first: int, last: int) -> bool:
        if first < self.start_offset or last >= self.end_offset:
            return False
        runs = self.runs
        for i in range(self._index(first), len(runs)):
            r = runs[i]
            if r.first > last:
                break
            if r.state != RecordState.ACQUIRED or r.member != member or r.prior is not None:
                return False
        return True

    def _transition(self, r: Run, event: int, deadline: int) -> None:
        nxt = TRANSITIONS[(r.state, event)]
        if nxt == RecordState.AVAILABLE and r.delivery_count >= self.limits.delivery_count_limit:
            nxt = RecordState.ARCHIVED  # delivered as often as allowed
        r.state = nxt
        if nxt == RecordState.ACQUIRED:
            r.deadline_ms = deadline  # RENEW
        else:
            r.member, r.deadline_ms = None, 0

    # --- releasing -------------------------------------------------------------------------------

    def release_member(self, member: str) -> tuple[int, int] | None:
        """The member left or closed its share session: its acquired records go back (or are archived)."""
        return self._release(lambda r: r.member == member)

    def expire_locks(self, now_ms: int) -> tuple[int, int] | None:
        """Release every run whose acquisition lock has timed out by `now_ms`."""
        return self._release(lambda r: r.deadline_ms <= now_ms)

    def _release(self, pick: Callable[[Run], bool]) -> tuple[int, int] | None:
        lo = hi = None
        for r in self.runs:
            if r.state == RecordState.ACQUIRED and r.prior is None and pick(r):  # else: its ack decides
                self._transition(r, Event.EXPIRE, 0)
                lo = r.first if lo is None else lo
                hi = r.last
        if lo is None or hi is None:
            return None
        self._advance()
        return lo, hi

    def next_deadline_ms(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.runs if r.state == RecordState.ACQUIRED and r.prior is None]
        return min(deadlines) if deadlines else None

    def acquired_count(self) -> int:
        return sum(r.last - r.first + 1 for r in self.runs if r.state == RecordState.ACQUIRED)

    # --- bookkeeping -----------------------------------------------------------------------------

    def _index(self, offset: int) -> int:
        """The index of the run holding `offset` (runs are contiguous): 0 below them, the last above."""
        return max(bisect_right(self.runs, offset, key=_first) - 1, 0)

    def _split_range(self, lo: int, hi: int) -> int:
        """Split runs so that lo starts one and hi ends one; the index of the first run ending at or
        after lo (len(runs) when none does)."""
        runs = self.runs
        if not runs:
            return 0
        i = self._index(lo)
        r = runs[i]
        if r.last < lo:
            return i + 1
        if r.first < lo:
            runs.insert(i + 1, r.split_at(lo))
            i += 1
        j = self._index(hi)
        r = runs[j]
        if r.first <= hi < r.last:
            runs.insert(j + 1, r.split_at(hi + 1))
        return i

    def _advance(self) -> None:
        """Drop completed runs at the front (the start offset moves) and merge equal neighbours."""
        k = 0
        while k < len(self.runs) and self.runs[k].state in DONE and self.runs[k].prior is None:
            self.start_offset = self.runs[k].last + 1
            k += 1
        if k:
            del self.runs[:k]
        if not self.runs:
            self.start_offset = self.end_offset
        merged: list[Run] = []
        for r in self.runs:
            p = merged[-1] if merged else None
            if (
                p is not None
                and p.state == r.state
                and p.delivery_count == r.delivery_count
                and p.member == r.member
                and p.deadline_ms == r.deadline_ms
                and p.prior == r.prior
            ):
                p.last = r.last
            else:
                merged.append(r)
        self.runs = merged
