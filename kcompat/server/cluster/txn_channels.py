"""Cluster mode: the transaction coordinator's requests to other brokers, and the waits for
replication that make a marker durable.

    TxnMarkerSender (Kafka's TransactionMarkerChannelManager): the COMMIT/ABORT markers of one
        transaction, grouped per partition leader from the metadata image. A partition led here is
        appended to directly; the others get WriteTxnMarkers v1 (27) on the inter-broker listener.
        Either is acknowledged only once the marker is replicated (the leader answers after its
        high watermark passes it, acks=all). NOT_LEADER_OR_FOLLOWER, a lost connection and the
        other retriable codes: the unacknowledged partitions are tried again with the leader the
        image names then. INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED: a newer producer
        or coordinator owns the transaction, the job is dropped (as Kafka does). The caller writes
        Complete* only when `send` returns True.
    TxnVerifier (Kafka's AddPartitionsToTxnManager): a partition leader asks the transaction
        coordinator's broker with AddPartitionsToTxn v5 whether a transactional batch's partition
        is in its producer's open transaction (VerifyOnly, KIP-890 part 1: transactions v1), or
        adds it (transactions v2: Produce v12+ and TxnOffsetCommit v5, KIP-890 part 2), and
        translates the answer into Produce's codes as Kafka's ReplicaManager does.
    BrokerChannels: one connection per broker, one request at a time (ControllerChannel's framing).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from kcompat.coordinator.record_pair import offsets_partition
from kcompat.server.cluster.controller_channel import ControllerChannel, ControllerUnavailable
from kcompat.server.delayed_fetch import FetchWaiters
from kcompat.server.delayed_produce import await_replicated
from kcompat.server.transactions.verification import produce_error
from kcompat.storage.topic_store import TRANSACTION_STATE, TopicInfo
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.add_partitions_to_txn import ADD_PARTITIONS_TO_TXN
from kcompat.wire.messages.write_txn_markers import WRITE_TXN_MARKERS

log = logging.getLogger("kcompat.server.transactions")

WRITE_TXN_MARKERS_VERSION = 1  # what every broker of Kafka 4 answers; v2 only adds transaction_version
BROKER_ADD_VERSION = 5  # AddPartitionsToTxn as brokers send it (v4+: batched, VerifyOnly)
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms default
REQUEST_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms default

# Kafka's TransactionMarkerRequestCompletionHandler: the marker is no longer wanted.
_ABANDON = {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
# ... and the partition can be counted as done (the producer never wrote to it).
_SKIP = {ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION}
TopicPartition = tuple[str, int]


class Metadata(Protocol):
    """What these need of the broker's metadata (kraft_metadata.py)."""

    def topic(self, name: str) -> TopicInfo | None: ...
    def leader_and_epoch(self, t: TopicInfo, partition: int) -> tuple[int, int]: ...
    def broker_endpoint(self, node_id: int, listener: str) -> Any: ...


class BrokerChannels:
    def __init__(self, metadata: Metadata, listener: str, node_id: int) -> None:
        self.metadata = metadata
        self.listener = listener
        self.node_id = node_id
        self._channels: dict[int, tuple[ControllerChannel, asyncio.Lock]] = {}

    async def call(self, node: int, api_key: int, version: int, body: Any) -> Any:
        """ControllerUnavailable when the broker has no endpoint or the call fails."""
        ep = self.metadata.broker_endpoint(node, self.listener)
        if ep is None:
            raise ControllerUnavailable(f"broker {node} has no endpoint on {self.listener}")
        entry = self._channels.get(node)
        if entry is None:
            channel = ControllerChannel(
                [(ep.host, ep.port)],
                client_id=f"kcompat-broker-{self.node_id}-txn",
                request_timeout_s=REQUEST_TIMEOUT_S,
            )
            entry = self._channels[node] = (channel, asyncio.Lock())
        channel, lock = entry
        async with lock:
            channel.redirect(ep.host, ep.port)  # the broker may have come back elsewhere
            return await channel.call(api_key, version, body)

    def close(self) -> None:
        for channel, _ in self._channels.values():
            channel.close()
        self._channels.clear()


class TxnMarkerSender:
    def __init__(
        self,
        channels: BrokerChannels,
        *,
        write_local: Callable[[str, int, int, int, bool, int], ErrorCode],
        partitions: dict[TopicPartition, Any],
        waiters: FetchWaiters,
    ) -> None:
        self.channels = channels
        self._write_local = write_local  # TransactionService.write_marker
        self._partitions = partitions
        self._waiters = waiters

    async def send(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: tuple[TopicPartition, ...],
        still_mine: Callable[[], bool],
    ) -> bool:
        """True once every partition acknowledged its marker; False when the job was dropped."""
        left = set(partitions)
        metadata = self.channels.metadata
        while left:
            if not still_mine():
                return False  # the coordinator moved: the new one completes the transaction
            by_leader: dict[int, list[TopicPartition]] = {}
            for topic, p in sorted(left):
                t = metadata.topic(topic)
                if t is None or p >= t.partitions:
                    left.discard((topic, p))  # deleted since: nothing left to mark
                    continue
                by_leader.setdefault(metadata.leader_and_epoch(t, p)[0], []).append((topic, p))
            answers = await asyncio.gather(
                *(
                    self._send_to(node, tps, producer_id, epoch, commit, coordinator_epoch)
                    for node, tps in by_leader.items()
                )
            )
            for codes in answers:
                for tp, code in codes.items():
                    if code in _ABANDON:
                        log.info(
                            "the %s marker of %s to %s-%d was fenced (%s); not retried",
                            "COMMIT" if commit else "ABORT",
                            txn_id,
                            tp[0],
                            tp[1],
                            code.name,
                        )
                        return False
                    if code == ErrorCode.NONE or code in _SKIP:
                        left.discard(tp)
            if left:
                await asyncio.sleep(RETRY_BACKOFF_S)  # Kafka's retry backoff before the next round
        return True

    async def _send_to(
        self,
        node: int,
        tps: list[TopicPartition],
        producer_id: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> dict[TopicPartition, ErrorCode]:
        if node < 0:
            return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if node == self.channels.node_id:
            return await self.write_replicated(tps, producer_id, epoch, commit, coordinator_epoch)
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        body = {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": epoch,
                    "transaction_result": commit,
                    "coordinator_epoch": coordinator_epoch,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                }
            ]
        }
        try:
            r = await self.channels.call(node, WRITE_TXN_MARKERS.key, WRITE_TXN_MARKERS_VERSION, body)
        except ControllerUnavailable as e:
            log.info("WriteTxnMarkers to broker %d failed (%s); retrying", node, e)
            return dict.fromkeys(tps, ErrorCode.NETWORK_EXCEPTION)
        out = dict.fromkeys(tps, ErrorCode.UNKNOWN_SERVER_ERROR)
        for m in r.markers:
            for t in m.topics:
                for part in t.partitions:
                    out[(t.name, part.partition_index)] = ErrorCode.of(part.error_code)
        return out

    async def write_replicated(
        self, tps: list[TopicPartition], producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> dict[TopicPartition, ErrorCode]:
        """Markers to partitions led here, each answered once replicated (also WriteTxnMarkers')."""
        out: dict[TopicPartition, ErrorCode] = {}
        pending: dict[TopicPartition, int] = {}
        for topic, p in tps:
            part = self._partitions.get((topic, p))
            if part is not None and part.is_leader and len(part.state.isr) < part.min_isr:
                out[(topic, p)] = ErrorCode.NOT_ENOUGH_REPLICAS  # acks=all refuses before appending
                continue
            code = self._write_local(topic, p, producer_id, epoch, commit, coordinator_epoch)
            if code == ErrorCode.NONE and part is not None:
                pending[(topic, p)] = part.log.log_end_offset - 1  # no await since the append
            else:
                out[(topic, p)] = code
        if pending:
            appends = list(pending.items())
            codes = await await_replicated(self._partitions, self._waiters, appends, REQUEST_TIMEOUT_S)
            out.update(zip((tp for tp, _ in appends), codes, strict=True))
        return out


class TxnVerifier:
    def __init__(self, channels: BrokerChannels) -> None:
        self.channels = channels

    async def verify(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        tp: TopicPartition,
        transaction_abortable: bool,
        add: bool = False,
    ) -> tuple[ErrorCode, str]:
        """Produce's code for the batch (NONE: in the transaction, or added to it with `add`) and a
        message. `transaction_abortable`: the request's version knows TRANSACTION_ABORTABLE."""
        metadata = self.channels.metadata
        t = metadata.topic(TRANSACTION_STATE)
        # The id's partition: Kafka's abs(hashCode) % partitions, as for groups.
        node = -1 if t is None else metadata.leader_and_epoch(t, offsets_partition(txn_id, t.partitions))[0]
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if node >= 0:
            body = {
                "transactions": [
                    {
                        "transactional_id": txn_id,
                        "producer_id": producer_id,
                        "producer_epoch": epoch,
                        "verify_only": not add,
                        "topics": [{"name": tp[0], "partitions": [tp[1]]}],
                    }
                ]
            }
            try:
                r = await self.channels.call(node, ADD_PARTITIONS_TO_TXN.key, BROKER_ADD_VERSION, body)
            except ControllerUnavailable as e:
                log.info("AddPartitionsToTxn to broker %d failed (%s)", node, e)
                code = ErrorCode.NETWORK_EXCEPTION
            else:
                code = ErrorCode.of(r.error_code)
                for txn in r.results_by_transaction if not code else ():
                    for topic in txn.topic_results:
                        for part in topic.results_by_partition:
                            code = ErrorCode.of(part.partition_error_code)
        return produce_error(code, transaction_abortable)
