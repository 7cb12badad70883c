"""ShareFetch's records as file slices: whole stored batches holding an acquired offset, sent with
sendfile, never copied into the response; AcquiredRecords ranges say which offsets a client keeps."""

from __future__ import annotations

import struct
import uuid

from kcompat.coordinator.share.in_flight import AcknowledgeType, RecordState, ShareLimits
from kcompat.coordinator.share.share_partition import SharePartition
from kcompat.log import LogConfig, LogManager
from kcompat.log.log_file import FetchSlice
from kcompat.server.share.share_fetch_reader import read_batches
from kcompat.server.share.share_partition_manager import SharePartitionManager
from kcompat.storage.topic_store import TopicInfo
from kcompat.wire.record_batch import read_header, split_batches
from kcompat.wire.records import Record, build_batch
from tests.log.batches import batch

TXN, CONTROL = 0x10, 0x20
TOPIC = TopicInfo("t", uuid.uuid4(), 1)
ACCEPT, RELEASE = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE)


def open_log(tmp_path, cfg=None):
    manager = LogManager([tmp_path], cfg or LogConfig(), cluster_id="c", node_id=0, clock=lambda: 0)
    return manager.get_or_create("t", 0)


def share_manager(plog, limits=None):
    """The leader's SharePartitionManager over one real log (acquisition needs no persister)."""
    settings = {
        "group.share.max.share.sessions": 10,
        "group.share.delivery.count.limit": 5,
        "group.share.partition.max.record.locks": (limits or ShareLimits()).max_record_locks,
        "group.share.record.lock.duration.ms": 30_000,
    }
    return SharePartitionManager(
        now_ms=lambda: 1_000,
        setting=settings.__getitem__,
        persister=None,
        partition_log=lambda name, p: plog,
        by_id=lambda tid: TOPIC,
        leader_epoch=lambda t, p: 0,
        notify=lambda name, p: None,
        group_overrides=lambda g: {},
    )


def new_share_partition(mgr, start=0):
    sp = SharePartition(start, mgr.settings("g").limits)
    sp.load(start, ())
    return sp


def stored(plog) -> list[bytes]:
    """Each stored batch's bytes, in offset order (read the plain way, for comparison)."""
    data = plog.read(0, 1 << 30).read_bytes()
    return [data[pos : pos + size] for pos, size in split_batches(data)]


def ranges(acquired):
    return [(a.first, a.last, a.delivery_count) for a in acquired]


def marker(pid, *, commit):
    key, value = struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, 0)
    return batch([(key, value)], producer_id=pid, producer_epoch=0, attributes=TXN | CONTROL)


def txn_batch(pid, n=2):
    recs = [(b"k", b"p%d-%d" % (pid, i)) for i in range(n)]
    return batch(recs, producer_id=pid, producer_epoch=0, base_sequence=0, attributes=TXN)


def test_whole_batches_go_out_as_one_file_piece_not_bytes(tmp_path):
    plog = open_log(tmp_path)
    for n in (3, 4, 5):
        plog.append(batch(n), leader_epoch=0, now_ms=0)
    mgr = share_manager(plog)
    sp = new_share_partition(mgr)
    acquired, data = mgr.acquire(sp, "m1", TOPIC, 0, 500, 1 << 20, False)
    assert ranges(acquired) == [(0, 11, 1)]
    assert isinstance(data, FetchSlice) and data.first_offset == 0
    assert len(data.pieces) == 1  # adjacent batches joined: one sendfile
    assert data.read_bytes() == b"".join(stored(plog)) and len(data) == len(data.read_bytes())


def test_max_records_stops_the_header_walk_and_sends_only_touched_batches(tmp_path):
    plog = open_log(tmp_path)
    for _ in range(50):
        plog.append(batch(4), leader_epoch=0, now_ms=0)
    read = read_batches(plog, 0, 1 << 20, False)
    mgr = share_manager(plog)
    sp = new_share_partition(mgr)
    acquired = sp.acquire("m1", read.batches(), 6, 0)
    assert ranges(acquired) == [(0, 5, 1)]
    assert len(read.spans) <= 3  # not all 50 headers: the walk stops once MaxRecords is used
    data = read.acquired_slice(acquired)
    assert data.read_bytes() == b"".join(stored(plog)[:2])  # offsets 4-5 need the 2nd batch whole


def test_partly_acknowledged_batch_is_sent_whole_with_the_remaining_range(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch(10), leader_epoch=0, now_ms=0)  # 0-9
    plog.append(batch(5), leader_epoch=0, now_ms=0)  # 10-14
    mgr = share_manager(plog)
    sp = new_share_partition(mgr)
    acquired, _ = mgr.acquire(sp, "m1", TOPIC, 0, 500, 1 << 20, False)
    assert ranges(acquired) == [(0, 14, 1)]
    # per-offset types: 0-3 accepted, 4-9 released; 10-14 stay acquired
    err, span = sp.acknowledge("m1", [(0, 9, [ACCEPT] * 4 + [RELEASE] * 6)], 0)
    assert (int(err), span) == (0, (0, 9))
    assert sp.start_offset == 4
    acquired, data = mgr.acquire(sp, "m2", TOPIC, 0, 500, 1 << 20, False)
    assert ranges(acquired) == [(4, 9, 2)]
    batches = stored(plog)
    assert data.read_bytes() == batches[0]  # the whole first batch; the client skips 0-3
    assert data.first_offset == 0


def test_accepting_a_whole_range_per_offset_leaves_one_run(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch(400), leader_epoch=0, now_ms=0)
    mgr = share_manager(plog)
    sp = new_share_partition(mgr)
    mgr.acquire(sp, "m1", TOPIC, 0, 500, 1 << 20, False)
    err, span = sp.acknowledge("m1", [(0, 199, [ACCEPT] * 200)], 0)
    assert (int(err), span) == (0, (0, 199))
    assert [(r.first, r.last, r.state) for r in sp.runs] == [(200, 399, RecordState.ACQUIRED)]
    # a per-offset list with a wrong type anywhere changes nothing
    err, span = sp.acknowledge("m1", [(200, 202, [ACCEPT, 9, ACCEPT])], 0)
    assert span is None and int(err) != 0
    assert [(r.first, r.last) for r in sp.runs] == [(200, 399)]


def test_read_committed_archives_aborted_and_control_batches_and_skips_their_bytes(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch(1), leader_epoch=0, now_ms=0)  # 0
    plog.append(txn_batch(5), leader_epoch=0, now_ms=0)  # 1-2, aborted
    plog.append(marker(5, commit=False), leader_epoch=0, now_ms=0)  # 3
    plog.append(txn_batch(6), leader_epoch=0, now_ms=0)  # 4-5, committed
    plog.append(marker(6, commit=True), leader_epoch=0, now_ms=0)  # 6
    plog.append(batch(2), leader_epoch=0, now_ms=0)  # 7-8
    batches = stored(plog)
    mgr = share_manager(plog)
    sp = new_share_partition(mgr)
    acquired, data = mgr.acquire(sp, "m1", TOPIC, 0, 500, 1 << 20, True)
    assert ranges(acquired) == [(0, 0, 1), (4, 5, 1), (7, 8, 1)]
    assert [p.length for p in data.pieces] == [len(batches[0]), len(batches[3]), len(batches[5])]
    assert data.read_bytes() == batches[0] + batches[3] + batches[5]
    states = [(r.first, r.last, r.state) for r in sp.runs]
    assert (1, 3, RecordState.ARCHIVED) in states and (6, 6, RecordState.ARCHIVED) in states
    # read_uncommitted delivers the aborted data too, but never the markers
    sp2 = new_share_partition(mgr)
    acquired, data = mgr.acquire(sp2, "m1", TOPIC, 0, 500, 1 << 20, False)
    assert ranges(acquired) == [(0, 2, 1), (4, 5, 1), (7, 8, 1)]
    assert data.read_bytes() == batches[0] + batches[1] + batches[3] + batches[5]


def test_compacted_batch_is_sent_whole_with_its_offset_gaps_in_the_range(tmp_path):
    plog = open_log(tmp_path)
    recs = [Record(o, 0, b"k%d" % o, b"v") for o in (0, 2, 4)]  # what compaction leaves: gaps
    plog.append_as_follower(build_batch(recs, base_offset=0), now_ms=0)
    plog.append_as_follower(build_batch([Record(5, 0, b"k", b"v")], base_offset=5), now_ms=0)
    plog.set_high_watermark(plog.log_end_offset)
    assert read_header(stored(plog)[0]).last_offset_delta == 4
    mgr = share_manager(plog)
    sp = new_share_partition(mgr)
    # record_limit: MaxRecords counts offsets, gaps included, as Kafka
    acquired, data = mgr.acquire(sp, "m1", TOPIC, 0, 3, 1 << 20, False, strict=True)
    assert ranges(acquired) == [(0, 2, 1)]
    assert data.read_bytes() == stored(plog)[0]
    acquired, data = mgr.acquire(sp, "m2", TOPIC, 0, 10, 1 << 20, False, strict=True)
    assert ranges(acquired) == [(3, 5, 1)]
    assert data.read_bytes() == b"".join(stored(plog))
    # batch_optimized: the batch begun goes to its end, gaps and all, and no further
    sp2 = new_share_partition(mgr)
    acquired, data = mgr.acquire(sp2, "m1", TOPIC, 0, 3, 1 << 20, False)
    assert ranges(acquired) == [(0, 4, 1)]
    assert data.read_bytes() == stored(plog)[0]


def test_batch_optimized_finishes_the_batch_record_limit_stops_at_max_records(tmp_path):
    plog = open_log(tmp_path)
    for n in (10, 10, 10):
        plog.append(batch(n), leader_epoch=0, now_ms=0)  # 0-9, 10-19, 20-29
    mgr = share_manager(plog)
    sp = new_share_partition(mgr)
    acquired, data = mgr.acquire(sp, "m1", TOPIC, 0, 12, 1 << 20, False)
    assert ranges(acquired) == [(0, 19, 1)]  # the 12th record is in the 2nd batch: all of it
    assert data.read_bytes() == b"".join(stored(plog)[:2])
    sp.acknowledge("m1", [(0, 4, [RELEASE])], 0)
    # available again inside a batch: the rest of that batch is not acquired past MaxRecords (it is
    # held), and no new batch is begun once MaxRecords is used
    acquired, data = mgr.acquire(sp, "m2", TOPIC, 0, 3, 1 << 20, False)
    assert ranges(acquired) == [(0, 4, 2)]
    assert data.read_bytes() == stored(plog)[0]
    sp2 = new_share_partition(mgr)
    acquired, _ = mgr.acquire(sp2, "m1", TOPIC, 0, 12, 1 << 20, False, strict=True)
    assert ranges(acquired) == [(0, 11, 1)]


def test_max_record_locks_cuts_a_batch_and_the_rest_comes_after_acknowledgement(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch(10), leader_epoch=0, now_ms=0)  # 0-9
    mgr = share_manager(plog, ShareLimits(max_record_locks=4))
    sp = new_share_partition(mgr)
    assert sp.limits.max_record_locks == 4
    # record_limit: neither MaxRecords nor the window's room is exceeded
    acquired, data = mgr.acquire(sp, "m1", TOPIC, 0, 500, 1 << 20, False, strict=True)
    assert ranges(acquired) == [(0, 3, 1)]
    assert data.read_bytes() == stored(plog)[0]  # the whole batch, only 0-3 to deliver
    assert mgr.acquire(sp, "m2", TOPIC, 0, 500, 1 << 20, False, strict=True)[0] == []  # full
    err, _ = sp.acknowledge("m1", [(0, 3, [ACCEPT])], 0)
    assert int(err) == 0
    acquired, data = mgr.acquire(sp, "m2", TOPIC, 0, 500, 1 << 20, False, strict=True)
    assert ranges(acquired) == [(4, 7, 1)]
    assert data.read_bytes() == stored(plog)[0]


def test_batch_optimized_carries_the_batch_begun_past_the_window_then_stops(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch(10), leader_epoch=0, now_ms=0)  # 0-9
    plog.append(batch(3), leader_epoch=0, now_ms=0)  # 10-12
    mgr = share_manager(plog, ShareLimits(max_record_locks=4))
    sp = new_share_partition(mgr)
    # as Kafka: the window caps the count, whose last record's batch is then taken to its end
    acquired, data = mgr.acquire(sp, "m1", TOPIC, 0, 500, 1 << 20, False)
    assert ranges(acquired) == [(0, 9, 1)]
    assert data.read_bytes() == stored(plog)[0]
    assert mgr.acquire(sp, "m2", TOPIC, 0, 500, 1 << 20, False)[0] == []  # over the window: nothing new
    sp.acknowledge("m1", [(0, 7, [ACCEPT])], 0)  # 8-9 still in flight: room for 2
    acquired, data = mgr.acquire(sp, "m2", TOPIC, 0, 1, 1 << 20, False)
    assert ranges(acquired) == [(10, 12, 1)]
    assert data.read_bytes() == stored(plog)[1]
