"""A typed error response for any API, built from its schema (what the `error` action answers).

Every ErrorCode field of the response (`error_code`, `top_level_error_code`, any int16 field
named `*error_code`) carries the error, every nullable error message says the answer was
injected, and an array of entries (per topic, per partition, per group, ...) echoes the entries
of the request it answers: the request array whose elements share the most identity fields
(a topic's name or id, a partition index, a group or transactional id) with the response's
elements, or a list of plain names (`topic_names`, `groups`) for a response entry with one name.
Everything else keeps the schema's default (Kafka's -1 for offsets, ids and epochs where the
spec gives one). As Kafka's per-API `getErrorResponse`, but from the schema, so an API added to
the specs needs no code here.
"""

from __future__ import annotations

from typing import Any

from kcompat.wire.messages import APIS
from kcompat.wire.protocol import response_codec
from kcompat.wire.schema import F

# identity fields, normalized: the same thing under the names request and response give it
_SAME = {
    "topic": "name",
    "topic_name": "name",
    "partition": "partition_index",
    "index": "partition_index",
    "partition_id": "partition_index",
}
_IDENTITY = frozenset(
    {"name", "topic_id", "partition_index", "group_id", "transactional_id", "member_id", "key"}
)
_NAME_LISTS = {"string": ("name", "group_id", "transactional_id"), "int32": ("partition_index",)}


def error_response(api_key: int, version: int, request_body: Any, error_code: int, message: str) -> Any:
    """The response message of `api_key` v`version` answering `request_body` with `error_code`."""
    api = APIS[api_key]
    values = _struct(api.response.fields, api.request.fields, version, request_body, error_code, message)
    return response_codec(api_key).build(values)


def _struct(
    fields: tuple[F, ...], req_fields: tuple[F, ...], version: int, req: Any, code: int, message: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        if f.type == "int16" and f.name.endswith("error_code"):
            out[f.name] = code
        elif f.type == "string" and f.name.endswith("error_message") and version in f.nullable:
            out[f.name] = message
        elif f.is_struct and f.is_array:
            out[f.name] = _entries(f, req_fields, version, req, code, message)
        elif f.type == "records" and version not in f.nullable:
            out[f.name] = b""  # no records, where the version has no null for them (ShareFetch v1+)
    return out


def _entries(
    f: F, req_fields: tuple[F, ...], version: int, req: Any, code: int, message: str
) -> list[dict[str, Any]]:
    source = _pair(f, req_fields, version) if req is not None else None
    if source is None:
        return []
    items = getattr(req, source.name, None) or ()
    out = []
    for item in items:
        if source.is_struct:
            entry = _struct(f.fields, source.fields, version, item, code, message)
            by_norm = {_SAME.get(s.name, s.name): s for s in source.fields if version in s.versions}
            for g in f.fields:
                if version in g.versions and _SAME.get(g.name, g.name) in _IDENTITY:
                    s = by_norm.get(_SAME.get(g.name, g.name))
                    if s is not None and s.type == g.type:
                        entry[g.name] = getattr(item, s.name)
        else:
            entry = _struct(f.fields, (), version, None, code, message)
            entry[_name_field(f, version, source.element_type) or ""] = item
        out.append(entry)
    return out


def _pair(f: F, req_fields: tuple[F, ...], version: int) -> F | None:
    """The request array a response array answers, by shared identity fields (None: none)."""
    mine = {_SAME.get(g.name, g.name) for g in f.fields if version in g.versions} & _IDENTITY
    best: tuple[int, F] | None = None
    for r in req_fields:
        if version not in r.versions or not r.is_array:
            continue
        if r.is_struct:
            theirs = {_SAME.get(g.name, g.name) for g in r.fields if version in g.versions}
            score = 2 * len(mine & theirs) + (r.name == f.name)
        else:
            score = 1 if _name_field(f, version, r.element_type) else 0
        if score and (best is None or score > best[0]):
            best = (score, r)
    return best[1] if best else None


def _name_field(f: F, version: int, element_type: str) -> str | None:
    """The one identity field of `f`'s entries a list of plain `element_type` values names."""
    present = [g for g in f.fields if version in g.versions]
    for name in _NAME_LISTS.get(element_type, ()):
        for g in present:
            if _SAME.get(g.name, g.name) == name and g.type == element_type:
                return g.name
    return None
