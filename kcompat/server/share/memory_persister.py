"""A Persister that keeps share-partition state in memory: used until the ShareCoordinator over
`__share_group_state` is wired in. It holds the same facts the real one does (start offset, state
epoch, the batches not yet complete), so the partition leader's code paths are the real ones; only
a restart forgets them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcompat.server.share.persister import (
    PersisterStateBatch,
    SharePartitionKey,
    ShareStateRead,
    ShareStateSummary,
    ShareStateWrite,
)
from kcompat.wire.error_codes import ErrorCode


@dataclass(slots=True)
class _State:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = 0
    batches: dict[int, PersisterStateBatch] = field(default_factory=dict)  # by first offset


def _merge(old: dict[int, PersisterStateBatch], new: tuple[PersisterStateBatch, ...], start: int) -> None:
    """Lay the written batches over the stored ones (a write carries only what changed)."""
    for b in new:
        for first in [f for f, s in old.items() if s.last_offset >= b.first_offset and f <= b.last_offset]:
            s = old.pop(first)
            if s.first_offset < b.first_offset:
                old[s.first_offset] = PersisterStateBatch(
                    s.first_offset, b.first_offset - 1, s.delivery_state, s.delivery_count
                )
            if s.last_offset > b.last_offset:
                old[b.last_offset + 1] = PersisterStateBatch(
                    b.last_offset + 1, s.last_offset, s.delivery_state, s.delivery_count
                )
        old[b.first_offset] = b
    for first in [f for f, s in old.items() if s.last_offset < start]:
        del old[first]


class InMemoryPersister:
    """Kafka's Persister over a dict (see persister.py for the contract)."""

    def __init__(self) -> None:
        self._states: dict[SharePartitionKey, _State] = {}

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int:
        self._states[key] = _State(state_epoch, -1, start_offset)
        return int(ErrorCode.NONE)

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateRead:
        st = self._states.get(key)
        if st is None:
            return ShareStateRead(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        if leader_epoch < st.leader_epoch:
            return ShareStateRead(int(ErrorCode.FENCED_LEADER_EPOCH))
        st.leader_epoch = leader_epoch
        batches = tuple(sorted(st.batches.values(), key=lambda b: b.first_offset))
        return ShareStateRead(0, st.state_epoch, st.start_offset, st.delivery_complete_count, batches)

    async def write_state(self, key: SharePartitionKey, write: ShareStateWrite) -> int:
        st = self._states.get(key)
        if st is None:
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if write.state_epoch < st.state_epoch:
            return int(ErrorCode.FENCED_STATE_EPOCH)
        if write.leader_epoch < st.leader_epoch:
            return int(ErrorCode.FENCED_LEADER_EPOCH)
        if write.start_offset >= 0:
            st.start_offset = write.start_offset
        st.delivery_complete_count = write.delivery_complete_count
        _merge(st.batches, write.state_batches, st.start_offset)
        return int(ErrorCode.NONE)

    async def delete_state(self, key: SharePartitionKey) -> int:
        self._states.pop(key, None)
        return int(ErrorCode.NONE)

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateSummary:
        st = self._states.get(key)
        if st is None:
            return ShareStateSummary(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return ShareStateSummary(
            0, st.state_epoch, st.leader_epoch, st.start_offset, st.delivery_complete_count
        )
