"""The aborted-transaction index of one segment (`<base offset>.txnindex`, Kafka's TransactionIndex).

One entry per transaction whose ABORT marker is in the segment, appended when the marker is,
in Kafka's AbortedTxn layout, 34 bytes big-endian:

     0  version           int16   0
     2  producerId        int64
    10  firstOffset       int64   first offset of the aborted transaction in this partition
    18  lastOffset        int64   offset of its ABORT marker
    26  lastStableOffset  int64   the partition's LSO once the transaction ended

The file is created on the first abort (most segments never get one). Entries are few and small,
so they are also kept in memory: a read_committed fetch answers its AbortedTransactions from that
list, never by decoding batches. A torn last entry (a crash in mid-write) is dropped on open.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kcompat.log.errors import CorruptRecord, KafkaStorageError
from kcompat.log.log_files import PartitionFile
from kcompat.wire.control_batch import control_type_in_batch
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import BatchHeader

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(
            VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Whole entries of an index file; a trailing partial entry is ignored, another version is an error."""
    out = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version != VERSION:
            raise ValueError(f"aborted transaction entry version {version} at byte {pos}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex(PartitionFile):
    # Slots: one of these per partition (or per segment), thousands of them in a broker.
    __slots__ = ("entries",)

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as e:
            raise KafkaStorageError(f"cannot read {path}: {e}") from e
        try:
            self.entries = decode_entries(data)
        except ValueError:
            self.entries = []  # unreadable: rebuilt by the producer-state replay where it can be
            data = b""
            self._rewrite()
        if len(data) % ENTRY_SIZE:
            self._rewrite()

    @property
    def last_offset(self) -> int:
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; one at or below the last entry's marker offset is a replay and ignored."""
        if txn.last_offset <= self.last_offset:
            return
        try:
            with open(self._path, "ab") as f:
                f.write(txn.encode())
        except OSError as e:
            raise KafkaStorageError(f"cannot append to {self.path}: {e}") from e
        self.entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of aborts whose marker is at or after `offset`."""
        kept = [t for t in self.entries if t.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._rewrite()

    def reset(self) -> None:
        self.entries = []
        self._rewrite()

    def collect(self, fetch_offset: int, upper_bound: int, out: list[AbortedTxn]) -> bool:
        """Add to `out` the aborts overlapping [fetch_offset, upper_bound); True once an entry shows
        that no later segment can hold one overlapping the range (its LSO reached the bound)."""
        for t in self.entries:
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound:
                out.append(t)
            if t.last_stable_offset >= upper_bound:
                return True
        return False

    def flush(self) -> None:
        if not self.entries:
            return
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.rename(self._path, path)
        self.path = path

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path)

    def _rewrite(self) -> None:
        if not self.entries:
            self.delete()
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_bytes(b"".join(t.encode() for t in self.entries))
            os.replace(tmp, self.path)
        except OSError as e:
            raise KafkaStorageError(f"cannot rewrite {self.path}: {e}") from e


def collect_aborted(
    indexes: Iterable[TransactionIndex], fetch_offset: int, upper_bound: int
) -> list[AbortedTxn]:
    """Kafka's collectAbortedTransactions: the aborts overlapping [fetch_offset, upper_bound), from the
    indexes of the segment holding fetch_offset onwards, until an entry's LSO shows no later one can."""
    out: list[AbortedTxn] = []
    for index in indexes:
        if index.collect(fetch_offset, upper_bound, out):
            break
    return out


def marker_kind(batch: memoryview, h: BatchHeader) -> int:
    """The control type (ABORT 0, COMMIT 1) of a control batch being appended."""
    try:
        return control_type_in_batch(batch, h)
    except DecodeError as e:
        raise CorruptRecord(f"control batch without a control record key: {e}") from None
