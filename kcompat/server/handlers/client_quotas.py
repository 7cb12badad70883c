"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0-1 each (v1 flexible).

Entities: user, client-id (alone or together, a null name being the default) and ip; keys
producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate (and
connection_creation_rate for ip), validated as Kafka's ClientQuotaControlManager validates them
(kcompat.quotas.entities): an unknown entity type or key, a value <= 0, a fractional byte rate
-> INVALID_REQUEST for that entity, the others applied. Describe needs DESCRIBE_CONFIGS on the
cluster, Alter ALTER_CONFIGS (CLUSTER_AUTHORIZATION_FAILED otherwise).
A single node saves the table (kcompat.storage.quota_store) before it answers; in cluster mode
AlterClientQuotas is forwarded to the controller and Describe reads the metadata image's quotas.
"""

from __future__ import annotations

from kcompat.quotas.entities import DescribeFilter, Entity, QuotaError, validate_alteration
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_client_quotas import ALTER_CLIENT_QUOTAS
from kcompat.wire.messages.describe_client_quotas import DESCRIBE_CLIENT_QUOTAS
from kcompat.wire.protocol import Request
from kcompat.wire.types import alter_client_quotas as acq
from kcompat.wire.types import describe_client_quotas as dcq


@handles(DESCRIBE_CLIENT_QUOTAS, "0-1")
async def describe_client_quotas(
    ctx: RequestContext, request: Request[dcq.DescribeClientQuotasRequest]
) -> dcq.DescribeClientQuotasResponse:
    if (denied := access.cluster_error(ctx, access.DESCRIBE_CONFIGS)) is not None:
        return dcq.DescribeClientQuotasResponse(error_code=int(denied), error_message=None, entries=None)
    body = request.body
    try:
        f = DescribeFilter.of(((c.entity_type, c.match_type, c.match) for c in body.components), body.strict)
    except QuotaError as e:
        return dcq.DescribeClientQuotasResponse(
            error_code=int(ErrorCode[e.code]), error_message=e.message, entries=None
        )
    entries = [
        dcq.EntryData(
            entity=[dcq.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[dcq.ValueData(key=k, value=v) for k, v in sorted(values.items())],
        )
        for entity, values in ctx.quotas.table.items()
        if f.matches(entity)
    ]
    return dcq.DescribeClientQuotasResponse(error_code=0, error_message=None, entries=entries)


@handles(ALTER_CLIENT_QUOTAS, "0-1")
async def alter_client_quotas(
    ctx: RequestContext, request: Request[acq.AlterClientQuotasRequest]
) -> acq.AlterClientQuotasResponse:
    body = request.body
    denied = access.cluster_error(ctx, access.ALTER_CONFIGS)
    results: list[acq.AlterClientQuotasResponseEntryData] = []
    changes: dict[Entity, dict[str, float | None]] = {}
    for entry in body.entries:
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
        wire_entity = [acq.EntityData(entity_type=t, entity_name=n) for t, n in pairs]
        if denied is not None:
            results.append(
                acq.AlterClientQuotasResponseEntryData(
                    error_code=int(denied), error_message=None, entity=wire_entity
                )
            )
            continue
        code: int
        message: str | None
        try:
            entity, ops = validate_alteration(
                pairs, [(o.key, None if o.remove else o.value) for o in entry.ops]
            )
            if entity in changes:
                raise QuotaError("INVALID_REQUEST", "Ignoring duplicate entity")
        except QuotaError as e:
            code, message = int(ErrorCode[e.code]), e.message
        else:
            changes[entity] = ops
            code, message = 0, None
        results.append(
            acq.AlterClientQuotasResponseEntryData(error_code=code, error_message=message, entity=wire_entity)
        )
    if changes and not body.validate_only:
        ctx.quotas.alter(changes)
    return acq.AlterClientQuotasResponse(entries=results)
