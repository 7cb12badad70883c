"""Which share-partitions this broker's share coordinator serves, and when a write is durable: the
port ShareCoordinatorService asks, and a single node's answer.

    ShareCoordinatorService ──shards──► ShareShardsPort
        ├── AllSharesHere (here): a single node serves every share-partition; it replays the whole
        │   topic at start-up, and an append is durable once in the page cache
        └── ShareShards (cluster/share_shards.py): the __share_group_state partitions this broker
            leads, loaded on election, writes answered once replicated
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from kcompat.server.share.state_log import StateRecord
from kcompat.wire.error_codes import ErrorCode


class ShareShardsPort(Protocol):
    @property
    def loads_at_start(self) -> bool:
        """The service replays the whole topic at start-up (a single node)."""

    async def admit(self, p: int) -> ErrorCode:
        """NONE when a call for a share-partition of state partition `p` may run here now (-1: the
        topic does not exist yet), else NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""

    def served(self, num_partitions: int) -> list[int]:
        """The partitions of the topic whose share-partitions are served here now."""

    def short_isr(self, p: int) -> bool:
        """Partition `p`'s ISR is below min.insync.replicas (an acks=all append would fail)."""

    def leader_epoch(self, p: int) -> int | None:
        """The leader epoch to stamp on an append to partition `p` (None: the topic's own)."""

    def reload(self, p: int) -> None:
        """An append to `p` failed: its state starts over from its log."""

    async def replicated(self, written: dict[int, int]) -> ErrorCode:
        """Once the last offset written to each partition is durable."""

    async def close(self) -> None: ...


class ShareHost(Protocol):
    """What a single node's answer needs of the service."""

    def read_partition(self, p: int) -> list[StateRecord]: ...
    def replay(self, p: int, records: list[StateRecord]) -> int: ...
    def unload(self, p: int) -> None: ...


class AllSharesHere:
    loads_at_start = True

    def __init__(self, service: ShareHost) -> None:
        self._service = service
        self._reloads: set[asyncio.Task[None]] = set()

    async def admit(self, p: int) -> ErrorCode:
        return ErrorCode.NONE

    def served(self, num_partitions: int) -> list[int]:
        return list(range(num_partitions))

    def short_isr(self, p: int) -> bool:
        return False

    def leader_epoch(self, p: int) -> int | None:
        return None

    def reload(self, p: int) -> None:
        # Synchronously, so the next call sees the state of the log (the log is local and small).
        self._service.unload(p)
        self._service.replay(p, self._service.read_partition(p))

    async def replicated(self, written: dict[int, int]) -> ErrorCode:
        return ErrorCode.NONE

    async def close(self) -> None:
        pass
