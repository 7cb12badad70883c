"""Walking the record batches of a `.log` file by their headers, a buffered read at a time.

Reads touch only batch headers (61 bytes each, see kcompat.wire.record_batch), never the records, so
a walk costs one struct unpack per batch and one pread per `chunk` bytes of log. A walk stops at the
first header that cannot be read or whose batch runs past `end`; checking that this is the real end
of the data is the job of recovery, which also checks CRCs (`iter_whole_batches`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from kcompat.log.log_file import FetchSlice, LogFile
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import HEADER_SIZE, BatchHeader, read_header, split_batches

HEADER_CHUNK = 16 * 1024
BATCH_CHUNK = 1024 * 1024


def iter_headers(
    file: LogFile, start: int, end: int, chunk: int = HEADER_CHUNK
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in [start, end)."""
    pos = start
    buf = b""
    buf_pos = start  # file position of buf[0]
    while end - pos >= HEADER_SIZE:
        off = pos - buf_pos
        if off < 0 or off + HEADER_SIZE > len(buf):
            buf = file.pread(min(chunk, end - pos), pos)
            buf_pos, off = pos, 0
            if len(buf) < HEADER_SIZE:
                return
        try:
            h = read_header(buf, off)
        except DecodeError:
            return
        if pos + h.size > end:
            return
        yield pos, h
        pos += h.size


def iter_whole_batches(
    file: LogFile, start: int, end: int, chunk: int = BATCH_CHUNK
) -> Iterator[tuple[int, BatchHeader | None, memoryview]]:
    """(position, header, batch bytes) of each batch in [start, end), for recovery and cleaning.

    At the first unreadable header or a batch running past `end`, yields (position, None, rest)
    once and stops: the caller decides what a bad tail means.
    """
    pos = start
    buf = memoryview(b"")
    buf_pos = start
    while pos < end:
        off = pos - buf_pos
        if off + HEADER_SIZE > len(buf):
            buf = memoryview(file.pread(min(max(chunk, HEADER_SIZE), end - pos), pos))
            buf_pos, off = pos, 0
        try:
            h = read_header(buf, off)
        except DecodeError:
            yield pos, None, buf[off:]
            return
        if pos + h.size > end:
            yield pos, None, buf[off:]
            return
        if off + h.size > len(buf):
            buf = memoryview(file.pread(max(chunk, h.size), pos))
            buf_pos, off = pos, 0
            if len(buf) < h.size:
                yield pos, None, buf
                return
        yield pos, h, buf[off : off + h.size]
        pos += h.size


class OffsetReads(Protocol):
    """What iter_log_batches needs of a PartitionLog."""

    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    def read(self, offset: int, max_bytes: int) -> FetchSlice: ...


def iter_log_batches(log: OffsetReads, chunk: int = BATCH_CHUNK) -> Iterator[tuple[BatchHeader, memoryview]]:
    """(header, batch bytes) of every batch from the log start to its end, by offset, `chunk` bytes
    a read (blocking): the replay of a coordinator's topic partition."""
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        data = memoryview(log.read(offset, chunk).read_bytes())
        spans = split_batches(data)
        if not spans:
            return
        for pos, size in spans:
            h = read_header(data, pos)
            offset = h.base_offset + h.last_offset_delta + 1
            yield h, data[pos : pos + size]
