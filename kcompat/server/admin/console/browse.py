"""The console's message browser: records of one partition from an offset or a time, as text.

Reads the log the way a Fetch does (a slice of whole batches, at most MAX_READ_BYTES), decodes
the batches with the wire codec (decompression included), and shows each key, value and header
as text (UTF-8, undecodable bytes escaped), JSON (pretty-printed when it parses) or hex.
Values longer than SHOW_BYTES are cut, and say so.

A search (Search: key, value or header substring, an offset and a time range) reads on until it
has `limit` matches, reaches the range's end or has read MAX_SCAN_BYTES (then it says where it
stopped, to search on from there).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kcompat.wire.record_batch import CONTROL_MASK, split_batches
from kcompat.wire.records import Record, decode_batch

if TYPE_CHECKING:
    from kcompat.server.broker import Broker

FORMATS = ("text", "json", "hex")
MAX_RECORDS = 200
MAX_READ_BYTES = 4 * 1024 * 1024
MAX_SCAN_BYTES = 64 * 1024 * 1024  # what one search reads at most (some 100 ms)
SHOW_BYTES = 1024


@dataclass(slots=True)
class Shown:
    text: str
    size: int  # of the whole value, before any cut
    cut: bool


@dataclass(slots=True)
class BrowsedRecord:
    offset: int
    timestamp: int
    key: Shown | None
    value: Shown | None
    headers: list[tuple[str, Shown | None]]


@dataclass(frozen=True, slots=True)
class Search:
    """Substrings (UTF-8) the key, the value or any header (name or value) must hold; ranges inclusive."""

    key: bytes = b""
    value: bytes = b""
    header: bytes = b""
    until_offset: int | None = None
    from_ms: int | None = None
    until_ms: int | None = None

    def matches(self, r: Record) -> bool:
        if self.key and (r.key is None or self.key not in r.key):
            return False
        if self.value and (r.value is None or self.value not in r.value):
            return False
        if self.header and not any(
            self.header in k.encode() or (v and self.header in v) for k, v in r.headers
        ):
            return False
        if self.from_ms is not None and r.timestamp < self.from_ms:
            return False
        return self.until_ms is None or r.timestamp <= self.until_ms


@dataclass(slots=True)
class Browsed:
    records: list[BrowsedRecord]
    next_offset: int  # where reading stopped: the next search starts there
    scanned: int  # records read (matching or not)
    complete: bool  # the range (or the log) was read to its end


def show(data: bytes | None, form: str) -> Shown | None:
    if data is None:
        return None
    part = data[:SHOW_BYTES]
    cut = len(data) > SHOW_BYTES
    if form == "hex":
        text = part.hex(" ")
    elif form == "json" and not cut:
        try:
            text = json.dumps(json.loads(data), indent=2, ensure_ascii=False)
        except ValueError:
            text = data.decode("utf-8", "backslashreplace")
    else:
        text = part.decode("utf-8", "backslashreplace")
    return Shown(text, len(data), cut)


def start_offset(
    broker: Broker, topic: str, partition: int, offset: int | None, timestamp: int | None
) -> int:
    """Where to read from: an offset (clamped to the log), the first at/after a time, else the log start."""
    plog = broker.replicas.partition_log(topic, partition)
    if timestamp is not None:
        found = plog.offset_for_timestamp(timestamp)
        return found[0] if found is not None else plog.high_watermark
    if offset is None:
        return plog.log_start_offset
    if offset < 0:  # -N: the last N
        return max(plog.high_watermark + offset, plog.log_start_offset)
    return min(max(offset, plog.log_start_offset), plog.high_watermark)


def browse(
    broker: Broker,
    topic: str,
    partition: int,
    start: int,
    limit: int,
    form: str,
    search: Search | None = None,
) -> Browsed:
    plog = broker.replicas.partition_log(topic, partition)
    wanted = search or Search()
    out: list[BrowsedRecord] = []
    position = start
    limit = max(1, min(limit, MAX_RECORDS))
    end = plog.high_watermark
    if wanted.until_offset is not None:
        end = min(end, wanted.until_offset + 1)
    read = scanned = 0
    while len(out) < limit and position < end and read < MAX_SCAN_BYTES:
        data = memoryview(plog.read(position, MAX_READ_BYTES).read_bytes())
        if not data:
            break
        read += len(data)
        next_position = position
        for pos, size in split_batches(data):
            header, records = decode_batch(data[pos : pos + size])
            next_position = header.base_offset + header.last_offset_delta + 1
            if header.attributes & CONTROL_MASK:
                continue
            for r in records:
                if not position <= r.offset < end or len(out) >= limit:
                    continue
                scanned += 1
                if wanted.matches(r):
                    headers = [(k, show(v, form)) for k, v in r.headers]
                    out.append(
                        BrowsedRecord(r.offset, r.timestamp, show(r.key, form), show(r.value, form), headers)
                    )
                    if len(out) >= limit:  # full: the next search goes on after this record
                        next_position = r.offset + 1
            if len(out) >= limit:
                break
        if next_position <= position:
            break
        position = min(next_position, end)
    return Browsed(out, position, scanned, position >= end)
