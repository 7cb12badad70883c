"""MetadataLoader: `__cluster_metadata` record batches in, MetadataImages out, sans IO (Kafka's
metadata/.../image/loader/MetadataLoader.java).

The Raft observer hands over the record batches of each Fetch answer and the answer's high
watermark. Batches are kept until the high watermark passes them (a record below it is committed
by the quorum; one above may still be truncated), then replayed in order:

* control batches are skipped (LeaderChange, snapshot header/footer, Voters), but for KRaftVersion:
  its level is the image's kraft.version (ApiVersions lists it, as Kafka's metadata cache does);
* a metadata transaction (BeginTransactionRecord ... EndTransactionRecord) is buffered whole and
  dropped on AbortTransactionRecord (KAFKA-14538); the bootstrap records arrive in one;
* an image is published only outside a transaction, at the end of a batch.

When the leader answers with a SnapshotId instead (its log no longer starts where we are), the
whole snapshot is fetched and `load_snapshot` starts the image over from it.
"""

from __future__ import annotations

from kcompat.metadata import records as r
from kcompat.metadata.image import MetadataDelta, MetadataImage
from kcompat.wire.control_records import ControlType, parse_control_key
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import BatchHeader, read_header, split_batches
from kcompat.wire.records import decode_batch


class MetadataLoader:
    def __init__(self, image: MetadataImage | None = None) -> None:
        self.image = image or MetadataImage()
        self._pending: list[tuple[BatchHeader, bytes]] = []
        self._delta: MetadataDelta | None = None  # records since the last published image
        self.in_transaction = False
        self.next_offset = self.image.offset + 1  # the next Fetch offset
        self.last_fetched_epoch = self.image.epoch
        self.high_watermark = 0

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """The records of one Fetch answer, in order, starting at next_offset."""
        for pos, size in split_batches(data):
            batch = bytes(data[pos : pos + size])
            h = read_header(batch)
            if h.last_offset < self.next_offset:
                continue  # already held or applied
            self._pending.append((h, batch))
            self.next_offset = h.last_offset + 1
            self.last_fetched_epoch = h.partition_leader_epoch

    def truncate(self, offset: int) -> None:
        """Drop fetched batches at and after `offset` (a DivergingEpoch answer); never below the image."""
        self._pending = [(h, b) for h, b in self._pending if h.last_offset < offset]
        self.next_offset = max(min(self.next_offset, offset), self.image.offset + 1)
        self.last_fetched_epoch = (
            self._pending[-1][0].partition_leader_epoch if self._pending else self.image.epoch
        )

    def load_snapshot(
        self, data: bytes | bytearray | memoryview, end_offset: int, epoch: int
    ) -> MetadataImage:
        """Start over from a whole snapshot (FetchSnapshot): the image of every record before
        `end_offset`; fetching resumes there. A snapshot holds no metadata transactions."""
        delta = MetadataDelta(MetadataImage())
        for pos, size in split_batches(data):
            batch = bytes(data[pos : pos + size])
            if read_header(batch).is_control:
                _kraft_version(delta, batch)  # else SnapshotHeader / SnapshotFooter, Voters
                continue
            _, recs = decode_batch(batch)
            for rec in recs:
                if rec.value is None:
                    raise DecodeError("metadata record without a value", "value")
                api_key, _version, body = r.decode_record(rec.value)
                delta.replay(api_key, body)
        self.image = delta.apply(end_offset - 1, epoch)
        self._pending.clear()
        self._delta = None
        self.in_transaction = False
        self.next_offset = end_offset
        self.last_fetched_epoch = epoch
        return self.image

    def advance(self, high_watermark: int) -> MetadataImage | None:
        """Replay every held batch below `high_watermark`; the new image, or None when none was made."""
        self.high_watermark = max(self.high_watermark, high_watermark)
        published = None
        while self._pending and self._pending[0][0].last_offset < self.high_watermark:
            h, batch = self._pending.pop(0)
            if not h.is_control:
                self._replay_batch(h, batch)
            elif not self.in_transaction:
                self._delta = self._delta or MetadataDelta(self.image)
                _kraft_version(self._delta, batch)
            if not self.in_transaction:
                # Control batches and aborted transactions still move the applied offset on.
                delta = self._delta or MetadataDelta(self.image)
                self.image = delta.apply(h.last_offset, h.partition_leader_epoch)
                self._delta = None
                published = self.image
        return published

    def _replay_batch(self, h: BatchHeader, batch: bytes) -> None:
        _, recs = decode_batch(batch)
        for rec in recs:
            if rec.value is None:
                raise DecodeError("metadata record without a value", "value")
            api_key, _version, body = r.decode_record(rec.value)
            if api_key == r.BEGIN_TRANSACTION:
                if self._delta is not None and self._delta.records:
                    # What came before the transaction is published, so Abort drops only the rest.
                    self.image = self._delta.apply(rec.offset - 1, h.partition_leader_epoch)
                self._delta = MetadataDelta(self.image)
                self.in_transaction = True
            elif api_key == r.END_TRANSACTION:
                self.in_transaction = False
            elif api_key == r.ABORT_TRANSACTION:
                self._delta = None
                self.in_transaction = False
            else:
                if self._delta is None:
                    self._delta = MetadataDelta(self.image)
                self._delta.replay(api_key, body)


def _kraft_version(delta: MetadataDelta, batch: bytes) -> None:
    """A KRaftVersion control record sets the quorum's kraft.version; its value is the bare
    KRaftVersionRecord (int16 Version, int16 KRaftVersion, tagged fields; no version prefix)."""
    _, recs = decode_batch(batch)
    for rec in recs:
        if parse_control_key(rec.key) == ControlType.KRAFT_VERSION:
            value = rec.value
            if value is None or len(value) < 4:
                raise DecodeError("KRaftVersion control record too short", "kraft_version.value")
            delta.kraft_version = int.from_bytes(value[2:4], "big", signed=True)
