"""`__consumer_offsets` as the group service uses it: created on first need, read at start-up, appended to.

The broker hands this the few things it needs (a topic lookup, topic creation, partition logs, the
offsets settings, and the wake-up of parked fetches), so the group service never sees the broker.
After every append the fetches parked on that partition are woken, as after a Produce: a consumer
of `__consumer_offsets` (kafka-console-consumer with the offsets formatter, a replicator) sees a
commit at once rather than after its fetch's max wait.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kcompat.coordinator import record_pair
from kcompat.log.batch_scan import iter_log_batches
from kcompat.log.errors import LogError
from kcompat.log.partition_log import PartitionLog
from kcompat.storage.topic_store import CONSUMER_OFFSETS, TopicInfo
from kcompat.wire.control_batch import COMMIT, control_type_in_batch
from kcompat.wire.errors import DecodeError
from kcompat.wire.records import Record, build_batch, decode_batch

log = logging.getLogger("kcompat.server.groups")


class OffsetsTopic:
    def __init__(
        self,
        *,
        lookup: Callable[[str], TopicInfo | None],
        create: Callable[[str], Awaitable[TopicInfo]],
        partition_log: Callable[[str, int], PartitionLog],
        append: Callable[..., Any],
        setting: Callable[[str], Any],
        leader_epoch: Callable[[int], int] | None = None,
    ) -> None:
        self._lookup = lookup
        self._create = create
        self._partition_log = partition_log
        self._append = append  # the replica manager's: it wakes fetches parked on the partition
        self._setting = setting
        self.pending_txn: dict[int, list[tuple[bytes, bytes | None]]] = {}  # see read_all
        # Cluster mode (given by cluster/assembly.py): the leader epoch to stamp on partition p, and
        # appends that fail raise rather than being logged, for the coordinator to fail the request.
        # None on a single node: the topic's epoch, and a failed append is logged.
        self.leader_epoch = leader_epoch

    def exists(self) -> bool:
        return self._lookup(CONSUMER_OFFSETS) is not None

    async def ensure(self) -> int:
        """The partition count, creating the topic first as Kafka does (offsets.topic.num.partitions, compacted)."""
        t = self._lookup(CONSUMER_OFFSETS)
        if t is None:
            t = await self._create(CONSUMER_OFFSETS)
        return t.partitions

    def append(
        self, records: list[record_pair.Record], now_ms: int, producer: tuple[int, int] | None = None
    ) -> dict[int, int]:
        """Store `records`, each in its group's partition, one v2 batch per partition, in order; with
        `producer` (id, epoch), as that producer's transactional batches (TxnOffsetCommit).
        Returns the last offset written in each partition."""
        # the coordinator's records: loaded with the coordinator, not at start (issue 31)
        from kcompat.coordinator.share.share_group_records import group_of_key

        written: dict[int, int] = {}
        t = self._lookup(CONSUMER_OFFSETS)
        if t is None:  # deleted under us (it cannot be through the APIs); nothing to keep them in
            log.error("%s is missing; %d group record(s) not stored", CONSUMER_OFFSETS, len(records))
            return written
        by_partition: dict[int, list[Record]] = {}
        for key, value in records:
            group = group_of_key(key)
            part = by_partition.setdefault(record_pair.offsets_partition(group, t.partitions), [])
            part.append(Record(len(part), now_ms, key, value))
        codec = int(self._setting("offsets.topic.compression.codec"))
        for p, recs in by_partition.items():
            if producer is None:
                batch = bytearray(build_batch(recs, compression=codec))
            else:
                batch = bytearray(
                    build_batch(
                        recs,
                        compression=codec,
                        producer_id=producer[0],
                        producer_epoch=producer[1],
                        transactional=True,
                    )
                )
            epoch = t.leader_epoch if self.leader_epoch is None else self.leader_epoch(p)
            try:
                info = self._append(CONSUMER_OFFSETS, p, batch, leader_epoch=epoch, now_ms=now_ms)
                written[p] = info.last_offset
            except LogError as e:
                if self.leader_epoch is not None:
                    raise
                # Kafka would fail the request; the coordinator has applied it already, so the most
                # useful thing left is to say loudly what a restart would lose.
                log.error("cannot store %d group record(s) in %s-%d: %s", len(recs), CONSUMER_OFFSETS, p, e)
                continue
        return written

    def read_all(self) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) of the topic, partition by partition, oldest first (blocking: run in a thread).

        A record that does not decode is logged and left out rather than stopping the broker. Records
        of a transaction come in at its COMMIT marker, not at all after an ABORT; those of a
        transaction without a marker yet are left in `pending_txn` (producer id -> records).
        """
        t = self._lookup(CONSUMER_OFFSETS)
        out: list[tuple[bytes, bytes | None]] = []
        self.pending_txn = {}
        for p in range(t.partitions if t is not None else 0):
            out.extend(self.read_partition(p))
        return out

    def read_partition(self, p: int) -> list[tuple[bytes, bytes | None]]:
        """What read_all reads, of partition `p` alone; its open transactions are added to `pending_txn`."""
        out, pending = self.read_partition_txn(p)
        for producer_id, records in pending.items():
            self.pending_txn.setdefault(producer_id, []).extend(records)
        return out

    def read_partition_txn(
        self, p: int
    ) -> tuple[list[tuple[bytes, bytes | None]], dict[int, list[tuple[bytes, bytes | None]]]]:
        """Partition `p`'s records and, apart, those of its transactions without a marker yet
        (producer id -> records): a shard's load in cluster mode, in a thread beside other loads,
        so nothing is shared with them."""
        import kcompat.coordinator.records as rec
        from kcompat.coordinator.share.share_group_records import decode as share_decode

        out: list[tuple[bytes, bytes | None]] = []
        pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
        plog = self._partition_log(CONSUMER_OFFSETS, p)
        for h, batch in iter_log_batches(plog):
            if h.is_control:
                txn = pending.pop(h.producer_id, [])
                with contextlib.suppress(DecodeError):
                    if control_type_in_batch(batch, h) == COMMIT:
                        out.extend(txn)
                continue
            target = pending.setdefault(h.producer_id, []) if h.is_transactional else out
            try:
                _, records = decode_batch(batch)
            except DecodeError as e:
                log.error(
                    "skipping an unreadable batch at %s-%d offset %d: %s",
                    CONSUMER_OFFSETS,
                    p,
                    h.base_offset,
                    e,
                )
                continue
            for r in records:
                if r.key is None:
                    continue
                try:
                    if rec.decode((r.key, r.value)) is None:
                        share_decode((r.key, r.value))  # a share group's (or one nobody keeps)
                except DecodeError as e:
                    log.error("skipping record %s-%d@%d: %s", CONSUMER_OFFSETS, p, r.offset, e)
                    continue
                target.append((r.key, r.value))
        return out, pending
