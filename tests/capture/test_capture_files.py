"""The capture's files: the JSON-lines writer (bounded queue, drops counted, rotation) and what
replay reads back (a records capture, JSON lines, a protocol log in full; not a summarized one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcompat.capture.bodies import batches_json, blob, unblob
from kcompat.capture.log_writer import JsonLinesWriter
from kcompat.capture.replay import ReplayError, read_stream
from kcompat.wire.records import Record, build_batch


def test_a_full_queue_drops_and_counts_instead_of_waiting(tmp_path: Path) -> None:
    w = JsonLinesWriter(tmp_path / "t.jsonl", 1 << 20, 1, queue_lines=10, start=False)
    for i in range(25):
        w.put({"n": i})  # the writer is held back: the queue takes 10, drops 15, never blocks
    assert w.dropped == 15
    w.start()
    w.close()
    lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [x["n"] for x in lines] == list(range(10)) and w.written == 10


def test_rotation_keeps_the_cap_and_the_number_of_old_files(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    w = JsonLinesWriter(path, 1024, 2)
    for i in range(200):
        w.put({"n": i, "pad": "x" * 80})
    w.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["r.jsonl", "r.jsonl.1", "r.jsonl.2"]
    assert all(p.stat().st_size <= 1024 for p in tmp_path.iterdir())
    newest = [json.loads(x)["n"] for x in path.read_text().splitlines()]
    assert newest[-1] == 199 and w.rotations > 2
    older = [json.loads(x)["n"] for x in (tmp_path / "r.jsonl.1").read_text().splitlines()]
    assert older[-1] + 1 == newest[0]  # .1 holds what came just before


def test_blobs_round_trip_text_and_binary() -> None:
    for raw in (b"plain", b"\xff\x00binary", b""):
        assert unblob(blob(raw)) == raw
    assert blob(None) is None and unblob(None) is None


def _batch() -> bytes:
    return build_batch([Record(0, 1000, b"k0", b"v0"), Record(1, 1001, None, b"\xff", (("h", b"x"),))])


def test_replay_reads_records_captures_and_full_logs(tmp_path: Path) -> None:
    records = [
        {"direction": "produce", "topic": "t", "partition": 1, "offset": 5, "timestamp": 7, "key": "a",
         "value": {"base64": "/w=="}, "headers": [["h", "x"]]},
        {"direction": "consume", "topic": "t", "partition": 1, "offset": 5, "timestamp": 7, "key": "a",
         "value": "ignored", "headers": []},
        {"direction": "produce", "topic": "t", "partition": 1, "offset": 6, "timestamp": 8, "key": None,
         "value": "b", "headers": []},
    ]  # fmt: skip
    whole = tmp_path / "capture.json"
    whole.write_text(json.dumps({"id": 1, "records": records}))
    lines = tmp_path / "capture.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in records))
    for f in (whole, lines):
        stream = read_stream(f)
        assert list(stream) == [("t", 1)]
        got = stream[("t", 1)]
        assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
            (b"a", b"\xff", (("h", b"x"),), 7),
            (None, b"b", (), 8),
        ]

    logged = {
        "api": "Produce",
        "request": {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batches_json(_batch(), full=True)}]}]},
        "response": {"responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 0}]}]},
    }  # fmt: skip
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(logged) + "\n" + json.dumps({"api": "Fetch", "request": {}}) + "\n")
    assert [(r.key, r.value) for r in read_stream(log)[("t", 0)]] == [(b"k0", b"v0"), (None, b"\xff")]

    logged["request"]["topic_data"][0]["partition_data"][0]["records"] = batches_json(_batch(), full=False)  # type: ignore[index]
    log.write_text(json.dumps(logged) + "\n")
    with pytest.raises(ReplayError, match="summarized"):
        read_stream(log)
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(ReplayError, match="empty"):
        read_stream(empty)


def test_batches_summarized() -> None:
    (summary,) = batches_json(_batch(), full=False)
    assert summary == {
        "base_offset": 0, "count": 2, "bytes": len(_batch()), "compression": "none", "producer_id": -1,
        "producer_epoch": -1, "base_sequence": -1, "transactional": False, "control": False,
    }  # fmt: skip
