"""Kafka's text checkpoint files (CheckpointFile / OffsetCheckpointFile).

    0                     version line (always 0)
    2                     entry count
    my-topic 0 1234       one entry a line, fields separated by one space
    my-topic 1 567

Offset checkpoints (in each log dir): recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint, cleaner-offset-checkpoint, with entries `topic partition offset`.
The leader-epoch-checkpoint (per partition dir) has entries `epoch startOffset`.

Writes go to `<file>.tmp`, are fsynced and renamed over the old file, so a crash leaves one whole
version or the other. A file that does not parse is reported as missing (None): for every
checkpoint the safe fallback is the one used when the file is absent (recover more, start lower).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from kcompat.log.log_files import atomic_write

log = logging.getLogger("kcompat.log")

VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


def encode_checkpoint(lines: Iterable[str]) -> bytes:
    entries = list(lines)
    return "".join([f"{VERSION}\n{len(entries)}\n", *(e + "\n" for e in entries)]).encode()


def decode_checkpoint(data: bytes, fields: int) -> list[list[str]] | None:
    """The entries' fields, or None if the text is not a version-0 checkpoint with `fields` fields a line."""
    try:
        lines = data.decode().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2 or int(lines[0]) != VERSION:
            return None
        count = int(lines[1])
        if count != len(lines) - 2:
            return None
        out = [line.split(" ") for line in lines[2:]]
        if any(len(f) != fields for f in out):
            return None
        return out
    except (UnicodeDecodeError, ValueError):
        return None


def write_offsets(path: Path, offsets: dict[tuple[str, int], int], *, sync: bool = True) -> None:
    """An empty checkpoint is never fsynced: lost in a crash, it reads as a missing file, which means
    the same (a new broker's first start wrote four, each with two fsyncs, before its first answer)."""
    sync = sync and bool(offsets)
    lines = (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items()))
    atomic_write(path, encode_checkpoint(lines), sync=sync)


def read_offsets(path: Path) -> dict[tuple[str, int], int] | None:
    """topic-partition -> offset, or None if the file is missing or malformed (logged)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    entries = decode_checkpoint(data, 3)
    if entries is None:
        log.warning("ignoring malformed checkpoint file %s", path)
        return None
    try:
        return {(t, int(p)): int(o) for t, p, o in entries}
    except ValueError:
        log.warning("ignoring malformed checkpoint file %s", path)
        return None
