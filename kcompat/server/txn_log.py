"""Reading `__transaction_state` back: every (key, value) record of one partition, in log order,
for the transaction coordinator's replay (at start-up on one node, on election in a cluster)."""

from __future__ import annotations

import logging

from kcompat.log.partition_log import PartitionLog
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import read_header, split_batches
from kcompat.wire.records import decode_batch

log = logging.getLogger("kcompat.server.transactions")

_READ_BYTES = 1 << 20


def read_state_records(plog: PartitionLog) -> list[tuple[bytes, bytes | None]]:
    """Blocking (run it in a thread); control batches skipped, an unreadable batch logged and skipped."""
    out: list[tuple[bytes, bytes | None]] = []
    offset, end = plog.log_start_offset, plog.log_end_offset
    while offset < end:
        data = memoryview(plog.read(offset, _READ_BYTES).read_bytes())
        spans = split_batches(data)
        if not spans:
            break
        for pos, size in spans:
            h = read_header(data, pos)
            offset = h.base_offset + h.last_offset_delta + 1
            if h.is_control:
                continue
            try:
                _, records = decode_batch(data[pos : pos + size])
            except DecodeError as e:
                log.error("skipping an unreadable batch of %s: %s", plog, e)
                continue
            out.extend((r.key, r.value) for r in records if r.key is not None)
    return out
