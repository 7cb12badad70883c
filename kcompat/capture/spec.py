"""A capture as typed data, and its JSON form (what the HTTP API and the CLI carry).

    {"match":  {... the fault rules' matchers: api, versions, topic, partition, group_id,
                transactional_id, client_id, principal, peer, broker ...},
     "kind":   "records"     what clients produced and consumed, record by record, kept in memory
               | "log",      every matching request and its answer, one JSON line each, to a file
     "max_records": 10000,   (records) the most kept; later ones are counted as dropped
     "file": "traffic.jsonl",(log) a plain file name, written in the broker's capture directory
     "max_bytes": 10485760, "files": 3,   (log) rotate at this size, keep this many old files
     "full": false}          (log) record batches in full, records decoded, not just summarized

A capture that cannot be read raises CaptureError (a ValueError) naming the field at fault.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kcompat.faults.rules import Match, RuleError, match_from_json, match_to_json

KINDS = ("records", "log")
MAX_RECORDS = 1_000_000
MAX_FILE_BYTES = 1 << 34
MAX_FILES = 100
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class CaptureError(ValueError):
    """A capture that cannot be read; the message says which field and why."""


@dataclass(frozen=True, slots=True)
class CaptureSpec:
    match: Match
    kind: str = "records"
    max_records: int = 10_000
    file: str = ""
    max_bytes: int = 10 << 20
    files: int = 3
    full: bool = False


def spec_from_json(data: object) -> CaptureSpec:
    if not isinstance(data, Mapping):
        raise CaptureError("a capture is a JSON object: match, kind (records or log) and its limits")
    known = {"match", "kind", "max_records", "file", "max_bytes", "files", "full"}
    extra = sorted(str(k) for k in data if k not in known)
    if extra:
        raise CaptureError(
            f"capture: unknown field(s) {', '.join(extra)} (known: {', '.join(sorted(known))})"
        )
    try:
        match = match_from_json(data.get("match", {}))
    except RuleError as e:
        raise CaptureError(str(e)) from None
    kind = data.get("kind", "records")
    if kind not in KINDS:
        raise CaptureError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    full = data.get("full", False)
    if not isinstance(full, bool):
        raise CaptureError(f"full: {full!r} is not true or false")
    file = data.get("file", "")
    if kind == "log":
        if not isinstance(file, str) or not _FILE_NAME.fullmatch(file) or ".." in file:
            raise CaptureError(
                f"file: {file!r} is not a plain file name (letters, digits, . _ -; no directories)"
            )
    elif "file" in data:
        raise CaptureError("file: only for kind log")
    return CaptureSpec(
        match=match,
        kind=kind,
        max_records=_int(data, "max_records", 10_000, 1, MAX_RECORDS),
        file=file,
        max_bytes=_int(data, "max_bytes", 10 << 20, 1024, MAX_FILE_BYTES),
        files=_int(data, "files", 3, 0, MAX_FILES),
        full=full,
    )


def _int(data: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    v = data.get(key, default)
    if isinstance(v, int) and not isinstance(v, bool) and low <= v <= high:
        return v
    raise CaptureError(f"{key}: {v!r} is not an integer from {low} to {high}")


def spec_to_json(spec: CaptureSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"match": match_to_json(spec.match), "kind": spec.kind}
    if spec.kind == "records":
        out["max_records"] = spec.max_records
    else:
        out.update(file=spec.file, max_bytes=spec.max_bytes, files=spec.files, full=spec.full)
    return out
