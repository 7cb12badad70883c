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
Not implemented: transactions. A transactional_id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, an
error every client treats as fatal and reports at once (a retriable coordinator error would make the
producer hang until its timeout); kcompat advertises no transaction APIs.
"""

from __future__ import annotations

from kcompat.server.broker import ApiError, RequestContext
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.init_producer_id import INIT_PRODUCER_ID
from kcompat.wire.protocol import Request
from kcompat.wire.types.init_producer_id import InitProducerIdRequest, InitProducerIdResponse


@handles(INIT_PRODUCER_ID, "0-5")
async def init_producer_id(ctx: RequestContext, request: Request[InitProducerIdRequest]) -> InitProducerIdResponse:
    body = request.body
    ids = ctx.metadata.producer_ids
    assert ids is not None

    def answer(error: ErrorCode, pid: int = -1, epoch: int = -1) -> InitProducerIdResponse:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=int(error), producer_id=pid, producer_epoch=epoch)

    if body.transactional_id is not None:
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if (body.producer_id == -1) != (body.producer_epoch == -1):
        return answer(ErrorCode.INVALID_REQUEST)
    try:
        return answer(ErrorCode.NONE, ids.next_id(), 0)
    except ApiError as e:  # cluster mode without a producer-id block from the controller
        return answer(e.error)
