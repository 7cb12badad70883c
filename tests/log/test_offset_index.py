"""OffsetIndex: golden bytes, life cycle, and lookups against a brute-force scan."""

from __future__ import annotations

import os
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.log.index import IndexFull
from kcompat.log.offset_index import OffsetIndex


def test_entries_are_big_endian_relative_offset_then_position(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 80)
    idx.append(103, 0)
    idx.append(110, 4242)
    idx.close()
    # relative offset u32 | position u32, trimmed to the two entries on close
    assert (tmp_path / "00000000000000000100.index").read_bytes() == bytes.fromhex(
        "00000003"
        "00000000"  # offset 103 at position 0
        "0000000a"
        "00001092"  # offset 110 at position 4242
    )


def test_preallocated_to_whole_entries_and_trimmed(tmp_path):
    p = tmp_path / "x.index"
    idx = OffsetIndex(p, 0, 1001)
    assert not p.exists()  # created with the first entry (Kafka's LazyIndex)
    assert idx.max_entries == 125  # rounded down to whole entries
    idx.append(5, 10)
    assert p.stat().st_size == 1000
    idx.trim()
    assert p.stat().st_size == 8


def test_an_index_without_entries_holds_no_descriptor_and_gets_no_file_unless_asked(tmp_path):
    p = tmp_path / "x.index"
    before = len(os.listdir("/proc/self/fd"))
    indexes = [OffsetIndex(tmp_path / f"{i}.index", i, 4096) for i in range(50)]
    assert len(os.listdir("/proc/self/fd")) == before
    assert all(idx.lookup(7) == (idx.base_offset, 0) for idx in indexes)
    idx = OffsetIndex(p, 0, 4096)
    idx.close()
    assert not p.exists()  # a clean stop creates no file for an index without entries ...
    idx = OffsetIndex(p, 0, 4096)
    idx.trim(empty_file=True)  # ... unless its segment is larger than an index interval
    assert p.stat().st_size == 0
    again = OffsetIndex(p, 0, 4096)
    again.append(3, 100)
    assert again.lookup(5) == (3, 100)


def test_reopen_of_untrimmed_file_stops_at_zero_padding(tmp_path):
    p = tmp_path / "x.index"
    idx = OffsetIndex(p, 0, 800)
    for i in range(1, 6):
        idx.append(i * 10, i * 100)
    idx.flush()
    again = OffsetIndex(p, 0, 800)  # as after a crash: the file is still 800 bytes
    assert again.entries == 5
    assert again.lookup(35) == (30, 300)


def test_full_index_raises(tmp_path):
    idx = OffsetIndex(tmp_path / "x.index", 0, 16)
    idx.append(1, 0)
    idx.append(2, 10)
    assert idx.is_full
    try:
        idx.append(3, 20)
    except IndexFull:
        pass
    else:
        raise AssertionError("appending to a full index must fail")


def test_lookup_below_first_entry_gives_segment_start(tmp_path):
    idx = OffsetIndex(tmp_path / "x.index", 1000, 800)
    idx.append(1010, 500)
    assert idx.lookup(1005) == (1000, 0)
    assert idx.lookup(1010) == (1010, 500)


def test_truncate_to_drops_entries_at_and_above(tmp_path):
    idx = OffsetIndex(tmp_path / "x.index", 0, 800)
    for i in range(1, 6):
        idx.append(i * 10, i * 100)
    idx.truncate_to(30)
    assert [e[0] for e in idx.all_entries()] == [10, 20]
    idx.append(25, 250)  # appends continue after the cut
    assert idx.lookup(29) == (25, 250)


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 1000), min_size=0, max_size=200),
    targets=st.lists(st.integers(0, 250_000), min_size=1, max_size=30),
)
def test_lookup_matches_brute_force(tmp_path_factory, gaps, targets):
    d = tmp_path_factory.mktemp("oi")
    idx = OffsetIndex(d / "x.index", 50, 8 * 256)
    entries = []
    off, pos = 50, 0
    for g in gaps:
        off += g
        pos += g * 3
        idx.append(off, pos)
        entries.append((off, pos))
    for t in targets:
        below = [e for e in entries if e[0] <= t]
        assert idx.lookup(t) == (below[-1] if below else (50, 0))
        by_pos = [e for e in entries if e[1] <= t]
        assert idx.lookup_position(t) == (by_pos[-1] if by_pos else (50, 0))
    idx.close()
    reopened = OffsetIndex(d / "x.index", 50, 8 * 256, writable=False)
    assert reopened.all_entries() == [(o - 50, p) for o, p in entries]
    assert struct.calcsize(">II") == 8


def test_a_preallocated_index_left_by_a_kill_holds_no_entries(tmp_path):
    # A killed broker leaves its new segment's index preallocated and all zeros; that is not an
    # entry (0, 0), which sanity_check would call out of order for an empty log.
    p = tmp_path / "00000000000000000000.index"
    p.write_bytes(bytes(8 * 1000))
    idx = OffsetIndex(p, 0, 8000)
    assert idx.entries == 0
    idx.sanity_check(0)
    idx.close()
