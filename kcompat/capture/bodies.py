"""Decoded Kafka messages as JSON: every field by its name, record batches summarized or in full.

A batch summarized: {"base_offset", "count", "bytes", "compression", "producer_id",
"producer_epoch", "base_sequence", "transactional", "control"}; in full it also has "records",
each {"offset", "timestamp", "key", "value", "headers"}. Bytes that are UTF-8 text are shown as
text; any other bytes as {"base64": ...} (replay reads both forms back).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from typing import Any

from kcompat.wire import compression
from kcompat.wire.errors import DecodeError
from kcompat.wire.record_batch import (
    CONTROL_MASK,
    LOG_OVERHEAD,
    TRANSACTIONAL_MASK,
    read_header,
    split_batches,
)
from kcompat.wire.records import Record, decode_batch
from kcompat.wire.structs import UNKNOWN_TAGS, Struct

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
MAX_DEPTH = 32


def blob(data: bytes | bytearray | memoryview | None) -> Any:
    """Bytes as JSON: text when they are UTF-8, else {"base64": ...}."""
    if data is None:
        return None
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def unblob(value: Any) -> bytes | None:
    """The bytes `blob` showed."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        return base64.b64decode(value["base64"], validate=True)
    raise ValueError(f"{value!r} is neither text nor {{'base64': ...}}")


def records_bytes(value: Any) -> bytes:
    """A records field's bytes: a view of a frame, or a broker's file slice (read here)."""
    read = getattr(value, "read_bytes", None)
    return bytes(read()) if read is not None else bytes(value)


def frame_bytes(chunks: Iterable[Any]) -> bytes:
    """One response frame from a broker's chunks (file slices read), its size prefix left on."""
    return b"".join(records_bytes(c) for c in chunks)


def record_json(r: Record, base_delta: int = 0) -> dict[str, Any]:
    return {
        "offset": r.offset + base_delta,
        "timestamp": r.timestamp,
        "key": blob(r.key),
        "value": blob(r.value),
        "headers": [[k, blob(v)] for k, v in r.headers],
    }


def batches_json(data: bytes, *, full: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        spans = split_batches(data)
    except DecodeError as e:
        return [{"undecodable": str(e)}]
    view = memoryview(data)
    for pos, size in spans:
        try:
            h = read_header(view, pos)
        except DecodeError as e:
            out.append({"undecodable": str(e)})
            break
        item: dict[str, Any] = {
            "base_offset": h.base_offset,
            "count": h.records_count,
            "bytes": h.batch_length + LOG_OVERHEAD,
            "compression": _CODECS.get(compression.codec(h.attributes), "unknown"),
            "producer_id": h.producer_id,
            "producer_epoch": h.producer_epoch,
            "base_sequence": h.base_sequence,
            "transactional": bool(h.attributes & TRANSACTIONAL_MASK),
            "control": bool(h.attributes & CONTROL_MASK),
        }
        if full:
            try:
                _, records = decode_batch(view[pos : pos + size], verify_crc=False)
                item["records"] = [record_json(r) for r in records]
            except DecodeError as e:
                item["records"] = {"undecodable": str(e)}
        out.append(item)
    return out


def body_json(obj: Any, *, full: bool = False, depth: int = 0) -> Any:
    """A decoded message (kcompat.wire.types) as JSON."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if depth > MAX_DEPTH:
        return "..."
    if isinstance(obj, Struct):
        out: dict[str, Any] = {}
        for name in type(obj).__slots__:
            if name == UNKNOWN_TAGS:
                continue
            value = getattr(obj, name, None)
            if name == "records" and value is not None:
                out[name] = batches_json(records_bytes(value), full=full)
            else:
                out[name] = body_json(value, full=full, depth=depth + 1)
        return out
    if isinstance(obj, list):
        return [body_json(v, full=full, depth=depth + 1) for v in obj]
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return blob(obj)
    return repr(obj)
