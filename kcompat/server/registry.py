"""The handler table: which API versions kcompat implements, filled in next to each handler.

Each handler module registers itself with the versions it fully implements:

    @handles(DELETE_RECORDS, "0-2")   # advertised range; see the module's version notes
    async def delete_records(
        ctx: RequestContext, request: Request[DeleteRecordsRequest]
    ) -> DeleteRecordsResponse: ...

ApiVersions answers from this table, so what is advertised is exactly what is implemented.
A handler returns the response body or NO_RESPONSE (Produce with acks=0). The body is an instance
of the response's class from kcompat.wire.types (so mypy checks its field names, as it checks the
request's through Request[...]); a plain dict is still accepted from handlers not yet converted,
and a key its declaration lacks raises. Registering one API key twice is a bug and fails at import.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kcompat.wire.protocol import Request
from kcompat.wire.schema import Api, VersionRange

NO_RESPONSE: Any = object()

Handler = Callable[[Any, Request], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Registration:
    api: Api
    min_version: int
    max_version: int
    handler: Handler


HANDLERS: dict[int, Registration] = {}


def handles(api: Api, versions: str) -> Callable[[Handler], Handler]:
    vr = VersionRange.parse(versions)
    if vr.high is None or vr.low not in api.versions or vr.high not in api.versions:
        raise ValueError(f"{api.name}: {versions} is not within the declared {api.versions}")

    def register(fn: Handler) -> Handler:
        if api.key in HANDLERS:
            raise RuntimeError(f"API key {api.key} ({api.name}) registered twice")
        assert vr.high is not None
        HANDLERS[api.key] = Registration(api, vr.low, vr.high, fn)
        return fn

    return register
