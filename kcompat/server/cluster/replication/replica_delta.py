"""Metadata images to the ReplicaManager (Kafka's ReplicaManager.applyDelta), in cluster mode.

On every published image, in the event loop and before any request sees the image:

* each partition that names this broker among its replicas gets a Partition (its log opened, or
  made beforehand in a worker thread: new_logs, awaited before apply, so that a topic of thousands
  of partitions does not hold the event loop while they are made); where the image makes this broker leader it becomes leader (the epoch recorded at the
  log end), elsewhere a follower fetching from the leader's endpoint on the inter-broker listener;
* a partition that no longer names this broker stops (its fetcher forgets it) and its log is
  deleted (a reassignment moved it away: Kafka's StopReplica with delete); when its topic is gone
  from the image all its logs are deleted, as Kafka deletes a removed topic's logs;
* requests parked on a partition whose leadership changed are woken, so they answer
  NOT_LEADER_OR_FOLLOWER rather than wait out their timeout;
* once, on the first image caught up with the quorum's high watermark: every local log the image
  does not make a replica here (moved away or its topic deleted while this broker was down) is a
  stray, moved aside as `<topic>-<p>.<uuid>-stray` as Kafka 4.x does at start (KAFKA-15355).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from kcompat.log.config import LogConfig
from kcompat.metadata.image import TOPIC_RESOURCE, MetadataImage
from kcompat.server.cluster.kraft_metadata import KRaftMetadata
from kcompat.server.cluster.replication.partition import Partition, Registration
from kcompat.server.cluster.replication.replica_fetcher import ReplicaFetcherManager
from kcompat.server.replica_manager import ReplicaManager

log = logging.getLogger("kcompat.replication")


class ReplicaDeltaApplier:
    def __init__(
        self,
        node_id: int,
        metadata: KRaftMetadata,
        replicas: ReplicaManager,
        hosted: dict[tuple[str, int], Partition],
        fetchers: ReplicaFetcherManager,
        listener: str,
        now_ms: Callable[[], int],
        caught_up: Callable[[MetadataImage], bool] = lambda image: True,
    ) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.replicas = replicas
        self.hosted = hosted  # the replica manager's partitions, as their Partitions
        self.fetchers = fetchers
        self.listener = listener
        self.now_ms = now_ms
        self._deletions: set[asyncio.Task[None]] = set()
        self._no_endpoint: set[tuple[str, int]] = set()
        self.caught_up = caught_up
        self._strays_checked = False

    def new_logs(self, image: MetadataImage) -> list[tuple[str, int, LogConfig]]:
        """The logs `image` makes this broker host that do not exist yet, with their configs: made
        in a worker thread (ReplicaManager.make_logs) before apply opens them."""
        previous, hosted, logs = self.metadata.image, self.hosted, self.replicas.logs
        if logs is None:
            return []
        out = []
        for topic_id, topic in image.topics_by_id.items():
            if previous.topics_by_id.get(topic_id) is topic:
                continue  # unchanged: every replica of it here is hosted already
            config = None
            for index, reg in topic.partitions.items():
                tp = (topic.name, index)
                if self.node_id in reg.replicas and tp not in hosted and logs.get(*tp) is None:
                    config = config or self.metadata.log_config_in(image, topic.name)
                    out.append((topic.name, index, config))
        return out

    def apply(self, image: MetadataImage) -> None:
        previous = self.metadata.image
        self.metadata.set_image(image)
        hosted = self.hosted
        seen: set[tuple[str, int]] = set()
        for topic_id, topic in image.topics_by_id.items():
            key = (TOPIC_RESOURCE, topic.name)
            if previous.topics_by_id.get(topic_id) is topic and previous.configs.get(
                key
            ) is image.configs.get(key):
                # unchanged since the last image (min.insync.replicas is a topic config)
                seen.update(
                    (topic.name, i) for i, p in topic.partitions.items() if self.node_id in p.replicas
                )
                continue
            info = self.metadata.topic(topic.name)
            assert info is not None
            min_isr = int(self.metadata.topic_config(info).get("min.insync.replicas"))
            if previous.configs.get(key) is not image.configs.get(key) and any(
                tp[0] == topic.name for tp in hosted
            ):
                self.replicas.set_config(
                    topic.name, self.metadata.log_config(info)
                )  # retention, segments, ...
            for index, reg in topic.partitions.items():
                tp = (topic.name, index)
                if not self._replica_here(tp, reg.replicas, seen):
                    continue
                state = Registration.of(reg)
                p = hosted.get(tp)
                if p is None:
                    plog = self.replicas.open_log(topic.name, index, self.metadata.log_config(info))
                    p = hosted[tp] = Partition(
                        topic.name, index, self.node_id, plog, Registration(-1, -1, -1, (), ())
                    )
                elif p.state == state and p.min_isr == min_isr:
                    continue
                p.min_isr = min_isr
                self._transition(p, state)
        for tp in list(self._no_endpoint):  # followers whose leader had no endpoint yet
            self._no_endpoint.discard(tp)
            if tp in hosted and tp in seen:
                self._follow(hosted[tp])
        for tp in [tp for tp in hosted if tp not in seen]:
            self.fetchers.remove(tp)
            del hosted[tp]
            self.replicas.fetch_waiters.notify(tp)
            if image.topic(tp[0]) is not None:  # moved away; a deleted topic goes whole, below
                log.info("%s-%d: no longer a replica here: deleting its log", *tp)
                self._background(self.replicas.delete_replica(*tp))
            else:
                log.info("%s-%d: no longer a replica here", *tp)
        for topic_id, topic in previous.topics_by_id.items():
            if topic_id not in image.topics_by_id:
                self._background(self.replicas.delete_partitions(topic.name, len(topic.partitions)))
        if not self._strays_checked and self.caught_up(image):
            self._move_strays_aside()

    def _replica_here(
        self, tp: tuple[str, int], replicas: tuple[int, ...], seen: set[tuple[str, int]]
    ) -> bool:
        """Whether this broker hosts the partition's replica: among its replicas (then `seen`) and
        not in a log dir that failed (then it is hosted no more, its log left where it is)."""
        if self.node_id not in replicas:
            return False
        seen.add(tp)
        logs = self.replicas.logs
        if logs is None or logs.offline_error(*tp) is None:
            return True
        if self.hosted.pop(tp, None) is not None:
            self.fetchers.remove(tp)
        return False

    def _move_strays_aside(self) -> None:
        # Only once caught up: an image short of the quorum's high watermark may lack topics that
        # come later in the metadata log, and a replica still assigned here would look stray.
        self._strays_checked = True
        logs = self.replicas.logs
        strays = [tp for tp in (logs.partitions() if logs is not None else []) if tp not in self.hosted]
        if strays:
            self._background(self.replicas.mark_strays(strays))

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._deletions.add(task)
        task.add_done_callback(self._deletions.discard)

    def _transition(self, p: Partition, state: Registration) -> None:
        tp = (p.topic, p.index)
        if state.leader == self.node_id:
            self.fetchers.remove(tp)
            if p.make_leader(state, self.now_ms()):
                log.info(
                    "%s-%d: leader at epoch %d from offset %d (isr %s)",
                    p.topic,
                    p.index,
                    state.leader_epoch,
                    p.log.log_end_offset,
                    list(state.isr),
                )
            self.replicas.fetch_waiters.notify(
                tp
            )  # parked requests see the new state (the HW may have moved)
            return
        if not p.make_follower(state):
            return
        self.fetchers.remove(tp)
        self.replicas.fetch_waiters.notify(tp)
        self._follow(p)

    def _follow(self, p: Partition) -> None:
        state = p.state
        endpoint = self.metadata.broker_endpoint(state.leader, self.listener)
        if state.leader < 0 or endpoint is None:
            log.info(
                "%s-%d: follower with no leader reachable on %s (leader %d)",
                p.topic,
                p.index,
                self.listener,
                state.leader,
            )
            if state.leader >= 0:
                self._no_endpoint.add((p.topic, p.index))
            return
        log.info(
            "%s-%d: follower of broker %d at epoch %d from offset %d",
            p.topic,
            p.index,
            state.leader,
            state.leader_epoch,
            p.log.log_end_offset,
        )
        self.fetchers.add(state.leader, (endpoint.host, endpoint.port), p)
