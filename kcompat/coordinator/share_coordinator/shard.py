"""The share coordinator's state (Kafka's ShareCoordinatorShard): pure, no I/O and no clock.

Per share-partition (group, topic id, partition) it keeps what `__share_group_state` says: the
state epoch, the leader epoch, the start offset, the delivery-complete count and the state
batches. Every call is for one share-partition and returns the records to append and the answer;
the records are replayed here at once (the broker appends them before it answers, and replays
the same records at start-up, so both paths build the state one way):

    initialize  ShareSnapshot: a new state epoch and start offset, no batches
                (FENCED_STATE_EPOCH when the recorded state epoch is newer)
    write       (of an initialized share-partition) ShareUpdate with the write's batches, or every
                `share.coordinator.snapshot.update.records.per.snapshot` updates (and on a new
                state epoch) a ShareSnapshot of the merged state; FENCED_LEADER_EPOCH /
                FENCED_STATE_EPOCH when the recorded epochs are newer than the write's
    read        (of an initialized share-partition) the state; a newer leader epoch is recorded
                first (a ShareUpdate/ShareSnapshot), fencing the old leader's writes
    summary     the epochs, start offset and delivery-complete count, nothing recorded (a
                share-partition never initialized: start offset -1)
    delete      a tombstone (nothing when there is no state)

As Kafka 4.3's coordinator answers (compat_tests/test_share_state_kafka.py compares): bad keys,
and a read or write of a share-partition that was never initialized (or was deleted), are
INVALID_REQUEST; a topic or partition the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kcompat.coordinator.record_pair import Record
from kcompat.coordinator.share_coordinator.batches import StateBatch, combine
from kcompat.coordinator.share_coordinator.records import (
    ShareKey,
    ShareSnapshot,
    ShareUpdate,
    decode,
    snapshot_record,
    tombstone,
    update_record,
)
from kcompat.kafka_uuid import ZERO_UUID
from kcompat.wire.error_codes import ErrorCode

# What a share-partition's state is: the snapshot record's fields (Kafka's ShareGroupOffset).
ShareState = ShareSnapshot


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    snapshot_update_records_per_snapshot: int = 500


@dataclass(frozen=True, slots=True)
class ShareResult:
    """What a call did: the records to append before answering, and the answer. `state` is the
    share-partition's state for read and summary (None: never written)."""

    records: tuple[Record, ...] = ()
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    state: ShareState | None = None


def _refuse(error: ErrorCode, message: str) -> ShareResult:
    return ShareResult(error=error, message=message)


class ShareCoordinatorShard:
    def __init__(
        self,
        config: ShareCoordinatorConfig,
        partition_exists: Callable[[uuid.UUID, int], bool] = lambda topic_id, p: True,
    ) -> None:
        self.config = config
        self._partition_exists = partition_exists
        self.states: dict[ShareKey, ShareState] = {}
        # The newest epochs ever recorded: a re-initialized state (leader epoch 0) still fences.
        self.leader_epochs: dict[ShareKey, int] = {}
        self.state_epochs: dict[ShareKey, int] = {}
        self.updates_since_snapshot: dict[ShareKey, int] = {}

    # --- replay ----------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of the topic (DecodeError when it is not one)."""
        share_key, rec = decode(key, value)
        self._apply(share_key, rec)

    def _apply(self, key: ShareKey, rec: ShareSnapshot | ShareUpdate | None) -> None:
        if rec is None:
            for table in (self.states, self.leader_epochs, self.state_epochs, self.updates_since_snapshot):
                table.pop(key, None)
            return
        _raise(self.leader_epochs, key, rec.leader_epoch)
        if isinstance(rec, ShareSnapshot):
            _raise(self.state_epochs, key, rec.state_epoch)
            self.states[key] = rec
            self.updates_since_snapshot[key] = 0
            return
        cur = self.states.get(key)
        if cur is None:  # its snapshot is gone (pruned): the update is all there is
            cur = ShareState(rec.snapshot_epoch, 0, -1, rec.start_offset, -1, 0, 0, ())
        start = _or(rec.start_offset, cur.start_offset)
        self.states[key] = dataclasses.replace(
            cur,
            leader_epoch=_or(rec.leader_epoch, cur.leader_epoch),
            start_offset=start,
            delivery_complete_count=_or(rec.delivery_complete_count, cur.delivery_complete_count),
            batches=combine(cur.batches, rec.batches, start),
        )
        self.updates_since_snapshot[key] = self.updates_since_snapshot.get(key, 0) + 1

    def _record(self, rec: Record) -> Record:
        self.replay(rec.key, rec.value)
        return rec

    def unload(self, owned: Callable[[ShareKey], bool]) -> None:
        """Forget the share-partitions `owned` says are in an unloaded partition of the topic."""
        for key in [k for k in {*self.states, *self.leader_epochs} if owned(k)]:
            self._apply(key, None)

    # --- requests --------------------------------------------------------------------------------

    def initialize(self, now_ms: int, key: ShareKey, state_epoch: int, start_offset: int) -> ShareResult:
        if (bad := self._invalid(key)) is not None:
            return bad
        recorded = self.state_epochs.get(key)
        if recorded is not None and recorded > state_epoch:
            return _refuse(
                ErrorCode.FENCED_STATE_EPOCH,
                f"Initialize request state epoch {state_epoch} is older than the recorded {recorded}.",
            )
        cur = self.states.get(key)
        snap = ShareState(
            snapshot_epoch=0 if cur is None else cur.snapshot_epoch + 1,
            state_epoch=state_epoch,
            leader_epoch=0,  # Kafka's PartitionFactory.DEFAULT_LEADER_EPOCH
            start_offset=start_offset,
            delivery_complete_count=0,
            create_timestamp=now_ms,
            write_timestamp=now_ms,
            batches=(),
        )
        return ShareResult(records=(self._record(snapshot_record(key, snap)),))

    def write(
        self,
        now_ms: int,
        key: ShareKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: Iterable[StateBatch],
    ) -> ShareResult:
        if (bad := self._uninitialized(key, "Write")) is not None:
            return bad
        # -1 (a writer that does not say) is never fenced, as in Kafka
        recorded = self.leader_epochs.get(key)
        if leader_epoch != -1 and recorded is not None and recorded > leader_epoch:
            return _refuse(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"Write request leader epoch {leader_epoch} is older than the recorded {recorded}.",
            )
        recorded = self.state_epochs.get(key)
        if state_epoch != -1 and recorded is not None and recorded > state_epoch:
            return _refuse(
                ErrorCode.FENCED_STATE_EPOCH,
                f"Write request state epoch {state_epoch} is older than the recorded {recorded}.",
            )
        rec = self._state_record(
            now_ms, key, state_epoch, leader_epoch, start_offset, delivery_complete_count, tuple(batches)
        )
        return ShareResult(records=(self._record(rec),))

    def _state_record(
        self,
        now_ms: int,
        key: ShareKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[StateBatch, ...],
    ) -> Record:
        """A snapshot for a new share-partition, a new state epoch or when enough updates piled
        up since the last one; an update otherwise."""
        cur = self.states.get(key)
        if cur is None:
            return snapshot_record(
                key,
                ShareState(
                    0,
                    state_epoch,
                    leader_epoch,
                    start_offset,
                    delivery_complete_count,
                    now_ms,
                    now_ms,
                    combine((), batches, start_offset),
                ),
            )
        new_state_epoch = _or(state_epoch, cur.state_epoch)
        if (
            new_state_epoch != cur.state_epoch
            or self.updates_since_snapshot.get(key, 0) >= self.config.snapshot_update_records_per_snapshot
        ):
            start = _or(start_offset, cur.start_offset)
            return snapshot_record(
                key,
                ShareState(
                    cur.snapshot_epoch + 1,
                    new_state_epoch,
                    _or(leader_epoch, cur.leader_epoch),
                    start,
                    _or(delivery_complete_count, cur.delivery_complete_count),
                    now_ms,  # a snapshot of a write: created now (a cold snapshot keeps the time)
                    now_ms,
                    combine(cur.batches, batches, start),
                ),
            )
        return update_record(
            key,
            ShareUpdate(
                cur.snapshot_epoch,
                _or(leader_epoch, cur.leader_epoch),  # Kafka writes the epoch it keeps
                start_offset,
                delivery_complete_count,
                combine((), batches, start_offset),
            ),
        )

    def read(self, now_ms: int, key: ShareKey, leader_epoch: int) -> ShareResult:
        if (bad := self._uninitialized(key, "Read")) is not None:
            return bad
        recorded = self.leader_epochs.get(key)
        if leader_epoch != -1 and recorded is not None and recorded > leader_epoch:  # -1: any reader
            return _refuse(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"Read request leader epoch {leader_epoch} is older than the recorded {recorded}.",
            )
        cur = self.states[key]
        if leader_epoch == -1 or leader_epoch == recorded:
            return ShareResult(state=cur)
        # A new leader reads: record its epoch, so the old leader's writes are fenced from now on.
        rec = self._state_record(now_ms, key, cur.state_epoch, leader_epoch, cur.start_offset, -1, ())
        return ShareResult(records=(self._record(rec),), state=cur)

    def cold_snapshots(self, now_ms: int, interval_ms: int, owned: Callable[[ShareKey], bool]) -> ShareResult:
        """Kafka's snapshotColdPartitions: a fresh snapshot of every share-partition of `owned` whose
        last snapshot is `interval_ms` old, so that the records below the newest snapshots can be
        pruned (and none is left to the topic's retention). Nothing when all of them are quiet:
        their last snapshot was such a one (created earlier than written) and no update followed."""
        keys = [k for k in self.states if owned(k)]
        if all(self._quiet(k) for k in keys):
            return ShareResult()
        records = []
        for k in keys:
            st = self.states[k]
            if st.write_timestamp + interval_ms > now_ms:
                continue
            snap = dataclasses.replace(
                st,
                snapshot_epoch=st.snapshot_epoch + 1,
                # the fencing epochs survive the pruning of the records that carried them
                leader_epoch=max(st.leader_epoch, self.leader_epochs.get(k, -1)),
                state_epoch=max(st.state_epoch, self.state_epochs.get(k, 0)),
                write_timestamp=now_ms,
            )
            records.append(self._record(snapshot_record(k, snap)))
        return ShareResult(records=tuple(records))

    def _quiet(self, key: ShareKey) -> bool:
        st = self.states[key]
        return st.create_timestamp != st.write_timestamp and self.updates_since_snapshot.get(key, 0) == 0

    def summary(self, key: ShareKey) -> ShareResult:
        if (bad := self._invalid(key)) is not None:
            return bad
        return ShareResult(state=self.states.get(key))

    def delete(self, key: ShareKey) -> ShareResult:
        if (bad := self._invalid(key, known_topic=False)) is not None:
            return bad
        if key not in self.states and key not in self.leader_epochs:
            return ShareResult()
        return ShareResult(records=(self._record(tombstone(key)),))

    def _uninitialized(self, key: ShareKey, what: str) -> ShareResult | None:
        if (bad := self._invalid(key, known_topic=False)) is not None:
            return bad
        if key not in self.states:
            return _refuse(ErrorCode.INVALID_REQUEST, f"{what} of a share-partition that is not initialized.")
        return self._invalid(key)

    def _invalid(self, key: ShareKey, *, known_topic: bool = True) -> ShareResult | None:
        if not key.group_id:
            return _refuse(ErrorCode.INVALID_REQUEST, "The group id must be non-empty.")
        if key.topic_id == ZERO_UUID:
            return _refuse(ErrorCode.INVALID_REQUEST, "The topic id must not be zero.")
        if key.partition < 0:
            return _refuse(ErrorCode.INVALID_REQUEST, "The partition id must not be negative.")
        if known_topic and not self._partition_exists(key.topic_id, key.partition):
            return _refuse(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            )
        return None


def _or(value: int, current: int) -> int:
    """A request's -1 leaves the recorded value as it is."""
    return current if value == -1 else value


def _raise(table: dict[ShareKey, int], key: ShareKey, epoch: int) -> None:
    if epoch > table.get(key, -1):
        table[key] = epoch
