"""Which log dir holds each replica, told to the controller (Kafka's AssignmentsManager, KIP-858).

A broker with several log dirs registers them all (BrokerRegistration.LogDirs, the online ones)
and Kafka's controller then places its new replicas in no dir (UNASSIGNED): the broker says where
each one is with AssignReplicasToDirs, and again after a move between dirs. A failed dir is
reported in every heartbeat (OfflineLogDirs): the controller takes the replicas it holds out of
their ISRs and elects other leaders, which it does only for replicas assigned to that dir.

Every interval, the hosted replicas whose dir in the image is not where their log is are sent;
what the controller applies shows in the next image, so a lost request is simply sent again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping

from kcompat.kafka_uuid import from_base64
from kcompat.log.manager import LogManager
from kcompat.metadata.image import MetadataImage
from kcompat.server.cluster.controller_channel import ControllerChannel, ControllerUnavailable
from kcompat.server.isr_port import HostedReplica
from kcompat.wire.messages.assign_replicas_to_dirs import ASSIGN_REPLICAS_TO_DIRS

log = logging.getLogger("kcompat.server.cluster")
NOT_CONTROLLER = 41


class DirectoryAssignments:
    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        *,
        node_id: int,
        broker_epoch: Callable[[], int],
        leader: Callable[[], tuple[str, int] | None],
        image: Callable[[], MetadataImage],
        logs: Callable[[], LogManager | None],
        hosted: Mapping[tuple[str, int], HostedReplica],
        interval_s: float,
    ) -> None:
        self.node_id = node_id
        self._broker_epoch, self._leader, self._image, self._logs = broker_epoch, leader, image, logs
        self._hosted = hosted
        self._interval_s = interval_s
        self._channel = ControllerChannel(bootstrap, client_id=f"broker-{node_id}-directory-assignments")
        self._task: asyncio.Task[None] | None = None

    def _ids(self, offline: bool) -> list[uuid.UUID]:
        logs = self._logs()
        if logs is None:
            return []
        return [from_base64(i) for d, i in logs.directory_ids.items() if (d in logs.offline_dirs) == offline]

    def online_dirs(self) -> list[uuid.UUID]:
        """BrokerRegistration.LogDirs."""
        return self._ids(offline=False)

    def offline_dirs(self) -> list[uuid.UUID]:
        """BrokerHeartbeat.OfflineLogDirs."""
        return self._ids(offline=True)

    def wanted(self) -> dict[uuid.UUID, dict[uuid.UUID, list[int]]]:
        """dir id -> topic id -> partitions: the hosted replicas the image places elsewhere."""
        logs, image = self._logs(), self._image()
        out: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        if logs is None:
            return out
        for topic, index in list(self._hosted):
            d = logs.dir_of(topic, index)
            t = image.topic(topic)
            p = None if t is None else t.partitions.get(index)
            if d is None or t is None or p is None or self.node_id not in p.replicas:
                continue
            actual = from_base64(logs.directory_ids[d])
            at = p.replicas.index(self.node_id)
            if at >= len(p.directories) or p.directories[at] != actual:
                out.setdefault(actual, {}).setdefault(t.topic_id, []).append(index)
        return out

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="directory-assignments")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            wanted = self.wanted()
            if wanted and self._broker_epoch() >= 0:
                await self._send(wanted)

    async def _send(self, wanted: dict[uuid.UUID, dict[uuid.UUID, list[int]]]) -> None:
        body = {
            "broker_id": self.node_id,
            "broker_epoch": self._broker_epoch(),
            "directories": [
                {
                    "id": d,
                    "topics": [
                        {"topic_id": t, "partitions": [{"partition_index": p} for p in ps]}
                        for t, ps in topics.items()
                    ],
                }
                for d, topics in wanted.items()
            ],
        }
        try:
            r = await self._channel.call(ASSIGN_REPLICAS_TO_DIRS.key, 0, body)
        except ControllerUnavailable as e:
            log.info("AssignReplicasToDirs failed: %s", e)
            self._rediscover()
            return
        if r.error_code == 0:
            n = sum(len(ps) for topics in wanted.values() for ps in topics.values())
            log.info("AssignReplicasToDirs: %d replica(s) placed in their log dirs", n)
        elif r.error_code == NOT_CONTROLLER:
            self._rediscover()
        elif r.error_code != 0:
            log.info(
                "AssignReplicasToDirs answered error %d; sent again in %.0f s", r.error_code, self._interval_s
            )

    def _rediscover(self) -> None:
        self._channel.rediscover(self._leader())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._channel.close()
