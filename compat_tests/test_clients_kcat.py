"""kcat 1.7 (librdkafka 2.0.2, with its single-version feature checks) against `kcompat serve`.

Old librdkafka enables message format v2 only if Produce 3 and Fetch 4 are advertised, gzip/snappy/lz4
only if Produce 0 is, zstd only with Produce 7 and Fetch 10, lz4 only with FindCoordinator 0; each
codec test checks the batches the broker stored really use the codec asked for.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from compat_tests.client_data import CODEC_IDS, CODECS, stored_codecs, unique

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        shutil.which("kcat") is None, reason="kcat is not installed: run tools/setup-test-deps.sh"
    ),
]

LINES = [("k1", "first value"), ("k2", "second: with colon-free text"), ("k3", "x" * 5000)]


def kcat(
    *args: str, stdin: str | None = None, check: bool = True, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"kcat {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def produce(bootstrap: str, topic: str, lines: list[tuple[str, str]], *extra: str) -> None:
    text = "".join(f"{k}\t{v}\n" for k, v in lines)
    kcat(
        "-b",
        bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-K",
        "\t",
        "-H",
        "origin=kcat",
        "-H",
        "n=1",
        *extra,
        stdin=text,
    )


def consume(bootstrap: str, topic: str, *offset: str, check: bool = True) -> list[dict[str, Any]]:
    args = ["-b", bootstrap, "-C", "-t", topic, "-p", "0", "-J", "-e", *(offset or ("-o", "beginning"))]
    out = kcat(*args, check=check).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(kcompat_session_broker: Any, codec: str) -> None:
    b = kcompat_session_broker
    topic = unique(f"kc-{codec}")
    before = int(time.time() * 1000)
    produce(b.bootstrap, topic, LINES, "-X", f"compression.codec={codec}", "-X", "linger.ms=50")
    got = consume(b.bootstrap, topic)
    assert [(m["offset"], m["key"], m["payload"], m["headers"]) for m in got] == [
        (i, k, v, ["origin", "kcat", "n", "1"]) for i, (k, v) in enumerate(LINES)
    ]
    assert all(m["tstype"] == "create" and before - 1000 <= m["ts"] <= before + 60_000 for m in got)
    # librdkafka sends a batch uncompressed when the codec would not shrink it (the small lines split
    # off into a batch of their own by linger timing under load); the 5,000-byte line always shrinks.
    stored = stored_codecs(Path(b.data_dir), topic)
    assert CODEC_IDS[codec] in stored and stored <= {0, CODEC_IDS[codec]}


def test_consume_from_earliest_latest_and_timestamp(kcompat_session_broker: Any) -> None:
    b = kcompat_session_broker
    topic = unique("kc-offsets")
    produce(b.bootstrap, topic, [("a", "0"), ("b", "1")])
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    produce(b.bootstrap, topic, [("c", "2"), ("d", "3")])
    assert [m["payload"] for m in consume(b.bootstrap, topic)] == ["0", "1", "2", "3"]
    assert [m["payload"] for m in consume(b.bootstrap, topic, "-o", f"s@{cut}")] == ["2", "3"]
    assert [m["payload"] for m in consume(b.bootstrap, topic, "-o", "-1")] == ["3"]
    assert consume(b.bootstrap, topic, "-o", "end") == []
    listing = kcat("-b", b.bootstrap, "-L", "-J", "-t", topic).stdout
    meta = json.loads(listing)
    assert [t["topic"] for t in meta["topics"]] == [topic]
    assert meta["controllerid"] == meta["brokers"][0]["id"]


def test_idempotent_producers_around_a_restart(kcompat_broker_factory: Any) -> None:
    # kcat reads a piped stdin in large blocks and produces only once a block is full or the pipe is
    # closed, so one kcat process cannot send, wait for a restart, then send again: two idempotent
    # kcat producers run on either side of the restart instead (each gets its own producer id).
    b = kcompat_broker_factory()
    topic = unique("kc-idem")
    produce(b.bootstrap, topic, [("a", "one")], "-X", "enable.idempotence=true")
    b.restart()
    produce(b.bootstrap, topic, [("b", "two")], "-X", "enable.idempotence=true")
    assert [(m["offset"], m["payload"]) for m in consume(b.bootstrap, topic)] == [(0, "one"), (1, "two")]


def test_unknown_topic_with_auto_create_off(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory(auto_create_topics_enable=False)
    done = kcat(
        "-b",
        b.bootstrap,
        "-P",
        "-t",
        unique("kc-missing"),
        "-X",
        "message.timeout.ms=3000",
        stdin="x\n",
        check=False,
    )
    assert done.returncode != 0
    # librdkafka 2.0.2 keeps the record until message.timeout.ms, waiting for the topic to appear.
    assert "unknown topic" in done.stderr.lower() or "message timed out" in done.stderr.lower()
    meta = json.loads(kcat("-b", b.bootstrap, "-L", "-J").stdout)
    assert not [t for t in meta["topics"] if t["topic"].startswith("kc-missing")]


def test_record_over_message_max_bytes(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory(message_max_bytes=2000)
    topic = unique("kc-big")
    kcat("-b", b.bootstrap, "-P", "-t", topic, "-p", "0", stdin="small\n")
    done = kcat("-b", b.bootstrap, "-P", "-t", topic, "-p", "0", "-X", "message.max.bytes=1000000", stdin="y" * 10_000 + "\n",
                check=False)  # fmt: skip
    assert done.returncode != 0 and "too large" in done.stderr.lower()
    assert [m["payload"] for m in consume(b.bootstrap, topic)] == ["small"]
