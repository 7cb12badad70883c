"""The handler table: which API versions kcompat implements, filled in next to each handler.

Each handler module registers itself with the versions it fully implements:

    @handles(DELETE_RECORDS, "0-2")   # served range; see the module's version notes
    async def delete_records(
        ctx: RequestContext, request: Request[DeleteRecordsRequest]
    ) -> DeleteRecordsResponse: ...

ApiVersions answers from this table, so what is advertised is exactly what is implemented. The one
exception is `advertised_min`, as in `@handles(PRODUCE, "3-13", advertised_min=0)`: versions below
the declared range that ApiVersions still lists but that are refused when used (Kafka's
PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION: Produce v0-2 stay advertised for librdkafka before
2.11.1, KAFKA-18659); such a request does not decode, so the broker closes the connection.
A handler returns the response body, NO_RESPONSE (Produce with acks=0) or Deferred(awaitable): the
request is taken (a Produce's records appended) and its body comes later, while the connection may
take the next Produce (kcompat.server.network.connection: Produce pipelining). The body is an instance
of the response's class from kcompat.wire.types (so mypy checks its field names, as it checks the
request's through Request[...]); the codec encodes nothing else. Registering one API key twice is
a bug and fails at import.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from kcompat.wire.protocol import Request
from kcompat.wire.schema import Api, VersionRange
from kcompat.wire.structs import Struct


class NoResponse(enum.Enum):
    """What a request that gets no response returns (Produce with acks=0)."""

    NO_RESPONSE = "no response"


NO_RESPONSE: Final = NoResponse.NO_RESPONSE


@dataclass(frozen=True, slots=True)
class Deferred:
    """The body of a request taken now and answered later (acks=all waiting for the ISR)."""

    body: Awaitable[Struct]


Handler = Callable[[Any, Request[Any]], Awaitable[Struct | Deferred | NoResponse]]


@dataclass(frozen=True, slots=True)
class Registration:
    api: Api
    min_version: int
    max_version: int
    handler: Handler
    advertised_min: int  # == min_version, except for versions advertised only to be refused


HANDLERS: dict[int, Registration] = {}


def handles(api: Api, versions: str, *, advertised_min: int | None = None) -> Callable[[Handler], Handler]:
    vr = VersionRange.parse(versions)
    if vr.high is None or vr.low not in api.versions or vr.high not in api.versions:
        raise ValueError(f"{api.name}: {versions} is not within the declared {api.versions}")
    if advertised_min is not None and not 0 <= advertised_min <= vr.low:
        raise ValueError(f"{api.name}: advertised_min {advertised_min} is above {versions}")

    def register(fn: Handler) -> Handler:
        if api.key in HANDLERS:
            raise RuntimeError(f"API key {api.key} ({api.name}) registered twice")
        assert vr.high is not None
        low = vr.low if advertised_min is None else advertised_min
        HANDLERS[api.key] = Registration(api, vr.low, vr.high, fn, low)
        return fn

    return register
