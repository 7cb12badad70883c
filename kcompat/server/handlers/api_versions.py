"""ApiVersions (key 18): v0-4, answered from the handler table.

Version notes:
* v1: throttle_time_ms
* v2: no change
* v3: flexible; client_software_name/version in the request (accepted as sent: Kafka's strict
  check makes Java disconnect on INVALID_REQUEST, so we never fail it); tagged features fields
* v4: no change (lets clients know the broker answers an unknown version with its own range)

The response header is always v0 (the codec knows). Versions above 4 never reach this handler:
Broker.handle answers them with a v0 body, UNSUPPORTED_VERSION and our ApiVersions range.

Features (v3+), from the MetadataView (kcompat/metadata/features.py says what each level means):
* single node: group.version 1 (while group.coordinator.rebalance.protocols includes "consumer"),
  transaction.version 2, share.version 1, eligible.leader.replicas.version 1, streams.version 1,
  epoch 0; no metadata.version or kraft.version (no KRaft log or quorum)
* cluster mode: the metadata image's finalized levels (FeatureLevelRecords) and the quorum's
  kraft.version, at the image's offset as the epoch, as Kafka's KRaftMetadataCache reports them
* finalized levels of 0 are not listed; v0-3 leave out supported features whose minimum is 0
  (KAFKA-17011: the 4.3.1 spec's note on SupportedFeatures). zk_migration_ready: never.
"""

from __future__ import annotations

from kcompat.server.context import RequestContext
from kcompat.server.registry import advertised_ranges, handles
from kcompat.wire.messages.api_versions import API_VERSIONS
from kcompat.wire.protocol import Request
from kcompat.wire.types.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)


def advertised(forwarded: dict[int, tuple[int, int]] | None = None) -> list[ApiVersion]:
    """The handlers' ranges; in cluster mode, the forwarded APIs' ranges replace or add to them."""
    ranges = advertised_ranges() | (forwarded or {})
    return [
        ApiVersion(api_key=key, min_version=lo, max_version=hi) for key, (lo, hi) in sorted(ranges.items())
    ]


@handles(API_VERSIONS, "0-4")
async def api_versions(ctx: RequestContext, request: Request[ApiVersionsRequest]) -> ApiVersionsResponse:
    """Every handler's range, and (v3+) the features: supported ranges, and the levels in force."""
    features = ctx.metadata.features()
    if ctx.version >= 3 and ctx.client is not None:  # client telemetry matches on the software
        body = request.body
        ctx.telemetry.client_information(
            ctx.client.connection_id, body.client_software_name, body.client_software_version
        )
    return ApiVersionsResponse(
        error_code=0,
        api_keys=advertised(ctx.forwarded_versions()),
        throttle_time_ms=0,
        supported_features=[
            SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
            for name, (lo, hi) in features.supported_for(ctx.version).items()
        ],
        finalized_features_epoch=features.epoch,
        finalized_features=[
            FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in features.finalized_levels().items()
        ],
    )
