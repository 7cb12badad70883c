"""Cluster mode: the Persister of a share-partition leader (Kafka's DefaultStatePersister). The
share-partition's state lives with the share coordinator that leads its `__share_group_state`
partition, abs(javaHashCode("group:topicId:partition")) % n, found in the metadata image:

    led here      ─► this broker's ShareCoordinatorService, called directly (LocalSharePersister)
    led elsewhere ─► Initialize/Read/Write/Delete/ReadSummary ShareGroupState to that broker on the
                     inter-broker listener (a kcompat broker or an Apache Kafka 4.3 one)

NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (the topic still being
created, or a leader moving) and a lost connection are retried with backoff, the leader looked up
again each time, for up to the request timeout; then the last error is the answer. The topic is
created through the controller on first need, as FindCoordinator does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from kcompat.coordinator.share_coordinator import state_partition
from kcompat.server.cluster.controller_channel import ControllerUnavailable
from kcompat.server.cluster.txn_channels import BrokerChannels
from kcompat.server.errors import ApiError
from kcompat.server.share.local_persister import LocalSharePersister, share_key
from kcompat.server.share.persister import (
    PersisterStateBatch,
    SharePartitionKey,
    ShareStateRead,
    ShareStateSummary,
    ShareStateWrite,
)
from kcompat.storage.topic_store import SHARE_GROUP_STATE, TopicInfo
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.delete_share_group_state import DELETE_SHARE_GROUP_STATE
from kcompat.wire.messages.initialize_share_group_state import INITIALIZE_SHARE_GROUP_STATE
from kcompat.wire.messages.read_share_group_state import READ_SHARE_GROUP_STATE
from kcompat.wire.messages.read_share_group_state_summary import READ_SHARE_GROUP_STATE_SUMMARY
from kcompat.wire.messages.write_share_group_state import WRITE_SHARE_GROUP_STATE

log = logging.getLogger("kcompat.server.share")

RETRIABLE = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
)
BACKOFF_S, MAX_BACKOFF_S = 0.1, 1.0
TIMEOUT_S = 30.0  # Kafka's request.timeout.ms default
R = TypeVar("R")


class Metadata(Protocol):
    node_id: int

    def topic(self, name: str) -> TopicInfo | None: ...
    def leader_and_epoch(self, t: TopicInfo, partition: int) -> tuple[int, int]: ...
    async def auto_create_topic(self, name: str) -> TopicInfo: ...


def _body(key: SharePartitionKey, **fields: Any) -> dict[str, Any]:
    return {
        "group_id": key.group_id,
        "topics": [
            {
                "topic_id": uuid.UUID(bytes=key.topic_id),
                "partitions": [{"partition": key.partition, **fields}],
            }
        ],
    }


def _partition(answer: Any) -> Any:
    return answer.results[0].partitions[0]


class NetworkSharePersister:
    def __init__(
        self,
        local: LocalSharePersister,
        channels: BrokerChannels,
        metadata: Metadata,
        *,
        clock: Callable[[], float],
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self._local = local
        self._channels = channels
        self._metadata = metadata
        self._clock = clock
        self._timeout_s = timeout_s

    async def _ask(
        self,
        key: SharePartitionKey,
        local: Callable[[], Awaitable[R]],
        remote: Callable[[int], Awaitable[R]],
        error_of: Callable[[R], int],
        failed: Callable[[int], R],
    ) -> R:
        deadline = self._clock() + self._timeout_s
        backoff = BACKOFF_S
        while True:
            code, answer = await self._once(key, local, remote, error_of, failed)
            if code not in RETRIABLE or self._clock() + backoff > deadline:
                return answer
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _once(
        self,
        key: SharePartitionKey,
        local: Callable[[], Awaitable[R]],
        remote: Callable[[int], Awaitable[R]],
        error_of: Callable[[R], int],
        failed: Callable[[int], R],
    ) -> tuple[int, R]:
        t = self._metadata.topic(SHARE_GROUP_STATE)
        if t is None:
            with contextlib.suppress(ApiError):  # asked of the controller; retried until it exists
                await self._metadata.auto_create_topic(SHARE_GROUP_STATE)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        leader, _ = self._metadata.leader_and_epoch(t, state_partition(share_key(key), t.partitions))
        if leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if leader == self._metadata.node_id:
            answer = await local()
        else:
            try:
                answer = await remote(leader)
            except ControllerUnavailable as e:
                log.debug("share coordinator %d: %s", leader, e)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return error_of(answer), answer

    # --- the Persister -------------------------------------------------------------------------

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int:
        async def remote(node: int) -> int:
            body = _body(key, state_epoch=state_epoch, start_offset=start_offset)
            return int(
                _partition(
                    await self._channels.call(node, INITIALIZE_SHARE_GROUP_STATE.key, 0, body)
                ).error_code
            )

        return await self._ask(
            key, lambda: self._local.initialize_state(key, state_epoch, start_offset), remote, int, int
        )

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateRead:
        async def remote(node: int) -> ShareStateRead:
            p = _partition(
                await self._channels.call(
                    node, READ_SHARE_GROUP_STATE.key, 0, _body(key, leader_epoch=leader_epoch)
                )
            )
            if p.error_code:
                return ShareStateRead(error_code=p.error_code)
            return ShareStateRead(
                error_code=0,
                state_epoch=p.state_epoch,
                start_offset=p.start_offset,
                state_batches=tuple(
                    PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in p.state_batches
                ),
            )

        return await self._ask(
            key,
            lambda: self._local.read_state(key, leader_epoch),
            remote,
            lambda r: r.error_code,
            lambda code: ShareStateRead(error_code=code),
        )

    async def write_state(self, key: SharePartitionKey, write: ShareStateWrite) -> int:
        async def remote(node: int) -> int:
            body = _body(
                key,
                state_epoch=write.state_epoch,
                leader_epoch=write.leader_epoch,
                start_offset=write.start_offset,
                delivery_complete_count=write.delivery_complete_count,
                state_batches=[
                    {
                        "first_offset": b.first_offset,
                        "last_offset": b.last_offset,
                        "delivery_state": b.delivery_state,
                        "delivery_count": b.delivery_count,
                    }
                    for b in write.state_batches
                ],
            )
            return int(
                _partition(await self._channels.call(node, WRITE_SHARE_GROUP_STATE.key, 1, body)).error_code
            )

        return await self._ask(key, lambda: self._local.write_state(key, write), remote, int, int)

    async def delete_state(self, key: SharePartitionKey) -> int:
        async def remote(node: int) -> int:
            return int(
                _partition(
                    await self._channels.call(node, DELETE_SHARE_GROUP_STATE.key, 0, _body(key))
                ).error_code
            )

        return await self._ask(key, lambda: self._local.delete_state(key), remote, int, int)

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateSummary:
        async def remote(node: int) -> ShareStateSummary:
            body = _body(key, leader_epoch=leader_epoch)
            p = _partition(await self._channels.call(node, READ_SHARE_GROUP_STATE_SUMMARY.key, 1, body))
            if p.error_code:
                return ShareStateSummary(error_code=p.error_code)
            return ShareStateSummary(
                error_code=0,
                state_epoch=p.state_epoch,
                leader_epoch=p.leader_epoch,
                start_offset=p.start_offset,
                delivery_complete_count=p.delivery_complete_count,
            )

        return await self._ask(
            key,
            lambda: self._local.read_summary(key, leader_epoch),
            remote,
            lambda r: r.error_code,
            lambda code: ShareStateSummary(error_code=code),
        )

    def close(self) -> None:
        self._channels.close()
