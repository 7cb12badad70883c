"""InitProducerId (key 22): v0-5, for idempotent producers.

Version notes:
* v0: a fresh producer id with epoch 0 (never reused, even across restarts: producer_ids.py)
* v1: no change;  v2: flexible
* v3: producer_id/producer_epoch in the request (KIP-360): an idempotent producer that lost track
  of its sequences asks for a bump. Without a transactional id Kafka's coordinator answers it as
  any other request, with a NEW producer id and epoch 0, and so does kcompat. Both -1 means a new
  producer; exactly one of them -1 is INVALID_REQUEST.
* v4: PRODUCER_FENCED may be returned (only with transactions)
* v5: no change (KIP-890 part 1)
With a transactional_id the transaction coordinator answers (txn_service.py): a new id gets a new
producer id with epoch 0; a known one its epoch bumped (fencing the instance before it, whose open
transaction is aborted first: CONCURRENT_TRANSACTIONS until the abort is done, the client retries);
INVALID_TRANSACTION_TIMEOUT above transaction.max.timeout.ms; PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH below v4. An empty transactional_id is INVALID_REQUEST.
"""

from __future__ import annotations

from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.errors import ApiError
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.init_producer_id import INIT_PRODUCER_ID
from kcompat.wire.protocol import Request
from kcompat.wire.types.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

FENCED_CODE_VERSION = 4  # the first InitProducerId version that knows PRODUCER_FENCED


@handles(INIT_PRODUCER_ID, "0-5")
async def init_producer_id(
    ctx: RequestContext, request: Request[InitProducerIdRequest]
) -> InitProducerIdResponse:
    body = request.body
    ids = ctx.metadata.producer_ids
    assert ids is not None

    def answer(error: ErrorCode, pid: int = -1, epoch: int = -1) -> InitProducerIdResponse:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=int(error), producer_id=pid, producer_epoch=epoch
        )

    if (body.producer_id == -1) != (body.producer_epoch == -1):
        return answer(ErrorCode.INVALID_REQUEST)
    txn_id = body.transactional_id
    if (denied := access.init_producer_id_error(ctx, txn_id)) is not None:
        return answer(denied)
    if txn_id is not None:
        if not txn_id:
            return answer(ErrorCode.INVALID_REQUEST)
        svc = ctx.transactions
        r = await svc.run(
            lambda now: svc.coordinator.init_producer_id(
                txn_id,
                body.transaction_timeout_ms,
                now,
                svc.new_producer_id,
                body.producer_id,
                body.producer_epoch,
            ),
            txn_id,
        )
        if r.error:
            fenced = r.error == ErrorCode.PRODUCER_FENCED and request.api_version < FENCED_CODE_VERSION
            return answer(ErrorCode.INVALID_PRODUCER_EPOCH if fenced else r.error)
        return answer(ErrorCode.NONE, r.producer_id, r.producer_epoch)
    try:
        pid = ids.next_id()
    except ApiError as e:  # cluster mode before the controller's first block: COORDINATOR_LOAD_IN_PROGRESS
        return answer(e.error)
    return answer(ErrorCode.NONE, pid, 0)
