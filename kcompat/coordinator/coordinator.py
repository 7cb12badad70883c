"""The group coordinator shard: Kafka's GroupCoordinatorShard over its two managers, with no I/O.

    GroupMetadataManager   (group_metadata_manager.py)   classic and KIP-848 groups
    OffsetMetadataManager  (offset_metadata_manager.py)  committed offsets and their expiry
    TxnOffsets             (txn_offsets.py)              offsets pending in transactions (KIP-447)
    ShareGroups            (share/share_group.py)        share groups (KIP-932): their records are
                                                         replayed here, kcompat.server.share drives them

One GroupCoordinator holds every group of a broker. Each operation takes `now_ms`; the shard
creates the call's Effects, fires any timer that is due (so a late tick loses nothing), lets a
manager do the work, fires what that made due at once, and returns the CoordinatorResult (see
result.py and the package docstring). Errors are Kafka's error codes in the responses; nothing
here raises for bad client input. What spans both managers is here: DeleteGroups, offset expiry
(which deletes the groups it leaves empty), the timers, and the replay of `__consumer_offsets`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import kcompat.coordinator.records as rec
import kcompat.coordinator.share.share_group_records as share_rec
from kcompat.coordinator.classic_group import ClassicGroup
from kcompat.coordinator.config import CoordinatorConfig
from kcompat.coordinator.group_metadata_manager import GroupMetadataManager
from kcompat.coordinator.group_store import Group, GroupOverridesFn, GroupStore, TopicMetadataFn
from kcompat.coordinator.offset_metadata_manager import OffsetMetadataManager
from kcompat.coordinator.records import OffsetCommitValue
from kcompat.coordinator.result import CoordinatorResult, Deferred, Effects, TickResult, Timer
from kcompat.coordinator.share.share_group import ShareGroups
from kcompat.coordinator.streams_group import StreamsGroup
from kcompat.coordinator.txn_offsets import TxnOffsets
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types.delete_groups import DeletableGroupResult
from kcompat.wire.types.offset_commit import OffsetCommitResponseTopic

P = ParamSpec("P")
T = TypeVar("T")


class GroupCoordinator:
    """Every group of one broker. See the package docstring for how a server drives it."""

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        topic_metadata: TopicMetadataFn | None = None,
        new_uuid: Callable[[], uuid.UUID] = uuid.uuid4,
        group_overrides: GroupOverridesFn | None = None,
        share_session_timeout_ms: Callable[[str], int] = lambda group_id: 45000,
    ) -> None:
        """`group_overrides(group_id)`: the configs set on a group (GroupConfigs.overrides);
        `share_session_timeout_ms(group_id)`: a share group's, for the members a load brings back."""
        self.share_groups = ShareGroups()
        self._share_session_timeout_ms = share_session_timeout_ms
        store = self._store = GroupStore(config or CoordinatorConfig(), topic_metadata or dict, new_uuid)
        if group_overrides is not None:
            store.group_overrides = group_overrides
        self.group_manager = GroupMetadataManager(store)
        self.offset_manager = OffsetMetadataManager(store)
        self._next_expiry_check: int | None = None
        groups, offsets = self.group_manager, self.offset_manager
        # The operations, each `op(now_ms, ...)` with the manager's own parameters after `now_ms`.
        self.join_group = self._writes(groups.classic.join_group)
        self.sync_group = self._writes(groups.classic.sync_group)
        self.heartbeat = self._writes(groups.classic.heartbeat)
        self.leave_group = self._writes(groups.classic.leave_group)
        self.consumer_group_heartbeat = self._writes(groups.consumer.consumer_group_heartbeat)
        self.streams_group_heartbeat = self._writes(groups.streams.streams_group_heartbeat)
        self.commit_offsets = self._writes(offsets.commit_offsets)
        self.delete_offsets = self._writes(offsets.delete_offsets)
        self.describe_groups = self._reads(groups.describe_groups)
        self.list_groups = self._reads(groups.list_groups)
        self.consumer_group_describe = self._reads(groups.consumer_group_describe)
        self.streams_group_describe = self._reads(groups.streams_group_describe)
        self.fetch_offsets = self._reads(offsets.fetch_offsets)
        self.txn_offsets = TxnOffsets(offsets)

    def txn_commit_offsets(
        self, now_ms: int, **kwargs: Any
    ) -> CoordinatorResult[list[OffsetCommitResponseTopic]]:
        """TxnOffsetCommit (see txn_offsets.py). No timers fire here: every record this returns must
        go into the producer's transactional batch, and only those."""
        out = Effects()
        return out.result(self.txn_offsets.commit(out, now_ms, **kwargs))

    @property
    def config(self) -> CoordinatorConfig:
        return self._store.config

    @config.setter
    def config(self, config: CoordinatorConfig) -> None:
        self._store.config = config

    @property
    def groups(self) -> dict[str, Group]:
        return self.group_manager.groups

    @property
    def offsets(self) -> dict[str, dict[tuple[str, int], OffsetCommitValue]]:
        return self.offset_manager.offsets

    def has_state(self) -> bool:
        """Whether any group or committed offset exists (else nothing needs `__consumer_offsets`)."""
        return bool(self.group_manager.groups or self.offset_manager.offsets or self.share_groups.groups)

    # --- the calls -------------------------------------------------------------------------------

    def _run(self, now_ms: int, op: Callable[[Effects], T | Deferred]) -> CoordinatorResult[T]:
        out = Effects()
        self._fire_due(out, now_ms)
        answer = op(out)
        self._fire_due(out, now_ms)  # what this call made due at once (a zero initial delay, say)
        return out.result(answer)

    def _writes(
        self, op: Callable[Concatenate[Effects, int, P], T | Deferred]
    ) -> Callable[Concatenate[int, P], CoordinatorResult[T]]:
        def call(now_ms: int, /, *args: P.args, **kwargs: P.kwargs) -> CoordinatorResult[T]:
            out = Effects()  # _run, inlined: this is every heartbeat's and commit's path
            self._fire_due(out, now_ms)
            answer = op(out, now_ms, *args, **kwargs)
            self._fire_due(out, now_ms)
            return out.result(answer)

        return call

    def _reads(self, op: Callable[P, T]) -> Callable[Concatenate[int, P], CoordinatorResult[T]]:
        def call(now_ms: int, /, *args: P.args, **kwargs: P.kwargs) -> CoordinatorResult[T]:
            return self._run(now_ms, lambda out: op(*args, **kwargs))

        return call

    def delete_groups(
        self, now_ms: int, group_ids: Sequence[str]
    ) -> CoordinatorResult[list[DeletableGroupResult]]:
        """DeleteGroups: a group's offsets go with it (Kafka's shard deleteGroups)."""

        def op(out: Effects) -> list[DeletableGroupResult]:
            results = []
            for gid in group_ids:
                code = self.group_manager.delete_error(gid)
                if code == E.NONE:
                    self._delete_group(out, gid, now_ms)
                results.append(DeletableGroupResult(group_id=gid, error_code=int(code)))
            return results

        return self._run(now_ms, op)

    def _delete_group(self, out: Effects, group_id: str, now: int) -> None:
        self.offset_manager.delete_all(out, group_id)
        self.group_manager.delete_group(out, group_id, now)

    # --- time ------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> TickResult:
        """Fire every timer due at `now_ms`; call again at `next_deadline_ms` (None = nothing pending)."""
        out = Effects()
        self._fire_due(out, now_ms)
        return TickResult(out.records, out.completions, self.next_deadline_ms())

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d, _ in self._timers()]
        return min(deadlines) if deadlines else None

    def _timers(self) -> Iterator[Timer]:
        if self._next_expiry_check is not None:
            yield self._next_expiry_check, self._expire_offsets
        # The groups' timers: classic ones from the rebalance part, KIP-848 ones from the consumer part.
        # Asked for twice on every call (before and after it), so dispatched here, with no extra layer.
        classic, consumer = self.group_manager.rebalance.timers, self.group_manager.consumer.timers
        streams = self.group_manager.streams.timers
        for group in self.group_manager.groups.values():
            if isinstance(group, ClassicGroup):
                yield from classic(group)
            elif isinstance(group, StreamsGroup):
                yield from streams(group)
            else:
                yield from consumer(group)

    def _fire_due(self, out: Effects, now_ms: int) -> None:
        if self._next_expiry_check is None:
            self._next_expiry_check = now_ms + self.config.offsets_retention_check_interval_ms
        while True:
            due = [(d, fire) for d, fire in self._timers() if d <= now_ms]
            if not due:
                return
            # The earliest first, at its own time, so that timers see the order they would have run in.
            deadline, fire = min(due, key=lambda x: x[0])
            fire(out, max(deadline, 0))

    def _expire_offsets(self, out: Effects, now: int) -> None:
        """Kafka's cleanupGroupMetadata: expire offsets, then delete the groups left empty with none."""
        self._next_expiry_check = now + self.config.offsets_retention_check_interval_ms
        groups = self.group_manager.groups
        for gid in sorted(set(groups) | set(self.offset_manager.offsets)):
            all_gone = self.offset_manager.cleanup_expired(out, gid, groups.get(gid), now)
            if all_gone and self.group_manager.is_empty(gid):
                self._delete_group(out, gid, now)

    # --- replay ----------------------------------------------------------------------------------

    def load(self, records: Iterable[tuple[bytes, bytes | None]], now_ms: int) -> None:
        """Rebuild every group and offset from `__consumer_offsets` records, oldest first.

        Later records win and tombstones delete, so replaying a compacted or uncompacted log gives the
        same state. Members' session timers start afresh at `now_ms`, as in Kafka after a reload.
        Raises DecodeError on a corrupt record.
        """
        touched: set[str] = set()
        shares: set[str] = set()
        for raw in records:
            decoded = rec.decode((raw[0], raw[1]))
            if decoded is None:
                if (share := share_rec.decode((raw[0], raw[1]))) is not None:
                    shares.add(share[0].group_id)
                    share_rec.replay(self.share_groups, *share)
                continue
            touched.add(rec.group_of(decoded.key))
            if isinstance(decoded.key, rec.OffsetCommitKey):
                assert decoded.value is None or isinstance(decoded.value, OffsetCommitValue)
                self.offset_manager.replay(decoded.key, decoded.value, now_ms)
            else:
                self.group_manager.replay(decoded.key, decoded.value, now_ms)
        # Only the groups loaded now: a shard loaded beside others leaves their timers alone.
        self.group_manager.restart_timers(now_ms, touched)
        self.share_groups.loaded(now_ms, self._share_session_timeout_ms, shares)
        self._next_expiry_check = now_ms + self.config.offsets_retention_check_interval_ms

    def unload(self, owned: Callable[[str], bool]) -> list[int]:
        """Kafka's shard unload (onResignation): forget every group, committed offset and pending
        transactional offset of the groups `owned` names. Returns the tokens of the JoinGroup and
        SyncGroup calls still waiting in those groups: the server answers them NOT_COORDINATOR."""
        tokens: list[int] = []
        groups = self.group_manager.groups
        for gid in [g for g in groups if owned(g)]:
            group = groups.pop(gid)
            if isinstance(group, ClassicGroup):
                for m in group.members.values():
                    tokens.extend(t for t in (m.join_token, m.sync_token) if t is not None)
        offsets = self.offset_manager.offsets
        for gid in [g for g in offsets if owned(g)]:
            del offsets[gid]
        for by_group in self.txn_offsets.pending.values():
            for gid in [g for g in by_group if owned(g)]:
                del by_group[gid]
        shares = self.share_groups.groups
        for gid in [g for g in shares if owned(g)]:
            del shares[gid]  # never expired here: its members live on at the new coordinator
        return tokens


__all__ = ["GroupCoordinator"]
