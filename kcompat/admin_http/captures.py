"""Traffic captures' HTTP API on the admin listener, next to /faults (the engine: kcompat/capture).

    GET    /captures              {"captures": [{"id", "kind", "match", "running", "seen", ...}]}
    POST   /captures              start one: 201 {"id": n, "capture": {...}}  (spec: kcompat/capture/spec.py)
    GET    /captures/ID           the capture and its records ({"records": [...]}; ?since=N&limit=M pages)
    POST   /captures/ID/stop      stop recording (what was captured stays readable)
    DELETE /captures/ID           stop and forget it;  DELETE /captures: all of them ({"cleared": n})

A capture the engine cannot read is a 400 whose `error` names the field at fault; a log capture
writes only a plain file name inside the broker's capture directory (<log.dirs[0]>/captures).
"""

from __future__ import annotations

import json
from typing import Any

from kcompat.admin_http.http_server import Page
from kcompat.capture import CaptureEngine, CaptureError, spec_from_json

_JSON = "application/json"


def captures_route(engine: CaptureEngine) -> Any:
    def route(method: str, path: str, query: dict[str, list[str]], body: bytes) -> Page:
        rest = path[len("/captures") :].strip("/")
        if rest:
            cid_text, _, verb = rest.partition("/")
            if not cid_text.isdigit() or len(cid_text) > 9:
                return _error(404, f"no capture {cid_text!r}: capture ids are numbers")
            return _one(engine, method, int(cid_text), verb, query)
        if method in ("GET", "HEAD"):
            return _page(200, {"captures": engine.listing()})
        if method == "POST":
            return _start(engine, body)
        if method == "DELETE":
            return _page(200, {"cleared": engine.clear()})
        return _error(405, "use GET, POST or DELETE on /captures")

    return route


def _one(engine: CaptureEngine, method: str, cid: int, verb: str, query: dict[str, list[str]]) -> Page:
    if verb == "stop":
        if method != "POST":
            return _error(405, "use POST on /captures/ID/stop")
        return _page(200, {"stopped": cid}) if engine.stop(cid) else _error(404, f"no capture {cid}")
    if verb:
        return _error(404, f"no such route /captures/{cid}/{verb} (only /captures/ID/stop)")
    if method in ("GET", "HEAD"):
        try:
            since = _number(query, "since", 0)
            limit = _number(query, "limit", 100_000)
        except ValueError as e:
            return _error(400, str(e))
        found = engine.records(cid, since, limit)
        return _page(200, found) if found is not None else _error(404, f"no capture {cid}")
    if method == "DELETE":
        return _page(200, {"removed": cid}) if engine.remove(cid) else _error(404, f"no capture {cid}")
    return _error(405, "use GET or DELETE on /captures/ID")


def _number(query: dict[str, list[str]], key: str, default: int) -> int:
    values = query.get(key)
    if not values:
        return default
    text = values[-1]
    if not text.isdigit() or len(text) > 12:
        raise ValueError(f"{key}: {text!r} is not a non-negative integer")
    return int(text)


def _start(engine: CaptureEngine, body: bytes) -> Page:
    try:
        try:
            data = json.loads(body.decode("utf-8"))
        except UnicodeDecodeError:
            raise CaptureError("the body is not UTF-8 text") from None
        except json.JSONDecodeError as e:
            raise CaptureError(
                f"the body is not JSON ({e.msg} at line {e.lineno}, column {e.colno})"
            ) from None
        except (RecursionError, ValueError):
            raise CaptureError(
                "the body is not JSON a capture can be read from (too deep or too large)"
            ) from None
        cid = engine.start(spec_from_json(data))
    except CaptureError as e:
        return _error(400, str(e))
    except OSError as e:
        return _error(500, f"the capture file cannot be opened ({e.strerror}): check the capture directory")
    return _page(201, {"id": cid, "capture": engine.describe(engine.captures[cid])})


def _page(status: int, data: Any) -> Page:
    return Page(json.dumps(data, indent=1).encode() + b"\n", _JSON, status=status)


def _error(status: int, message: str) -> Page:
    return _page(status, {"error": message})
