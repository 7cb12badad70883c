"""Reading `__share_group_state` back: every (offset, key, value) record of one partition, in log
order, for the share coordinator's replay (at start-up on one node, on election in a cluster); the
offsets say which records a later prune may drop."""

from __future__ import annotations

import logging

from kcompat.log.batch_scan import iter_log_batches
from kcompat.log.partition_log import PartitionLog
from kcompat.wire.errors import DecodeError
from kcompat.wire.records import decode_batch

log = logging.getLogger("kcompat.server.share")

StateRecord = tuple[int, bytes, bytes | None]


def read_state_records(plog: PartitionLog) -> list[StateRecord]:
    """Blocking (run it in a thread); control batches skipped, an unreadable batch logged and skipped."""
    out: list[StateRecord] = []
    for h, batch in iter_log_batches(plog):
        if h.is_control:
            continue
        try:
            _, records = decode_batch(batch)
        except DecodeError as e:
            log.error("skipping an unreadable batch of %s at offset %d: %s", plog, h.base_offset, e)
            continue
        out.extend((r.offset, r.key, r.value) for r in records if r.key is not None)
    return out
