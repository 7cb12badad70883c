"""The client side of incremental fetch sessions (KIP-227), as Kafka's FetchSessionHandler: what a
follower's ReplicaFetcher puts in each Fetch, and what it learns from each answer. No I/O.

    next (session_id, epoch)   request                                    after the answer
    ------------------------   ----------------------------------------   -----------------------------------
    (0, 0)  no session         full: every partition                      id != 0: (id, 1); id 0: stay sessionless
    (id, 0) close and reopen   full: every partition                      as above
    (id, n > 0) incremental    only partitions added or whose fetch       (id, n + 1); id 0 from the leader:
                               parameters changed; removed ones           the session is closed, (0, 0)
                               in forgotten_topics_data

Errors: FETCH_SESSION_ID_NOT_FOUND starts over with no session (0, 0); any other top-level error,
an I/O error, or an answer naming a partition the request's session does not hold closes the
session and reopens it with the next full fetch (id, 0).

The leader answers an incremental fetch only with partitions that have records, a new high
watermark or log start offset, or an error: a partition absent from the answer has not changed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.types.fetch import FetchPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0

Key = tuple[uuid.UUID, int]  # (topic id, partition): Fetch v13+ names topics by id


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """What a Fetch says of one partition; a change in any field sends it again in a session."""

    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int

    def as_request(self, index: int, directory_id: uuid.UUID) -> FetchPartition:
        return FetchPartition(
            partition=index,
            current_leader_epoch=self.current_leader_epoch,
            fetch_offset=self.fetch_offset,
            last_fetched_epoch=self.last_fetched_epoch,
            log_start_offset=self.log_start_offset,
            partition_max_bytes=self.partition_max_bytes,
            replica_directory_id=directory_id,
        )


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    session_id: int
    session_epoch: int
    to_send: dict[Key, PartitionFetch]  # the partitions the request carries
    to_forget: list[Key]
    session: dict[Key, PartitionFetch]  # every partition the session holds once this request is served

    @property
    def full(self) -> bool:
        return self.session_epoch == INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.session: dict[Key, PartitionFetch] = {}  # what the leader's session holds, as last sent

    def build(self, wanted: Mapping[Key, PartitionFetch]) -> FetchRequestData:
        """The next request for the partitions `wanted` now."""
        next_session = dict(wanted)
        if self.epoch == INITIAL_EPOCH:
            return FetchRequestData(self.session_id, INITIAL_EPOCH, next_session, [], next_session)
        to_send = {k: v for k, v in wanted.items() if self.session.get(k) != v}
        to_forget = [k for k in self.session if k not in wanted]
        return FetchRequestData(self.session_id, self.epoch, to_send, to_forget, next_session)

    def handle_response(
        self, sent: FetchRequestData, error_code: int, session_id: int, partitions: Iterable[Key]
    ) -> bool:
        """Learn from the answer to `sent`; False when its partitions must not be used."""
        if error_code != 0:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self._reset()
            else:
                self._close_existing()
            return False
        if any(k not in sent.session for k in partitions):  # the leader lost track of our session
            self._close_existing()
            return False
        self.session = sent.session
        if session_id == INVALID_SESSION_ID:
            self._reset()  # no session (full fetch without a slot) or the leader closed it
        else:
            self.session_id = session_id
            self.epoch = 1 if sent.full else _next_epoch(sent.session_epoch)
        return True

    def handle_error(self) -> None:
        """No answer (connection lost, timeout): the next request is full and reopens the session."""
        self._close_existing()

    def _reset(self) -> None:
        self.session_id, self.epoch, self.session = INVALID_SESSION_ID, INITIAL_EPOCH, {}

    def _close_existing(self) -> None:
        self.epoch, self.session = INITIAL_EPOCH, {}


def _next_epoch(epoch: int) -> int:
    return 1 if epoch == 2**31 - 1 else epoch + 1
