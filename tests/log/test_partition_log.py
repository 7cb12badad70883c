"""PartitionLog: append, read, roll, lookups, retention, DeleteRecords, truncation, idempotence."""

from __future__ import annotations

import errno
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.log import (
    CorruptRecord,
    KafkaStorageError,
    LogConfig,
    MessageTooLarge,
    OffsetOutOfRange,
    OutOfOrderSequence,
    PartitionLog,
)
from kcompat.wire.record_batch import read_header, split_batches
from tests.log.batches import batch

SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096)


def open_log(d, config=SMALL, **kw):
    kw.setdefault("now_ms", 0)
    return PartitionLog(d / "t-0", "t", 0, config, **kw)


def headers_of(data: bytes):
    return [read_header(data, pos) for pos, _ in split_batches(data)]


def test_offsets_are_assigned_and_patched_in_place(tmp_path):
    plog = open_log(tmp_path)
    buf = bytearray(batch(3) + batch(2))
    info = plog.append(buf, leader_epoch=7, now_ms=0)
    assert (info.base_offset, info.last_offset, info.log_append_time_ms) == (0, 4, -1)
    hs = headers_of(bytes(buf))
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(0, 7), (3, 7)]
    info = plog.append(batch(1), leader_epoch=7, now_ms=0)
    assert info.base_offset == 5 and plog.log_end_offset == plog.high_watermark == 6
    data = plog.read(0, 1 << 20).read_bytes()
    assert [h.base_offset for h in headers_of(data)] == [0, 3, 5]
    assert plog.verify() == []  # CRCs still hold after patching


def test_read_returns_whole_batches_within_max_bytes(tmp_path):
    plog = open_log(tmp_path)
    sizes = []
    for i in range(40):
        b = batch(2 + i % 3)
        sizes.append(len(b))
        plog.append(b, leader_epoch=0, now_ms=0)
    s = plog.read(0, 500)
    assert len(s) <= 500 and len(s) > 0
    hs = headers_of(s.read_bytes())
    assert sum(h.size for h in hs) == len(s)  # whole batches only
    big = plog.read(0, 10)
    assert len(big) == sizes[0]  # the first batch even if it exceeds max_bytes
    assert len(plog.read(0, 10, min_one_batch=False)) == 0


def test_read_crosses_segments_and_reports_first_offset(tmp_path):
    plog = open_log(tmp_path)
    for _ in range(100):
        plog.append(batch(4), leader_epoch=0, now_ms=0)
    assert len(plog.segments) > 3
    s = plog.read(17, 1 << 20)
    assert s.first_offset == 16
    assert len(s.pieces) > 1 and len({p.fd for p in s.pieces}) == len(s.pieces)  # one piece a segment
    offsets = [h.base_offset for h in headers_of(s.read_bytes())]
    assert offsets == list(range(16, 400, 4))


def test_offsets_outside_the_log_are_out_of_range(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch(5), leader_epoch=0, now_ms=0)
    assert len(plog.read(5, 100)) == 0  # the log end: empty, not an error
    with pytest.raises(OffsetOutOfRange) as e:
        plog.read(6, 100)
    assert e.value.error_name == "OFFSET_OUT_OF_RANGE"
    plog.delete_records_before(3)
    with pytest.raises(OffsetOutOfRange):
        plog.read(2, 100)
    assert headers_of(plog.read(3, 100).read_bytes())[0].base_offset == 0  # the batch holding 3


def test_bad_framing_is_rejected_and_nothing_is_written(tmp_path):
    plog = open_log(tmp_path)
    good = batch(2)
    wrong_magic = good[:16] + b"\x01" + good[17:]
    for bad in [good[:-1], good + b"\x00" * 5, b"", wrong_magic]:
        with pytest.raises(CorruptRecord):
            plog.append(bad, leader_epoch=0, now_ms=0)
    with pytest.raises(CorruptRecord):
        corrupt = bytearray(good)
        corrupt[-1] ^= 1
        plog.append(corrupt, leader_epoch=0, now_ms=0, verify_crc=True)
    cfg = LogConfig(max_message_bytes=100)
    small = PartitionLog(tmp_path / "u-0", "u", 0, cfg, now_ms=0)
    with pytest.raises(MessageTooLarge):
        small.append(batch(20), leader_epoch=0, now_ms=0)
    assert plog.log_end_offset == 0 and plog.size == 0


@pytest.mark.parametrize("kind", [bytes, bytearray])  # written with pwritev / patched and pwrite
def test_disk_error_leaves_no_partial_batch(tmp_path, monkeypatch, kind):
    plog = open_log(tmp_path)
    plog.append(batch(2), leader_epoch=0, now_ms=0)
    size = plog.size
    real_pwrite, real_pwritev = os.pwrite, os.pwritev

    def half_then_enospc(fd, data, pos):
        if len(data) > 20:
            return real_pwrite(fd, bytes(data[:20]), pos)
        raise OSError(errno.ENOSPC, "No space left on device")

    def short_vectored(fd, bufs, pos):
        return real_pwrite(fd, bytes(bufs[0][:20]), pos)

    monkeypatch.setattr(os, "pwrite", half_then_enospc)
    monkeypatch.setattr(os, "pwritev", short_vectored)
    with pytest.raises(KafkaStorageError) as e:
        plog.append(kind(batch(3)), leader_epoch=0, now_ms=0)
    assert e.value.error_name == "KAFKA_STORAGE_ERROR"
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    monkeypatch.setattr(os, "pwritev", real_pwritev)
    assert plog.size == size and os.path.getsize(plog.active_segment.log.path) == size
    assert plog.log_end_offset == 2
    plog.append(kind(batch(1)), leader_epoch=0, now_ms=0)
    assert plog.verify() == [] and plog.log_end_offset == 3


def test_immutable_input_is_written_patched_without_being_changed(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch(2), leader_epoch=0, now_ms=0)
    original = batch(3) + batch(4)
    data = bytes(original)
    plog.append(data, leader_epoch=5, now_ms=0)
    assert data == original
    hs = headers_of(plog.read(2, 1 << 20).read_bytes())
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(2, 5), (5, 5)]
    assert plog.verify() == []


def test_roll_on_size_age_and_index_full(tmp_path):
    plog = open_log(
        tmp_path,
        LogConfig(segment_bytes=1000, segment_ms=1000, segment_index_bytes=16, index_interval_bytes=1),
    )
    plog.append(batch(1, timestamp=0), leader_epoch=0, now_ms=0)
    plog.append(batch(1, timestamp=2000), leader_epoch=0, now_ms=0)  # 2 s after the first: age roll
    assert [s.base_offset for s in plog.segments] == [0, 1]
    for _ in range(3):  # index of 2 entries fills, then rolls
        plog.append(batch(1, timestamp=2000), leader_epoch=0, now_ms=0)
    assert len(plog.segments) == 3
    assert plog.segments[0].offset_index.path.stat().st_size == plog.segments[0].offset_index.entries * 8


def test_offset_for_timestamp_and_max_timestamp(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch(3, timestamps=[100, 300, 200]), leader_epoch=0, now_ms=0)
    plog.append(batch(2, timestamps=[250, 260]), leader_epoch=0, now_ms=0)
    assert plog.offset_for_timestamp(50) == (0, 100)
    assert plog.offset_for_timestamp(150) == (1, 300)
    assert plog.offset_for_timestamp(255) == (1, 300)
    assert plog.offset_for_timestamp(301) is None
    assert plog.max_timestamp_offset() == (1, 300)


@settings(max_examples=25, deadline=None)
@given(
    batches=st.lists(
        st.tuples(st.integers(1, 6), st.lists(st.integers(0, 10_000), min_size=6, max_size=6)),
        min_size=1,
        max_size=60,
    ),
    probes=st.lists(st.integers(-10, 10_100), min_size=1, max_size=15),
)
def test_lookups_match_a_brute_force_scan(tmp_path_factory, batches, probes):
    d = tmp_path_factory.mktemp("pl")
    cfg = LogConfig(segment_bytes=1500, index_interval_bytes=150, segment_index_bytes=4096)
    plog = open_log(d, cfg)
    records = []  # (offset, timestamp)
    batch_ranges = []
    for count, ts in batches:
        info = plog.append(batch(count, timestamps=ts[:count]), leader_epoch=0, now_ms=0)
        batch_ranges.append((info.base_offset, info.last_offset))
        records += [(info.base_offset + i, ts[i]) for i in range(count)]
    leo = plog.log_end_offset
    for p in probes:
        target_offset = p % (leo + 1)
        s = plog.read(target_offset, 300)
        if target_offset == leo:
            assert len(s) == 0
        else:
            first = headers_of(s.read_bytes())[0]
            expect = next(r for r in batch_ranges if r[1] >= target_offset)
            assert (first.base_offset, first.last_offset) == expect
        want = next(((o, t) for o, t in records if t >= p), None)
        assert plog.offset_for_timestamp(p) == want
    max_ts = max(t for _, t in records)
    assert plog.max_timestamp_offset() == next((o, t) for o, t in records if t == max_ts)


def test_retention_by_time_and_size(tmp_path):
    cfg = LogConfig(segment_bytes=600, retention_ms=1000, index_interval_bytes=100)
    plog = open_log(tmp_path, cfg)
    for i in range(30):
        plog.append(batch(2, timestamp=i * 100), leader_epoch=0, now_ms=i * 100)
    n = len(plog.segments)
    deleted = plog.run_retention(now_ms=2500)
    assert deleted > 0 and len(plog.segments) == n - deleted
    assert all(2500 - s.largest_timestamp <= 1000 for s in plog.segments[:-1])
    assert plog.log_start_offset == plog.segments[0].base_offset
    with pytest.raises(OffsetOutOfRange):
        plog.read(0, 100)
    by_size = LogConfig(segment_bytes=600, retention_bytes=1000, retention_ms=-1, index_interval_bytes=100)
    plog2 = PartitionLog(tmp_path / "s-0", "s", 0, by_size, now_ms=0)
    for _ in range(30):
        plog2.append(batch(2), leader_epoch=0, now_ms=0)
    plog2.run_retention(now_ms=0)
    assert plog2.size - plog2.active_segment.size <= 1000 or len(plog2.segments) == 1
    assert plog2.size > 1000 - 600


def test_retention_of_everything_rolls_an_empty_active_segment(tmp_path):
    plog = open_log(tmp_path, LogConfig(retention_ms=10))
    plog.append(batch(3, timestamp=0), leader_epoch=0, now_ms=0)
    assert plog.run_retention(now_ms=1000) == 1
    assert plog.log_start_offset == plog.log_end_offset == 3
    assert len(plog.read(3, 100)) == 0
    plog.append(batch(1, timestamp=1000), leader_epoch=0, now_ms=1000)
    assert plog.read(3, 100).first_offset == 3


def test_delete_records_moves_log_start_and_drops_segments(tmp_path):
    plog = open_log(tmp_path)
    for _ in range(60):
        plog.append(batch(5), leader_epoch=0, now_ms=0)
    n = len(plog.segments)
    assert plog.delete_records_before(151) == 151
    assert plog.log_start_offset == 151
    assert len(plog.segments) < n and plog.segments[0].base_offset <= 151
    with pytest.raises(OffsetOutOfRange):
        plog.delete_records_before(plog.log_end_offset + 1)
    assert plog.delete_records_before(-1) == plog.log_end_offset


def test_truncate_to_removes_tail_and_later_segments(tmp_path):
    plog = open_log(tmp_path)
    for e in range(50):
        plog.append(batch(4), leader_epoch=e // 10, now_ms=0)
    plog.truncate_to(101)  # inside the batch 100..103: the whole batch goes
    assert plog.log_end_offset == 100
    assert plog.leader_epoch_cache.entries() == [(0, 0), (1, 40), (2, 80)]
    assert plog.verify() == []
    info = plog.append(batch(2), leader_epoch=3, now_ms=0)
    assert info.base_offset == 100
    data = plog.read(96, 1 << 20).read_bytes()
    assert [h.base_offset for h in headers_of(data)] == [96, 100]


def test_idempotent_retry_returns_original_offsets(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch(2), leader_epoch=0, now_ms=0)
    first = plog.append(batch(3, producer_id=9, producer_epoch=0, base_sequence=0), leader_epoch=0, now_ms=0)
    again = plog.append(batch(3, producer_id=9, producer_epoch=0, base_sequence=0), leader_epoch=0, now_ms=0)
    assert again.duplicate and (again.base_offset, again.last_offset) == (
        first.base_offset,
        first.last_offset,
    )
    assert plog.log_end_offset == 5
    with pytest.raises(OutOfOrderSequence):
        plog.append(batch(1, producer_id=9, producer_epoch=0, base_sequence=7), leader_epoch=0, now_ms=0)
    assert (
        plog.append(
            batch(1, producer_id=9, producer_epoch=0, base_sequence=3), leader_epoch=0, now_ms=0
        ).base_offset
        == 5
    )


def test_flush_messages_advances_recovery_point(tmp_path):
    plog = open_log(tmp_path, LogConfig(flush_messages=5))
    plog.append(batch(3), leader_epoch=0, now_ms=0)
    assert plog.recovery_point == 0
    plog.append(batch(3), leader_epoch=0, now_ms=0)
    assert plog.recovery_point == 6


def test_slice_stays_readable_after_its_segment_is_deleted(tmp_path):
    plog = open_log(tmp_path)
    for _ in range(60):
        plog.append(batch(5), leader_epoch=0, now_ms=0)
    s = plog.read(0, 200)
    expect = s.read_bytes()
    plog.delete_records_before(250)
    assert plog.segments[0].base_offset != 0
    assert s.read_bytes() == expect  # the descriptor outlives the unlinked file
    assert os.pread(s.pieces[0].fd, len(expect), s.pieces[0].position) == expect


def test_open_transaction_holds_back_the_last_stable_offset(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch(2), leader_epoch=0, now_ms=0)
    txn = batch(3, producer_id=11, producer_epoch=0, base_sequence=0, attributes=0x10)
    plog.append(txn, leader_epoch=0, now_ms=0)
    plog.append(batch(1), leader_epoch=0, now_ms=0)
    assert plog.last_stable_offset == 2 and plog.high_watermark == 6
    marker = batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], producer_id=11, producer_epoch=0,
                   attributes=0x30)  # fmt: skip
    plog.append(marker, leader_epoch=0, now_ms=0)  # commit marker (transactional + control)
    assert plog.last_stable_offset == plog.log_end_offset == 7


def test_config_is_typed_values():
    # the log takes a ready LogConfig: kcompat.config built it from the topic's typed values
    cfg = LogConfig(cleanup_policy=("compact", "delete"), segment_bytes=1024, min_cleanable_dirty_ratio=0.1,
                    message_timestamp_type="LogAppendTime")  # fmt: skip
    assert cfg.compact and cfg.delete and cfg.segment_bytes == 1024 and cfg.min_cleanable_dirty_ratio == 0.1
    assert cfg.message_timestamp_type == "LogAppendTime"
    with pytest.raises(TypeError):
        LogConfig(unknown_key="x")


def test_log_append_time_is_reported(tmp_path):
    plog = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    assert plog.append(batch(1), leader_epoch=0, now_ms=123_456).log_append_time_ms == 123_456


def test_a_header_handed_over_frames_the_batch_as_parsing_it_would(tmp_path):
    """The Produce path hands validate_batch's header to append rather than have it parsed twice:
    the offsets, the answer and the bytes written are the same; a header that does not fill the
    buffer is not trusted (the buffer is framed, and its trailing bytes refused)."""
    given, parsed = open_log(tmp_path / "a"), open_log(tmp_path / "b")
    for n in (1, 3, 2):
        data = batch(n)
        info = given.append(bytearray(data), leader_epoch=1, now_ms=5, header=read_header(data))
        assert info == parsed.append(bytearray(data), leader_epoch=1, now_ms=5)
    assert given.read(0, 1 << 20).read_bytes() == parsed.read(0, 1 << 20).read_bytes()
    assert given.max_timestamp_offset() == parsed.max_timestamp_offset()
    one = batch(2)
    with pytest.raises(CorruptRecord):
        given.append(bytearray(one + b"\x00" * 5), leader_epoch=1, now_ms=5, header=read_header(one))
    assert given.log_end_offset == 6
