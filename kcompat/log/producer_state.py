"""Idempotent-producer state of one partition (Kafka's ProducerStateManager), and its snapshots.

Per producer id: the epoch and the last 5 batches written (first/last sequence, first/last offset,
max timestamp), enough to answer a retried Produce with the offsets it got the first time. All of
it is in the batch headers, so it is rebuilt by replaying headers from the latest snapshot.

Snapshot file `<20-digit offset>.snapshot` (state as of that offset = the log end offset then),
in Kafka's ProducerSnapshot v1 layout (storage-records/ProducerSnapshot.json), big-endian:

     0  version                int16    1
     2  crc                    uint32   CRC-32C of bytes 6 .. end
     6  entryCount             int32
    10  entries, 46 bytes each:
          0  producerId             int64
          8  epoch                  int16
         10  lastSequence           int32
         14  lastOffset             int64
         22  offsetDelta            int32   lastSequence - firstSequence of the last batch
         26  timestamp              int64   max timestamp of the last batch
         34  coordinatorEpoch       int32
         38  currentTxnFirstOffset  int64   -1 without an open transaction

Only the last batch of each producer is in a snapshot (as in Kafka): batches before it come back
only if they were written after the snapshot and are replayed.

Sequence checks (ProducerAppendInfo.checkProducerEpoch / checkSequence):
  * no state for the producer: any sequence is accepted (state lost to retention, DeleteRecords, or
    expiry must not fence a live producer; librdkafka treats OUT_OF_ORDER on its first batch as fatal);
  * epoch below the current one: INVALID_PRODUCER_EPOCH;
  * a new, higher epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
  * same epoch: a batch matching one of the last 5 (same first and last sequence) is a duplicate and
    gets the original offsets; otherwise first sequence must be last sequence + 1 (wrapping at 2^31-1),
    else OUT_OF_ORDER_SEQUENCE_NUMBER.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kcompat.log.errors import InvalidProducerEpoch, OutOfOrderSequence
from kcompat.log.log_files import SNAPSHOT_SUFFIX, atomic_write, offset_from_name, snapshot_path
from kcompat.log.txn_index import AbortedTxn
from kcompat.wire.checksum import crc32c
from kcompat.wire.control_batch import ABORT
from kcompat.wire.record_batch import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader

log = logging.getLogger("kcompat.log")

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
SNAPSHOT_VERSION = 1
INT32_MAX = 0x7FFFFFFF

_PREFIX = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
CRC_OFFSET = 2
ENTRIES_OFFSET = 6


def _decrement_sequence(seq: int, delta: int) -> int:
    return seq - delta if seq >= delta else INT32_MAX - (delta - seq) + 1


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class ProducerStateManager:
    # Slots: one of these per partition (or per segment), thousands of them in a broker.
    __slots__ = (
        "_snapshots",
        "directory",
        "map_end_offset",
        "ongoing",
        "producer_id_expiration_ms",
        "producers",
    )

    def __init__(self, directory: Path, *, producer_id_expiration_ms: int = 24 * 3600 * 1000) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # producer id -> first offset of its open transaction: the LSO is their minimum, read by
        # every Fetch, so it is kept rather than searched for among all producers
        self.ongoing: dict[int, int] = {}
        self.map_end_offset = 0  # the state reflects every batch below this offset
        # Offsets of the snapshot files, sorted, once listed (Kafka keeps them in memory too): a
        # clean stop of thousands of partitions must not list every directory again.
        self._snapshots: list[int] | None = None

    # --- produce path ---

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """Validate an incoming idempotent batch before it is written.

        Returns the original batch's metadata when this one is a retry of one of the last 5
        (answer with its offsets and do not write), None when it may be appended; raises
        InvalidProducerEpoch or OutOfOrderSequence otherwise.
        """
        if producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(producer_id)
        if entry is None:
            return None
        dup = entry.find_duplicate(epoch, first_seq, last_seq)
        if dup is not None:
            return dup
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"producer {producer_id}: epoch {epoch} is older than the current epoch {entry.epoch}"
            )
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequence(
                    f"producer {producer_id}: new epoch {epoch} must start at sequence 0, not {first_seq}"
                )
            return None
        if entry.epoch == NO_PRODUCER_EPOCH or not entry.batches:
            return None
        if not _in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequence(
                f"producer {producer_id} epoch {epoch}: sequence {first_seq} does not follow {entry.last_seq}"
            )
        return None

    check_and_record = check  # the name the produce handler knows; PartitionLog.append records

    def update(self, h: BatchHeader) -> None:
        """Account a batch now in the log (append, recovery, replay)."""
        if h.last_offset >= self.map_end_offset:
            self.map_end_offset = h.last_offset + 1
        pid = h.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        if h.producer_epoch != entry.epoch:
            entry.epoch = h.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, h.max_timestamp)
        if h.is_control:
            entry.current_txn_first_offset = -1  # a commit or abort marker ends the transaction
            self.ongoing.pop(pid, None)
            return
        if h.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(h.base_sequence, h.last_sequence, h.base_offset, h.last_offset, h.max_timestamp)
            )
        if h.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = h.base_offset
            self.ongoing[pid] = h.base_offset

    def update_control(self, h: BatchHeader, kind: int) -> AbortedTxn | None:
        """Account a COMMIT/ABORT marker now in the log; for an ABORT, the `.txnindex` entry it makes.

        As Kafka's CompletedTxn: the transaction spans from the producer's first transactional
        offset (the marker's own offset if it had none open) to the marker; its LSO is the first
        offset still unstable once it is closed, else the offset after the marker.
        """
        entry = self.producers.get(h.producer_id)
        first = h.base_offset
        if entry is not None and entry.current_txn_first_offset >= 0:
            first = entry.current_txn_first_offset
        self.update(h)
        if kind != ABORT:
            return None
        unstable = self.first_unstable_offset()
        return AbortedTxn(
            h.producer_id, first, h.base_offset, h.base_offset + 1 if unstable is None else unstable
        )

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (the last stable offset), or None."""
        return min(self.ongoing.values()) if self.ongoing else None

    def remove_expired(self, now_ms: int) -> None:
        """Forget producers idle for producer.id.expiration.ms (not those with an open transaction)."""
        limit = self.producer_id_expiration_ms
        for pid in [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= limit
        ]:
            del self.producers[pid]

    def truncate_head(self, log_start_offset: int) -> None:
        """The log now starts later: forget producers whose last batch is gone, and older snapshots."""
        for pid in [pid for pid, e in self.producers.items() if 0 <= e.last_offset < log_start_offset]:
            del self.producers[pid]
            self.ongoing.pop(pid, None)
        for off in self.snapshot_offsets():
            if off < log_start_offset:
                self._delete_snapshot(off)

    def reset(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.map_end_offset = offset

    # --- snapshots ---

    def snapshot_offsets(self, names: list[str] | None = None) -> list[int]:
        """Offsets of the snapshot files (from `names`, the directory's listing, when given; else
        listed once and then kept up to date by this object, the only one that writes them)."""
        if names is None and self._snapshots is not None:
            return list(self._snapshots)
        if names is None:
            try:
                names = os.listdir(self.directory)
            except FileNotFoundError:
                return []
        out = []
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX):
                try:
                    out.append(offset_from_name(name))
                except ValueError:
                    continue
        out.sort()
        self._snapshots = out
        return list(out)

    @property
    def is_empty(self) -> bool:
        """No producer with a batch or an open transaction: what a snapshot of it would hold."""
        return not any(e.batches or e.current_txn_first_offset >= 0 for e in self.producers.values())

    def take_snapshot(self, *, sync: bool = True) -> Path:
        """Write the state as of map_end_offset to `<map_end_offset>.snapshot`."""
        offset = self.map_end_offset
        path = snapshot_path(self.directory, offset)
        known = self.snapshot_offsets()
        atomic_write(path, encode_snapshot(self.producers.values()), sync=sync)
        if offset not in known:
            bisect.insort(known, offset)
        self._snapshots = known
        return path

    def take_snapshot_at_roll(self) -> Path | None:
        """A snapshot at a segment boundary (Kafka takes one on roll), not fsynced: the log's next
        flush does that. Only a shortcut for recovery (which otherwise replays from an older one):
        no disk space for it must not fail the append that rolled, so None then."""
        path = None
        try:
            path = self.take_snapshot(sync=False)
        except OSError as e:
            log.warning(
                "no producer state snapshot for %s at %d: %s", self.directory.name, self.map_end_offset, e
            )
        self.delete_old_snapshots(keep=3)
        return path

    def take_snapshot_if_moved(self, *, sync: bool = True) -> None:
        """A snapshot at a clean close, only when the state moved past the newest one (Kafka's rule:
        a stop after an idle restart then creates no file per partition; file creation is most of
        a close). And none for a log that never had producer state: without a snapshot, a clean
        start takes the state as empty (as Kafka's loader does) and replays nothing."""
        snapshots = self.snapshot_offsets()
        if self.map_end_offset not in snapshots and (snapshots or not self.is_empty):
            self.take_snapshot(sync=sync)
            self.delete_old_snapshots(keep=3)

    def load(
        self,
        log_start_offset: int,
        log_end_offset: int,
        names: list[str] | None = None,
        *,
        clean_shutdown: bool = False,
    ) -> int:
        """Load the newest readable snapshot at or below the log end; returns the offset to replay from.

        Snapshots past the log end (the log was truncated) and unreadable ones are deleted. After a
        clean shutdown, no snapshot at all means no producer state (Kafka's loader takes it so: a
        clean close leaves a snapshot whenever there was state), so nothing is replayed.
        """
        self.producers.clear()
        self.ongoing.clear()
        offsets = self.snapshot_offsets(names)
        if clean_shutdown and not offsets:
            self.map_end_offset = log_end_offset
            return log_end_offset
        for off in reversed(offsets):
            if off > log_end_offset:
                self._delete_snapshot(off)
                continue
            if off < log_start_offset:
                break
            path = snapshot_path(self.directory, off)
            try:
                entries = decode_snapshot(path.read_bytes())
            except (OSError, ValueError) as e:
                log.warning("deleting unreadable producer snapshot %s: %s", path, e)
                self._delete_snapshot(off)
                continue
            for entry in entries:
                self.producers[entry.producer_id] = entry
                if entry.current_txn_first_offset >= 0:
                    self.ongoing[entry.producer_id] = entry.current_txn_first_offset
            self.map_end_offset = off
            return off
        self.map_end_offset = log_start_offset
        return log_start_offset

    def delete_snapshots_after(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off > offset:
                self._delete_snapshot(off)

    def delete_old_snapshots(self, keep: int = 2) -> None:
        for off in self.snapshot_offsets()[:-keep]:
            self._delete_snapshot(off)

    def _delete_snapshot(self, offset: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(snapshot_path(self.directory, offset))
        if self._snapshots is not None and offset in self._snapshots:
            self._snapshots.remove(offset)


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    rows = [e for e in entries if e.batches or e.current_txn_first_offset >= 0]
    rows.sort(key=lambda e: e.producer_id)
    buf = bytearray(_PREFIX.size + _ENTRY.size * len(rows))
    _PREFIX.pack_into(buf, 0, SNAPSHOT_VERSION, 0, len(rows))
    pos = _PREFIX.size
    for e in rows:
        if e.batches:
            b = e.batches[-1]
            last_seq, last_offset, delta, ts = (
                b.last_seq,
                b.last_offset,
                b.last_offset - b.first_offset,
                b.timestamp,
            )
        else:
            last_seq, last_offset, delta, ts = NO_SEQUENCE, -1, 0, e.last_timestamp
        _ENTRY.pack_into(
            buf,
            pos,
            e.producer_id,
            e.epoch,
            last_seq,
            last_offset,
            delta,
            ts,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        pos += _ENTRY.size
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ENTRIES_OFFSET:]))
    return bytes(buf)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Entries of a snapshot file; ValueError if it is truncated, of another version, or fails its CRC."""
    if len(data) < _PREFIX.size:
        raise ValueError("snapshot is shorter than its header")
    version, crc, count = _PREFIX.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise ValueError(f"snapshot version {version} is not {SNAPSHOT_VERSION}")
    if crc32c(memoryview(data)[ENTRIES_OFFSET:]) != crc:
        raise ValueError("snapshot CRC does not match")
    if count < 0 or len(data) != _PREFIX.size + count * _ENTRY.size:
        raise ValueError(f"snapshot of {len(data)} bytes cannot hold {count} entries")
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first = _ENTRY.unpack_from(
            data, _PREFIX.size + i * _ENTRY.size
        )
        entry = ProducerStateEntry(
            pid, epoch, coordinator_epoch=coord_epoch, current_txn_first_offset=txn_first
        )
        entry.last_timestamp = ts
        if last_offset >= 0 and last_seq != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(
                    _decrement_sequence(last_seq, delta), last_seq, last_offset - delta, last_offset, ts
                )
            )
        out.append(entry)
    return out
