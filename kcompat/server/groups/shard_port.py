"""Which groups this broker coordinates, and when a group write is durable: the port GroupService
asks, and a single node's answer.

    GroupService ──shards──► GroupShardsPort
                                ├── AllGroupsHere (here): a single node coordinates every group; an
                                │   append is durable once in the page cache
                                └── GroupShards (cluster/group_shards.py, given by cluster/assembly.py):
                                    the __consumer_offsets partitions this broker leads, writes
                                    answered once replicated
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kcompat.wire.error_codes import ErrorCode

if TYPE_CHECKING:
    from kcompat.coordinator.record_pair import Record


class GroupShardsPort(Protocol):
    @property
    def coordinates_all(self) -> bool:
        """Every group is coordinated here (a batched request need not be split by group)."""

    async def admit(self, group: str | None, *, creates: bool, committed: bool) -> ErrorCode:
        """Before a coordinator call: NONE when it may run here now, else the group's error
        (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS). `creates`: the call may store records
        (__consumer_offsets is made first where the broker makes it); `committed`: it reads
        committed offsets, so what was written before must be durable first."""

    def error(self, group: str) -> ErrorCode:
        """NONE when this broker coordinates `group` now."""

    def partition_error(self, p: int) -> ErrorCode:
        """NONE when the groups of __consumer_offsets partition `p` are coordinated (loaded) here now."""

    def short_isr(self, records: list[Record]) -> list[int]:
        """The partitions of `records` whose ISR is below min.insync.replicas (acks=all would fail)."""

    def reload(self, p: int) -> None:
        """Throw partition `p`'s groups away and load them again from the log."""

    def reload_for(self, records: list[Record]) -> None:
        """An append of `records` failed: their partitions start over from their log."""

    async def replicated(self, written: dict[int, int]) -> ErrorCode:
        """Once the last offset written to each partition is durable."""

    async def close(self) -> None: ...


class GroupHost(Protocol):
    """What a single node's answer needs of the GroupService."""

    def has_state(self) -> bool: ...
    async def ensure_topic(self) -> int: ...


class AllGroupsHere:
    """A single node: every group is coordinated here, and an append is durable at once."""

    coordinates_all = True

    def __init__(self, service: GroupHost) -> None:
        self._service = service

    async def admit(self, group: str | None, *, creates: bool, committed: bool) -> ErrorCode:
        if creates or self._service.has_state():
            await self._service.ensure_topic()
        return ErrorCode.NONE

    def error(self, group: str) -> ErrorCode:
        return ErrorCode.NONE

    def partition_error(self, p: int) -> ErrorCode:
        return ErrorCode.NONE

    def short_isr(self, records: list[Record]) -> list[int]:
        return []

    def reload(self, p: int) -> None:
        pass

    def reload_for(self, records: list[Record]) -> None:
        pass

    async def replicated(self, written: dict[int, int]) -> ErrorCode:
        return ErrorCode.NONE

    async def close(self) -> None:
        pass
