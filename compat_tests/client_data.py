"""Records every client test produces and reads back, and a look at what the broker stored.

Values cover the awkward cases: a null key, an empty value, binary bytes, repeated header keys, a
value large enough to make the codecs work, and explicit CreateTime timestamps.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import NamedTuple

from kcompat.log.log_files import LOG_SUFFIX
from kcompat.wire.record_batch import read_header, split_batches


class Rec(NamedTuple):
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


# The start of the previous hour: explicit CreateTimes that stay within retention.ms. A fixed 2023
# time is past the default 7 days, so the broker's retention pass (every 5 minutes on the
# session broker) deleted whatever a test had just produced and not yet read back: CI once read
# nothing of test_produce_and_consume_every_codec[lz4] in 15 s.
BASE_TS = (time.time_ns() // 3_600_000_000_000 - 1) * 3_600_000
RECORDS = (
    Rec(b"key-0", b"value-0", (("h1", b"a"), ("h2", b"b")), BASE_TS),
    Rec(None, b"\x00\xff\x10 binary \xfe", (), BASE_TS + 1),
    Rec(b"k2", b"", (("dup", b"1"), ("dup", b"2")), BASE_TS + 2),
    Rec(b"big", bytes(range(256)) * 200, (("n", b"\x00"),), BASE_TS + 3),
)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def stored_codecs(data_dir: Path, topic: str, partition: int = 0) -> set[int]:
    """The compression codec ids of the batches the broker wrote for a partition."""
    found: set[int] = set()
    for seg in sorted((data_dir / f"{topic}-{partition}").glob("*" + LOG_SUFFIX)):
        data = seg.read_bytes()
        for pos, _ in split_batches(data):
            found.add(read_header(data, pos).compression)
    return found
