"""Reading `__transaction_state` back: every (key, value) record of one partition, in log order,
for the transaction coordinator's replay (at start-up on one node, on election in a cluster)."""

from __future__ import annotations

import logging

from kcompat.log.batch_scan import iter_log_batches
from kcompat.log.partition_log import PartitionLog
from kcompat.wire.errors import DecodeError
from kcompat.wire.records import decode_batch

log = logging.getLogger("kcompat.server.transactions")


def read_state_records(plog: PartitionLog) -> list[tuple[bytes, bytes | None]]:
    """Blocking (run it in a thread); control batches skipped, an unreadable batch logged and skipped."""
    out: list[tuple[bytes, bytes | None]] = []
    for h, batch in iter_log_batches(plog):
        if h.is_control:
            continue
        try:
            _, records = decode_batch(batch)
        except DecodeError as e:
            log.error("skipping an unreadable batch of %s: %s", plog, e)
            continue
        out.extend((r.key, r.value) for r in records if r.key is not None)
    return out
