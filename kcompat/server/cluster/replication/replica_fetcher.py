"""Followers: one ReplicaFetcher per leader broker (Kafka's ReplicaFetcherThread and
ReplicaFetcherManager, one fetcher per leader as with num.replica.fetchers=1).

Each fetcher sends Fetch v17 (key 1) to its leader as a replica: ReplicaState{ReplicaId = node.id,
ReplicaEpoch = this broker's epoch}, topics by id, and per partition the follower's log end offset
as FetchOffset, its latest leader epoch as LastFetchedEpoch and the leader epoch it believes
current. The answer is applied per partition:

* records: appended as the leader wrote them (PartitionLog.append_as_follower: offsets, epochs and
  producer state kept), then the follower's high watermark = min(leader's, log end);
* DivergingEpoch{epoch, end_offset}: this log went on in an epoch the leader does not have past
  `end_offset`. The follower looks up its own end of that epoch; the same epoch: truncate to the
  smaller of both ends; an older one: truncate to its end and fetch again (the leader then
  answers with the next divergence, if any), as Kafka's truncateOnFetchResponse does;
* OFFSET_OUT_OF_RANGE with the leader's log start above this log's end: start over there; a
  leader that does not say its log start (Kafka's leaders answer -1) is asked with ListOffsets,
  as Kafka's fetchOffsetAndTruncate does: its log end below ours: truncate there; its log start
  above ours: start over there;
* NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH: wait for the image to say
  who leads now (the fetcher backs off; the ReplicaManager moves the partition).
Each fetcher keeps an incremental fetch session with its leader (KIP-227, fetch_session_handler.py):
a full fetch first, then only the partitions whose fetch parameters changed; a partition absent
from an incremental answer has nothing new. An answer for a partition whose leader epoch changed
meanwhile is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kcompat.log.errors import LogError
from kcompat.server.cluster.controller_channel import ControllerChannel, ControllerUnavailable
from kcompat.server.cluster.replication.fetch_session_handler import (
    FetchRequestData,
    FetchSessionHandler,
    Key,
    PartitionFetch,
)
from kcompat.server.cluster.replication.partition import Partition
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.list_offsets import LIST_OFFSETS
from kcompat.wire.types.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic, ReplicaState
from kcompat.wire.types.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

log = logging.getLogger("kcompat.replication")

FETCH_VERSION = 17
LIST_OFFSETS_VERSION = 8
EARLIEST, LATEST = -2, -1  # ListOffsets timestamps


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    node_id: int
    cluster_id: str
    directory_id: uuid.UUID
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_bytes: int = 10 << 20  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1 << 20  # replica.fetch.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms


class ReplicaFetcher:
    def __init__(
        self,
        leader_id: int,
        endpoint: tuple[str, int],
        settings: FetcherSettings,
        broker_epoch: Callable[[], int],
        topic_id: Callable[[str], uuid.UUID | None],
        now_ms: Callable[[], int],
        on_append: Callable[[Partition], None],
    ) -> None:
        self.leader_id = leader_id
        self.settings = settings
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._broker_epoch = broker_epoch
        self._topic_id = topic_id
        self._now_ms = now_ms
        self._on_append = on_append
        self._channel = ControllerChannel(
            [endpoint], client_id=f"kcompat-replica-fetcher-{settings.node_id}-{leader_id}"
        )
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.session = FetchSessionHandler()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{self.leader_id}")

    def redirect(self, endpoint: tuple[str, int]) -> None:
        self._channel.redirect(*endpoint)

    def add(self, p: Partition) -> None:
        self.partitions[(p.topic, p.index)] = p
        self._wake.set()

    def remove(self, tp: tuple[str, int]) -> None:
        self.partitions.pop(tp, None)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._channel.close()

    async def _run(self) -> None:
        while True:
            if not self.partitions:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                ok = await self._fetch_once()
            except ControllerUnavailable as e:
                log.info("replica fetch from broker %d failed: %s", self.leader_id, e)
                self.session.handle_error()
                ok = False
            except Exception:
                log.exception("replica fetcher for broker %d", self.leader_id)
                ok = False
            if not ok:
                await asyncio.sleep(self.settings.backoff_ms / 1000)

    def _request(self, data: FetchRequestData) -> FetchRequest:
        s = self.settings
        topics: dict[uuid.UUID, list[FetchPartition]] = {}
        for (topic_id, index), pf in data.to_send.items():
            topics.setdefault(topic_id, []).append(pf.as_request(index, s.directory_id))
        forgotten: dict[uuid.UUID, list[int]] = {}
        for topic_id, index in data.to_forget:
            forgotten.setdefault(topic_id, []).append(index)
        return FetchRequest(
            cluster_id=s.cluster_id,
            replica_state=ReplicaState(replica_id=s.node_id, replica_epoch=self._broker_epoch()),
            max_wait_ms=s.max_wait_ms,
            min_bytes=s.min_bytes,
            max_bytes=s.max_bytes,
            isolation_level=0,
            session_id=data.session_id,
            session_epoch=data.session_epoch,
            topics=[FetchTopic(topic_id=tid, partitions=parts) for tid, parts in topics.items()],
            forgotten_topics_data=[
                ForgottenTopic(topic_id=tid, partitions=ps) for tid, ps in forgotten.items()
            ],
            rack_id="",
        )

    async def _fetch_once(self) -> bool:
        sent: dict[Key, tuple[Partition, int, int]] = {}
        wanted: dict[Key, PartitionFetch] = {}
        for (topic, index), p in self.partitions.items():
            topic_id = self._topic_id(topic)
            if topic_id is not None:
                sent[(topic_id, index)] = (p, p.leader_epoch, p.log.log_end_offset)
                wanted[(topic_id, index)] = PartitionFetch(
                    p.leader_epoch,
                    p.log.log_end_offset,
                    p.log.leader_epoch_cache.latest_epoch,
                    p.log.log_start_offset,
                    self.settings.partition_max_bytes,
                )
        if not sent:
            return False
        data = self.session.build(wanted)
        timeout = self.settings.max_wait_ms / 1000 + 10
        r = await self._channel.call(FETCH.key, FETCH_VERSION, self._request(data), timeout_s=timeout)
        answered = [(rt.topic_id, rp.partition_index) for rt in r.responses for rp in rt.partitions]
        was = self.session.session_id
        if not self.session.handle_response(data, r.error_code, r.session_id, answered):
            error = ErrorCode.of(r.error_code).name if r.error_code else "a partition outside the session"
            log.info(
                "replica fetch from broker %d (session %d epoch %d): %s",
                self.leader_id,
                data.session_id,
                data.session_epoch,
                error,
            )
            # A session error is answered at once, with a full fetch; anything else backs off.
            return r.error_code in (
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
            )
        if self.session.session_id != was and self.session.session_id:
            log.info(
                "fetch session %d with broker %d (%d partitions)",
                self.session.session_id,
                self.leader_id,
                len(data.session),
            )
        ok = True
        out_of_range: list[tuple[Partition, int, int]] = []
        for rt in r.responses:
            for rp in rt.partitions:
                got = sent.get((rt.topic_id, rp.partition_index))
                if got is None:
                    continue
                if rp.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and rp.log_start_offset <= got[2]:
                    out_of_range.append(got)
                else:
                    ok = self._apply(got, rp) and ok
        for got in out_of_range:
            ok = await self._out_of_range(*got) and ok
        return ok

    def _apply(self, got: tuple[Partition, int, int], rp: Any) -> bool:
        p, epoch, offset = got
        if (
            self.partitions.get((p.topic, p.index)) is not p
            or p.leader_epoch != epoch
            or p.log.log_end_offset != offset
        ):
            return True  # the partition moved on while the fetch was out
        if rp.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and rp.log_start_offset > offset:
            # The leader no longer holds where this log ends (retention, DeleteRecords): start over
            # at its log start, as Kafka's fetcher does for a follower fallen behind it.
            log.info(
                "%s-%d: log end %d is below the leader's log start %d: starting over there",
                p.topic,
                p.index,
                offset,
                rp.log_start_offset,
            )
            p.log.restart_at(rp.log_start_offset, now_ms=self._now_ms())
            return True
        if rp.error_code != 0:
            log.debug(
                "replica fetch %s-%d from broker %d: %s",
                p.topic,
                p.index,
                self.leader_id,
                ErrorCode.of(rp.error_code).name,
            )
            return False
        try:
            diverging = rp.diverging_epoch
            if diverging is not None and diverging.end_offset >= 0:
                return self._truncate(p, diverging.epoch, diverging.end_offset)
            if rp.records:
                p.log.append_as_follower(rp.records, now_ms=self._now_ms())
        except LogError as e:
            log.error(
                "replica fetch %s-%d from broker %d: cannot append: %s", p.topic, p.index, self.leader_id, e
            )
            return False
        if p.update_follower_hw(rp.high_watermark):
            self._on_append(p)  # consumers reading from this follower (KIP-392) may read further
        return True

    async def _out_of_range(self, p: Partition, epoch: int, offset: int) -> bool:
        """OFFSET_OUT_OF_RANGE without the leader's log start (a Kafka leader answers -1 there): ask
        the leader for its log end and start (Kafka's fetchOffsetAndTruncate); False: back off."""
        leader_end = await self._leader_offset(p, epoch, LATEST)
        if leader_end is None or self.partitions.get((p.topic, p.index)) is not p:
            return False
        if p.leader_epoch != epoch or p.log.log_end_offset != offset:
            return True  # the partition moved on meanwhile
        if leader_end < offset:
            log.info(
                "%s-%d: log end %d is above the leader's %d: truncating", p.topic, p.index, offset, leader_end
            )
            p.log.truncate_to(leader_end, now_ms=self._now_ms())
            return True
        leader_start = await self._leader_offset(p, epoch, EARLIEST)
        if leader_start is None or p.leader_epoch != epoch or p.log.log_end_offset != offset:
            return False
        if leader_start <= offset:
            return False  # in range by now (the leader's log moved): fetch again after the backoff
        log.info(
            "%s-%d: log end %d is below the leader's log start %d: starting over there",
            p.topic,
            p.index,
            offset,
            leader_start,
        )
        p.log.restart_at(leader_start, now_ms=self._now_ms())
        return True

    async def _leader_offset(self, p: Partition, epoch: int, timestamp: int) -> int | None:
        """The leader's log end (LATEST) or start (EARLIEST) of `p`, asked as a replica."""
        request = ListOffsetsRequest(
            replica_id=self.settings.node_id,
            isolation_level=0,
            topics=[
                ListOffsetsTopic(
                    name=p.topic,
                    partitions=[
                        ListOffsetsPartition(
                            partition_index=p.index, current_leader_epoch=epoch, timestamp=timestamp
                        )
                    ],
                )
            ],
        )
        r = await self._channel.call(LIST_OFFSETS.key, LIST_OFFSETS_VERSION, request)
        for rt in r.topics:
            for rp in rt.partitions:
                if rt.name == p.topic and rp.partition_index == p.index and rp.error_code == 0:
                    return int(rp.offset)
        log.debug("%s-%d: ListOffsets %d to broker %d failed", p.topic, p.index, timestamp, self.leader_id)
        return None

    def _truncate(self, p: Partition, leader_epoch: int, leader_end: int) -> bool:
        """Truncate as a DivergingEpoch says; False when nothing changed (then back off, not spin)."""
        local_epoch, local_end = p.log.end_offset_for_epoch(leader_epoch)
        to = min(leader_end, local_end) if local_epoch == leader_epoch else local_end
        to = max(to, 0)
        cache = p.log.leader_epoch_cache
        before = (p.log.log_end_offset, cache.latest_epoch)
        log.info(
            "%s-%d: truncating to %d (diverging epoch %d ends at %d on leader %d; ours ends at %d in epoch %d)",
            p.topic,
            p.index,
            to,
            leader_epoch,
            leader_end,
            self.leader_id,
            local_end,
            local_epoch,
        )
        p.log.truncate_to(to, now_ms=self._now_ms())
        # Epochs that start at the new end hold no records (a leadership that appended nothing):
        # dropped too, as Kafka's truncateTo does, or LastFetchedEpoch would name them again.
        cache.truncate_from_end(to)
        if p.log.replicated_hw is not None and p.log.replicated_hw > p.log.log_end_offset:
            p.log.set_high_watermark(p.log.log_end_offset)
        return (p.log.log_end_offset, cache.latest_epoch) != before


class ReplicaFetcherManager:
    def __init__(
        self,
        settings: FetcherSettings,
        *,
        broker_epoch: Callable[[], int],
        topic_id: Callable[[str], uuid.UUID | None],
        now_ms: Callable[[], int],
        on_append: Callable[[Partition], None],
    ) -> None:
        self.settings = settings
        self._broker_epoch = broker_epoch
        self._topic_id = topic_id
        self._now_ms = now_ms
        self._on_append = on_append
        self.fetchers: dict[int, ReplicaFetcher] = {}

    def add(self, leader_id: int, endpoint: tuple[str, int], p: Partition) -> None:
        f = self.fetchers.get(leader_id)
        if f is None:
            f = self.fetchers[leader_id] = ReplicaFetcher(
                leader_id,
                endpoint,
                self.settings,
                self._broker_epoch,
                self._topic_id,
                self._now_ms,
                self._on_append,
            )
            f.start()
        else:
            f.redirect(endpoint)
        f.add(p)

    def remove(self, tp: tuple[str, int]) -> None:
        for f in self.fetchers.values():
            f.remove(tp)

    async def stop(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        for f in fetchers:
            await f.stop()
