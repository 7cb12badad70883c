"""Share sessions (KIP-932, like KIP-227's fetch sessions): which partitions a member's ShareFetch
requests cover, and the epoch that orders them.

    ShareSessionEpoch  0: open a new session (replacing the member's old one)
                      -1: close it (the member's acquired records are released)
                   other: must equal the session's next epoch, which then moves on by one

A stale or repeated epoch is INVALID_SHARE_SESSION_EPOCH; a session that does not exist (never
opened, closed, or evicted) is SHARE_SESSION_NOT_FOUND; more than group.share.max.share.sessions
sessions is SHARE_SESSION_LIMIT_REACHED, unless the least recently used session of a member that
has left its group can make room. As in Kafka, a session belongs to the connection that opened it:
when that connection closes, the session goes and its member's acquired records are released.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kcompat.wire.error_codes import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

SharePartitionId = tuple[uuid.UUID, int]  # topic id, partition


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    connection_id: str = ""  # the connection that opened it (Kafka's connection id)
    partitions: dict[SharePartitionId, None] = field(default_factory=dict)  # ordered set


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open(
        self, group_id: str, member_id: str, is_member: Callable[[str, str], bool], connection_id: str = ""
    ) -> ShareSession | ErrorCode:
        key = (group_id, member_id)
        if (
            key not in self.sessions
            and len(self.sessions) >= self.max_sessions
            and not self._evict(is_member)
        ):
            return ErrorCode.SHARE_SESSION_LIMIT_REACHED
        self.sessions.pop(key, None)  # a new session goes to the back: the most recently used
        s = self.sessions[key] = ShareSession(group_id, member_id, 1, connection_id)
        return s

    def _evict(self, is_member: Callable[[str, str], bool]) -> bool:
        """Make room: drop the least recently used session of a member no longer in its group."""
        for key in self.sessions:
            if not is_member(*key):
                del self.sessions[key]
                return True
        return False

    def next(self, group_id: str, member_id: str, epoch: int) -> ShareSession | ErrorCode:
        """The session a request with `epoch` (not 0) continues; with -1 it is removed."""
        s = self.sessions.get((group_id, member_id))
        if s is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch == FINAL_EPOCH:
            del self.sessions[(group_id, member_id)]
            return s
        if epoch != s.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        s.epoch = s.epoch + 1 if s.epoch < 0x7FFFFFFF else 1
        self.sessions[(group_id, member_id)] = self.sessions.pop((group_id, member_id))  # most recent last
        return s

    def remove_member(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def remove_connection(self, connection_id: str) -> list[ShareSession]:
        """The sessions the closed connection opened, removed (a session since reopened from another
        connection is not its own any more)."""
        gone = [s for s in self.sessions.values() if connection_id and s.connection_id == connection_id]
        for s in gone:
            del self.sessions[(s.group_id, s.member_id)]
        return gone

    def __len__(self) -> int:
        return len(self.sessions)
