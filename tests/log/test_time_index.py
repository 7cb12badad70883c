"""TimeIndex: golden bytes, maybe_append rules, lookups against a brute-force scan."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.log.time_index import NO_TIMESTAMP, TimeIndex


def test_entries_are_timestamp_then_relative_offset(tmp_path):
    p = tmp_path / "00000000000000000100.timeindex"
    ti = TimeIndex(p, 100, 120)
    ti.maybe_append(1_700_000_000_000, 105)
    ti.maybe_append(1_700_000_000_500, 120)
    ti.close()
    assert p.read_bytes() == bytes.fromhex(
        "0000018bcfe56800"
        "00000005"  # 1700000000000 ms at offset 105
        "0000018bcfe569f4"
        "00000014"  # 1700000000500 ms at offset 120
    )


def test_only_growing_timestamps_are_added(tmp_path):
    ti = TimeIndex(tmp_path / "x.timeindex", 0, 120)
    ti.maybe_append(10, 1)
    ti.maybe_append(10, 2)
    ti.maybe_append(5, 3)
    ti.maybe_append(11, 4)
    assert ti.all_entries() == [(10, 1), (11, 4)]


def test_final_entry_at_roll_fits_even_when_full(tmp_path):
    ti = TimeIndex(tmp_path / "x.timeindex", 0, 24)
    ti.maybe_append(1, 1)
    ti.maybe_append(2, 2)
    assert ti.is_full
    ti.maybe_append(3, 3, skip_full_check=True)
    assert ti.last_entry() == (3, 3)


def test_empty_index_lookup(tmp_path):
    ti = TimeIndex(tmp_path / "x.timeindex", 7, 120)
    assert ti.lookup(100) == (NO_TIMESTAMP, 7)
    assert ti.last_entry() == (NO_TIMESTAMP, 7)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(1, 50), st.integers(1, 1000)), max_size=150),
    targets=st.lists(st.integers(-5, 200_000), min_size=1, max_size=20),
)
def test_lookup_matches_brute_force(tmp_path_factory, steps, targets):
    d = tmp_path_factory.mktemp("ti")
    ti = TimeIndex(d / "x.timeindex", 0, 12 * 200)
    entries = []
    off, ts = 0, 0
    for doff, dts in steps:
        off += doff
        ts += dts
        ti.maybe_append(ts, off)
        entries.append((ts, off))
    for t in targets:
        below = [e for e in entries if e[0] <= t]
        assert ti.lookup(t) == (below[-1] if below else (NO_TIMESTAMP, 0))
    ti.close()
    reopened = TimeIndex(d / "x.timeindex", 0, 12 * 200, writable=False)
    assert reopened.all_entries() == entries
