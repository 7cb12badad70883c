"""What the duplicate and corrupt actions do to an answer's chunks (a response frame).

A response frame starts with its size (int32) and the correlation id (int32) of the request it
answers; both actions keep the frame well-formed, so the client's check of the correlation id is
what catches them. Seen here: kafka-python raises CorrelationIdError, reconnects and retries;
the Java client's I/O thread logs CorrelationIdMismatchException and the request expires at
delivery.timeout.ms; librdkafka drops an answer with an unknown correlation id and the request
times out. A duplicate is caught the same way, when the next answer's id is checked.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

_CORRELATION = struct.Struct(">i")
_CORRUPT_MASK = 0x5A5A5A5A


def duplicate(chunks: Sequence[Any]) -> list[Any]:
    """The answer twice in a row (file slices are sent twice: a slice is a description, not a read)."""
    return [*chunks, *chunks]


def corrupt(chunks: Sequence[Any]) -> list[Any]:
    """The answer with its correlation id changed (the first chunk always holds the header)."""
    first = bytearray(chunks[0])
    (correlation,) = _CORRELATION.unpack_from(first, 4)
    _CORRELATION.pack_into(first, 4, correlation ^ _CORRUPT_MASK)
    return [bytes(first), *chunks[1:]]
