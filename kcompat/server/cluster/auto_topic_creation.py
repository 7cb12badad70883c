"""Cluster mode: topics that auto.create.topics.enable creates are created by the controller
(Kafka's AutoTopicCreationManager).

A Metadata request naming an unknown topic (with auto-creation allowed) makes the broker send a
CreateTopics to the active controller, inside an Envelope as any forwarded request, and answer
LEADER_NOT_AVAILABLE for the topic meanwhile; the client asks again and finds the topic once the
controller's records reach this broker's image. One CreateTopics per topic at a time (Kafka's
inflightTopics), with the broker's defaults: num.partitions and default.replication.factor, or
for __consumer_offsets the offsets.topic.* settings and its compacted configs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kcompat.config.broker_share_properties import share_state_topic_configs
from kcompat.server.cluster.forwarding_manager import ForwardingManager
from kcompat.storage.topic_store import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TRANSACTION_STATE
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_topics import CREATE_TOPICS

log = logging.getLogger("kcompat.cluster")

CREATE_TOPICS_VERSION = 7
CREATE_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms default, which its manager uses


class AutoTopicCreationManager:
    def __init__(self, forwarding: ForwardingManager, setting: Callable[[str], Any]) -> None:
        self._forwarding = forwarding
        self._setting = setting
        self._in_flight: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def create(self, name: str) -> None:
        """Ask the controller for `name` unless a request for it is already on its way."""
        self.create_spec(self.creatable_topic(name))

    def create_spec(self, topic: dict[str, Any]) -> None:
        """Ask the controller for the topic `topic` (a CreatableTopic: a streams group's internal
        topic with its own partition count and configs) unless one is already on its way."""
        name = topic["name"]
        if name in self._in_flight:
            return
        self._in_flight.add(name)
        task = asyncio.get_running_loop().create_task(self._create(topic), name=f"auto-create-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def creatable_topic(self, name: str) -> dict[str, Any]:
        if name == CONSUMER_OFFSETS:
            partitions = int(self._setting("offsets.topic.num.partitions"))
            rf = int(self._setting("offsets.topic.replication.factor"))
            configs = {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(self._setting("offsets.topic.segment.bytes")),
            }
        elif name == TRANSACTION_STATE:  # as Kafka's TransactionStateManager creates it
            partitions = int(self._setting("transaction.state.log.num.partitions"))
            rf = int(self._setting("transaction.state.log.replication.factor"))
            configs = {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": str(self._setting("transaction.state.log.min.isr")),
                "segment.bytes": str(self._setting("transaction.state.log.segment.bytes")),
            }
        elif name == SHARE_GROUP_STATE:  # as Kafka's ShareCoordinatorService creates it
            partitions = int(self._setting("share.coordinator.state.topic.num.partitions"))
            rf = int(self._setting("share.coordinator.state.topic.replication.factor"))
            configs = share_state_topic_configs(self._setting)
            configs["min.insync.replicas"] = str(self._setting("share.coordinator.state.topic.min.isr"))
        else:
            partitions, rf, configs = (
                int(self._setting("num.partitions")),
                int(self._setting("default.replication.factor")),
                {},
            )
        return {
            "name": name,
            "num_partitions": partitions,
            "replication_factor": rf,
            "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in configs.items()],
        }

    async def _create(self, topic: dict[str, Any]) -> None:
        name = topic["name"]
        body = {
            "topics": [topic],
            "timeout_ms": CREATE_TIMEOUT_MS,
            "validate_only": False,
        }
        try:
            r = await self._forwarding.send(CREATE_TOPICS.key, CREATE_TOPICS_VERSION, body)
            if isinstance(r, ErrorCode):
                log.warning("auto-creation of topic %s: %s", name, r.name)
                return
            result = r.topics[0]
            if result.error_code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                log.warning(
                    "auto-creation of topic %s refused by the controller: error %d %s",
                    name,
                    result.error_code,
                    result.error_message or "",
                )
            elif result.error_code == 0:
                log.info(
                    "auto-created topic %s through the controller (%d partitions)",
                    name,
                    result.num_partitions,
                )
        finally:
            self._in_flight.discard(name)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
