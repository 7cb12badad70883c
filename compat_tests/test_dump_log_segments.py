"""Apache Kafka's own log dump tool (DumpLogSegments, `kafka-dump-log`) reads what kcompat.log wrote.

Segments are written by the engine (several segments, every codec, idempotent producers, tombstones,
out-of-order timestamps, dense indexes), closed cleanly, then dumped with --deep-iteration
--print-data-log and with --verify-index-only. The tool must report no corruption and no index
mismatch, and must list exactly the batches, record offsets and index entries the engine holds.
The jars come from .deps/kafka (tools/setup-test-deps.sh); without them the test fails, not skips.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import KAFKA_JARS, kafka_tool

from kcompat.log import LogCleaner, LogConfig, LogManager, PartitionLog
from kcompat.log.batch_scan import iter_headers
from kcompat.log.record_view import iter_records
from kcompat.wire.record_batch import read_header, split_batches
from tests.log.batches import batch

BAD_WORDS = re.compile(
    r"isvalid: false|Mismatches in|mismatch|out of order|not found|corrupt|Exception|Non-consecutive",
    re.IGNORECASE,
)
BATCH_LINE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+)")
RECORD_LINE = re.compile(r"^\| offset: (\d+) ")
INDEX_LINE = re.compile(r"^offset: (\d+) position: (\d+)$")
TIME_INDEX_LINE = re.compile(r"^timestamp: (\d+) offset: (\d+)$")


@pytest.fixture(autouse=True, scope="module")
def _jars_present() -> None:
    if not any(KAFKA_JARS.glob("kafka-tools-*.jar")) and not any(KAFKA_JARS.glob("kafka_2.13-*.jar")):
        pytest.fail(
            f"Kafka jars are missing from {KAFKA_JARS}: run `bash tools/setup-test-deps.sh`", pytrace=False
        )


CONFIG = LogConfig(segment_bytes=16_384, index_interval_bytes=300, segment_index_bytes=4096)


def write_log(d: Path) -> None:
    m = LogManager([d], CONFIG, cluster_id="dump-test-cluster0000", node_id=1, clock=lambda: 0)
    plog = m.get_or_create("dump", 0)
    seq = 0
    for i in range(240):
        codec = i % 5  # none, gzip, snappy, lz4, zstd
        n = 1 + i % 7
        ts = [1_700_000_000_000 + i * 1000 + ((j * 7919) % 13) * 10 for j in range(n)]  # jittery order
        if i % 3 == 0:
            b = batch(
                n, timestamps=ts, compression=codec, producer_id=4242, producer_epoch=0, base_sequence=seq
            )
            seq += n
        elif i % 11 == 0:
            b = batch([(b"gone-%d" % i, None)] * n, timestamps=ts, compression=codec)
        else:
            b = batch(n, timestamps=ts, compression=codec, value_size=40 + i)
        plog.append(b, leader_epoch=i // 100, now_ms=0)
    m.close()


def reopen(d: Path, topic: str, config: LogConfig = CONFIG) -> PartitionLog:
    """The log as the engine loads it again, after the tool has read the cleanly closed files (an open
    active segment has preallocated indexes, which the tool would misread as a live broker's)."""
    plog = LogManager([d], config, cluster_id="dump-test-cluster0000", node_id=1, clock=lambda: 0).get(
        topic, 0
    )
    assert plog is not None
    return plog


def engine_view(plog: PartitionLog) -> tuple[list[tuple[int, int, int]], list[int]]:
    batches, offsets = [], []
    for seg in plog.segments:
        for pos, h in iter_headers(seg.log, 0, seg.size):
            batches.append((h.base_offset, h.last_offset, h.records_count))
            data = memoryview(seg.log.pread(h.size, pos))
            offsets += [r.offset for r in iter_records(data, h)]
    return batches, offsets


# The tool's offset-continuity check starts every file from -1, so it reports each segment not based
# at 0 as "-1 is followed by <base offset>": a quirk of the tool (Kafka's own segments get it too).
SEGMENT_START_QUIRK = re.compile(r"Non-consecutive offsets in \S*?(\d{20})\.log\n  -1 is followed by (\d+)\n")


def dump(*args: str) -> str:
    result = kafka_tool("kafka-dump-log", *args, timeout=180)
    out = result.stdout + result.stderr

    def drop_quirk(m: re.Match[str]) -> str:
        return "" if int(m[1]) == int(m[2]) else m[0]

    return SEGMENT_START_QUIRK.sub(drop_quirk, out)


def parse_log_dump(text: str) -> tuple[list[tuple[int, int, int]], list[int]]:
    batches, offsets = [], []
    for line in text.splitlines():
        if m := BATCH_LINE.match(line):
            batches.append((int(m[1]), int(m[2]), int(m[3])))
        elif m := RECORD_LINE.match(line):
            offsets.append(int(m[1]))
    return batches, offsets


def files(d: Path, suffix: str) -> list[str]:
    return sorted(str(p) for p in d.iterdir() if p.name.endswith(suffix))


def test_kafka_reads_segments_and_finds_no_corruption(tmp_path: Path) -> None:
    write_log(tmp_path)
    part = tmp_path / "dump-0"
    logs = files(part, ".log")
    assert len(logs) > 3
    out = dump("--files", ",".join(logs), "--deep-iteration", "--print-data-log")
    assert not BAD_WORDS.search(out), BAD_WORDS.search(out)
    plog = reopen(tmp_path, "dump")
    want_batches, want_offsets = engine_view(plog)
    got_batches, got_offsets = parse_log_dump(out)
    assert got_batches == want_batches
    assert got_offsets == want_offsets == list(range(plog.log_end_offset))
    assert out.count("isvalid: true") == len(want_batches)


def test_kafka_verifies_the_indexes(tmp_path: Path) -> None:
    write_log(tmp_path)
    part = tmp_path / "dump-0"
    indexes = files(part, ".index") + files(part, ".timeindex")
    out = dump("--files", ",".join(indexes), "--verify-index-only")
    assert not BAD_WORDS.search(out), out[-3000:]
    assert out.count("Dumping") == len(indexes)

    listing = dump("--files", ",".join(indexes))
    assert not BAD_WORDS.search(listing), listing[-3000:]
    plog = reopen(tmp_path, "dump")
    offset_entries = [(int(m[1]), int(m[2])) for m in map(INDEX_LINE.match, listing.splitlines()) if m]
    time_entries = [(int(m[1]), int(m[2])) for m in map(TIME_INDEX_LINE.match, listing.splitlines()) if m]
    want_offsets, want_times = [], []
    for seg in plog.segments:
        want_offsets += [(seg.base_offset + rel, pos) for rel, pos in seg.offset_index.all_entries()]
        want_times += [(ts, seg.base_offset + rel) for ts, rel in seg.time_index.all_entries()]
    assert offset_entries == want_offsets and len(want_offsets) > 20
    assert time_entries == want_times and len(want_times) > 5


def test_kafka_reads_producer_snapshots(tmp_path: Path) -> None:
    write_log(tmp_path)
    snapshots = files(tmp_path / "dump-0", ".snapshot")
    assert snapshots
    out = dump("--files", snapshots[-1])
    assert "producerId: 4242 producerEpoch: 0" in out, out[-2000:]
    last_seq = max(int(m) for m in re.findall(r"lastSequence: (\d+)", out))
    assert last_seq == sum(1 + i % 7 for i in range(0, 240, 3)) - 1


def test_kafka_reads_compacted_segments(tmp_path: Path) -> None:
    cfg = LogConfig(
        segment_bytes=4096, index_interval_bytes=200, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0
    )
    m = LogManager([tmp_path], cfg, cluster_id="dump-test-cluster0000", node_id=1, clock=lambda: 0)
    plog = m.get_or_create("compacted", 0)
    for r in range(60):
        kvs = [(b"key-%d" % k, None if (k + r) % 9 == 0 else b"v-%d-%d" % (k, r)) for k in range(6)]
        plog.append(batch(kvs, timestamp=1000 + r, compression=r % 5), leader_epoch=0, now_ms=0)
    LogCleaner().clean(plog, now_ms=0)
    LogCleaner().clean(plog, now_ms=10**12)  # past the delete horizon: tombstones go
    m.close()
    part = tmp_path / "compacted-0"
    out = dump("--files", ",".join(files(part, ".log")), "--deep-iteration")
    indexes = files(part, ".index") + files(part, ".timeindex")
    verify = dump("--files", ",".join(indexes), "--verify-index-only")
    assert not BAD_WORDS.search(verify), verify[-3000:]
    plog = reopen(tmp_path, "compacted", cfg)
    # compaction leaves gaps between offsets by design; everything else must be clean
    bad = [line for line in out.splitlines() if BAD_WORDS.search(line) and "Non-consecutive" not in line]
    assert not bad, bad[:5]
    want_batches, want_offsets = engine_view(plog)
    got_batches, got_offsets = parse_log_dump(out)
    assert got_batches == want_batches and got_offsets == want_offsets
    assert len(want_offsets) < 360
    # the engine's own view of the data agrees with a full re-read
    data = plog.read(0, 1 << 30).read_bytes()
    assert [read_header(data, p).base_offset for p, _ in split_batches(data)] == [b[0] for b in want_batches]
