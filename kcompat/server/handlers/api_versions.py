"""ApiVersions (key 18): v0-4, answered from the handler table.

Version notes:
* v1: throttle_time_ms
* v2: no change
* v3: flexible; client_software_name/version in the request (accepted as sent: Kafka's strict
  check makes Java disconnect on INVALID_REQUEST, so we never fail it); tagged features fields
* v4: no change (lets clients know the broker answers an unknown version with its own range)

The response header is always v0 (the codec knows). Versions above 4 never reach this handler:
Broker.handle answers them with a v0 body, UNSUPPORTED_VERSION and our ApiVersions range.
Not sent: supported/finalized features (a finalized transaction.version >= 2 would switch Java 4.x
producers to transactions v2), zk_migration_ready.
"""

from __future__ import annotations

from typing import Any

from kcompat.server.registry import HANDLERS, handles
from kcompat.wire.messages.api_versions import API_VERSIONS
from kcompat.wire.protocol import Request
from kcompat.wire.types.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse


def advertised() -> list[ApiVersion]:
    return [
        ApiVersion(api_key=key, min_version=reg.min_version, max_version=reg.max_version)
        for key, reg in sorted(HANDLERS.items())
    ]


@handles(API_VERSIONS, "0-4")
async def api_versions(ctx: Any, request: Request[ApiVersionsRequest]) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0, api_keys=advertised(), throttle_time_ms=0)
