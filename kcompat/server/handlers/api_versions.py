"""ApiVersions (key 18): v0-4, answered from the handler table.

Version notes:
* v1: throttle_time_ms
* v2: no change
* v3: flexible; client_software_name/version in the request (accepted as sent: Kafka's strict
  check makes Java disconnect on INVALID_REQUEST, so we never fail it); tagged features fields
* v4: no change (lets clients know the broker answers an unknown version with its own range)

The response header is always v0 (the codec knows). Versions above 4 never reach this handler:
Broker.handle answers them with a v0 body, UNSUPPORTED_VERSION and our ApiVersions range.

Features (v3+), only those whose behaviour kcompat has, as `kafka-features describe` shows them:
* group.version: supported 0-1; finalized 1 (KIP-848 consumer groups) while
  group.coordinator.rebalance.protocols includes "consumer", else not finalized
* transaction.version: supported 0-2; finalized 2 (transactions v2, KIP-890 part 2: Java 4.x
  producers then bump the epoch on every EndTxn and add partitions through Produce) on a single
  node; not finalized in cluster mode (transactions are single-node there)
Left out on purpose: metadata.version and kraft.version (no KRaft metadata log
or quorum: their levels name __cluster_metadata record formats and quorum features kcompat does
not have; Kafka 4.3.1 single-node reports metadata.version 3.3-IV3..4.3-IV0), share.version,
streams.version and eligible.leader.replicas.version (not implemented). zk_migration_ready: never.
"""

from __future__ import annotations

from kcompat.server.context import RequestContext
from kcompat.server.registry import HANDLERS, handles
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
    ranges = {key: (reg.advertised_min, reg.max_version) for key, reg in HANDLERS.items()} | (forwarded or {})
    return [
        ApiVersion(api_key=key, min_version=lo, max_version=hi) for key, (lo, hi) in sorted(ranges.items())
    ]


GROUP_VERSION = "group.version"
GROUP_VERSION_MAX = 1  # 1: the KIP-848 consumer group protocol
TRANSACTION_VERSION = "transaction.version"
TRANSACTION_VERSION_MAX = 2  # 2: transactions v2 (KIP-890 part 2)
FEATURES_EPOCH = 0  # constant: the finalized levels follow the configuration, fixed while running


@handles(API_VERSIONS, "0-4")
async def api_versions(ctx: RequestContext, request: Request[ApiVersionsRequest]) -> ApiVersionsResponse:
    """Every handler's range, and (v3+) the features: supported ranges, and the levels in force."""
    finalized = []
    if "consumer" in ctx.config.get("group.coordinator.rebalance.protocols"):
        finalized.append(
            FinalizedFeatureKey(
                name=GROUP_VERSION, max_version_level=GROUP_VERSION_MAX, min_version_level=GROUP_VERSION_MAX
            )
        )
    tv = ctx.transactions.transaction_version
    if tv:
        finalized.append(
            FinalizedFeatureKey(name=TRANSACTION_VERSION, max_version_level=tv, min_version_level=tv)
        )
    return ApiVersionsResponse(
        error_code=0,
        api_keys=advertised(ctx.forwarded_versions()),
        throttle_time_ms=0,
        supported_features=[
            SupportedFeatureKey(name=GROUP_VERSION, min_version=0, max_version=GROUP_VERSION_MAX),
            SupportedFeatureKey(name=TRANSACTION_VERSION, min_version=0, max_version=TRANSACTION_VERSION_MAX),
        ],
        finalized_features_epoch=FEATURES_EPOCH,
        finalized_features=finalized,
    )
