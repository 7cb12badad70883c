"""Memory held per partition: a broker keeps thousands of idle partitions resident (issue 18)."""

from __future__ import annotations

import gc
import tracemalloc

from kcompat.log import LogConfig, LogManager
from tests.log.batches import batch

PARTITIONS = 300
# 4,160 B a partition before paths became interned (directory, name) pairs and the per-partition
# classes got slots; ~2,500 B after (100 x 50 partitions, one record each).
MAX_BYTES_PER_PARTITION = 3_000


def test_an_idle_partition_with_one_record_holds_under_3_kb(tmp_path):
    m = LogManager([tmp_path], LogConfig(), cluster_id="MkU3OEVBNTcwNTJENDM2Qk", node_id=1)
    records = batch(1)
    m.get_or_create("warm-up", 0).append(bytearray(records), leader_epoch=0, now_ms=1_000)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for p in range(PARTITIONS):
            m.get_or_create(f"topic-{p // 50}", p % 50).append(
                bytearray(records), leader_epoch=0, now_ms=1_000
            )
        gc.collect()
        per_partition = (tracemalloc.get_traced_memory()[0] - before) / PARTITIONS
    finally:
        tracemalloc.stop()
        m.close()
    assert per_partition < MAX_BYTES_PER_PARTITION, f"{per_partition:.0f} B a partition"


def test_the_files_of_a_partition_share_one_directory_string(tmp_path):
    m = LogManager([tmp_path], LogConfig(), cluster_id="MkU3OEVBNTcwNTJENDM2Qk", node_id=1)
    plog = m.get_or_create("t", 0)
    seg = plog.active_segment
    owners = [seg.log, seg.offset_index, seg.time_index, seg.txn_index, plog.leader_epoch_cache]
    assert len({id(o._dir) for o in owners}) == 1
    assert seg.offset_index.path == plog.directory / "00000000000000000000.index"
    assert plog.leader_epoch_cache.path == plog.directory / "leader-epoch-checkpoint"
    m.close()
