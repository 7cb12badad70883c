"""The group coordinator: classic groups, KIP-848 consumer groups and committed offsets, with no I/O.

One GroupCoordinator holds every group of a broker. Each operation takes `now_ms`, first fires any
timer that is due (so a late tick loses nothing), then does its work, and returns a
CoordinatorResult (see result.py and the package docstring). Errors are Kafka's error codes in
the responses; nothing here raises for bad client input.

It is composed of one mixin per concern over CoordinatorBase (base.py: the shared state and the
result plumbing); this module adds the timers, which span them all:

    classic_protocol.py          JoinGroup, SyncGroup, Heartbeat, LeaveGroup (rebalance: classic_rebalance.py)
    consumer_group_heartbeat.py  ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848)
    offset_metadata_manager.py   OffsetCommit, OffsetFetch, OffsetDelete, offset expiry
    group_admin.py               DescribeGroups, ListGroups, DeleteGroups
    replay.py                    load: the state rebuilt from __consumer_offsets
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kcompat.coordinator.classic_group import ClassicGroup
from kcompat.coordinator.classic_protocol import ClassicProtocol
from kcompat.coordinator.consumer_group import copy_assignment
from kcompat.coordinator.consumer_group_heartbeat import ConsumerGroupHeartbeat
from kcompat.coordinator.group_admin import GroupAdmin
from kcompat.coordinator.offset_metadata_manager import OffsetMetadataManager
from kcompat.coordinator.replay import Replay
from kcompat.coordinator.result import TickResult


class GroupCoordinator(ClassicProtocol, ConsumerGroupHeartbeat, OffsetMetadataManager, GroupAdmin, Replay):
    """Every group of one broker. See the package docstring for how a server drives it."""

    def tick(self, now_ms: int) -> TickResult:
        """Fire every timer due at `now_ms`; call again at `next_deadline_ms` (None = nothing pending)."""
        self._begin(now_ms)
        out = TickResult(self._records, self._completions, self.next_deadline_ms())
        self._records, self._completions = [], []
        return out

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d, _ in self._timers()]
        return min(deadlines) if deadlines else None

    def _timers(self) -> Iterable[tuple[int, Callable[[int], None]]]:
        if self._next_expiry_check is not None:
            yield self._next_expiry_check, self._expire_offsets
        for g in self.groups.values():
            if isinstance(g, ClassicGroup):
                yield from self._classic_timers(g)
            else:
                yield from self._consumer_timers(g)

    def _fire_due(self, now_ms: int) -> None:
        if self._next_expiry_check is None:
            self._next_expiry_check = now_ms + self.config.offsets_retention_check_interval_ms
        while True:
            due = [(d, fire) for d, fire in self._timers() if d <= now_ms]
            if not due:
                return
            # The earliest first, at its own time, so that timers see the order they would have run in.
            deadline, fire = min(due, key=lambda x: x[0])
            fire(max(deadline, 0))


__all__ = ["GroupCoordinator", "copy_assignment"]
