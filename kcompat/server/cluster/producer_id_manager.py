"""Cluster mode: InitProducerId's ids from blocks the controller allocates (AllocateProducerIds, key 67, v0).

The ProducerIds port (server/metadata_view.py) backed by kcompat.metadata.producer_id_blocks:
next_id() is synchronous, as the handler calls it; it takes an id from the current block and, when
the block says so, starts one AllocateProducerIds to the active controller in the background.
Without an id it raises ApiError(COORDINATOR_LOAD_IN_PROGRESS), which the client retries, as
Kafka's RPCProducerIdManager answers before its first block arrives.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kcompat.metadata.producer_id_blocks import ProducerIdBlocks
from kcompat.server.cluster.controller_channel import ControllerChannel, ControllerUnavailable
from kcompat.server.errors import ApiError
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.allocate_producer_ids import ALLOCATE_PRODUCER_IDS

log = logging.getLogger("kcompat.cluster")


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ControllerProducerIds:
    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        *,
        node_id: int,
        broker_epoch: Callable[[], int],
        leader: Callable[[], tuple[str, int] | None] = lambda: None,
    ) -> None:
        self.node_id = node_id
        self.blocks = ProducerIdBlocks()
        self._broker_epoch = broker_epoch
        self._leader = leader
        self._channel = ControllerChannel(bootstrap, client_id=f"broker-{node_id}-producer-ids")
        self._task: asyncio.Task[None] | None = None

    def next_id(self) -> int:
        pid, send = self.blocks.next_id(_now_ms())
        if send:
            self._task = asyncio.get_running_loop().create_task(
                self._allocate(), name="allocate-producer-ids"
            )
        if pid is None:
            raise ApiError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "Producer ID block is full. Waiting for next block"
            )
        return pid

    async def _allocate(self) -> None:
        body = {"broker_id": self.node_id, "broker_epoch": self._broker_epoch()}
        try:
            r = await self._channel.call(ALLOCATE_PRODUCER_IDS.key, 0, body)
        except ControllerUnavailable as e:
            log.info("AllocateProducerIds failed: %s", e)
            self._rediscover()
            self.blocks.on_failure(_now_ms())
            return
        if r.error_code == 0 and self.blocks.on_block(r.producer_id_start, r.producer_id_len):
            log.info(
                "producer id block [%d, %d) from the controller",
                r.producer_id_start,
                r.producer_id_start + r.producer_id_len,
            )
            return
        if r.error_code == ErrorCode.NOT_CONTROLLER:
            self._rediscover()
        log.info(
            "AllocateProducerIds answered error %d (start %d, length %d)",
            r.error_code,
            r.producer_id_start,
            r.producer_id_len,
        )
        self.blocks.on_failure(_now_ms())

    def _rediscover(self) -> None:
        self._channel.rediscover(self._leader())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._channel.close()
