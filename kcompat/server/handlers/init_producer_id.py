"""InitProducerId (key 22): v0-5, for idempotent producers.

Version notes:
* v0: a fresh producer id with epoch 0 (never reused, even across restarts: producer_ids.py)
* v1: no change;  v2: flexible
* v3: producer_id/producer_epoch in the request (KIP-360): an idempotent producer that lost track
  of its sequences asks for a bump; it gets the same id with epoch + 1 (a fresh id once the epoch
  would pass 32766). Both -1 means a new producer; only one of them set is INVALID_REQUEST.
* v4: PRODUCER_FENCED may be returned (only with transactions)
* v5: no change (KIP-890 part 1)
Not implemented: transactions. A transactional_id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, an
error every client treats as fatal and reports at once (a retriable coordinator error would make the
producer hang until its timeout); kcompat advertises no transaction APIs.
"""

from __future__ import annotations

from typing import Any

from kcompat.server.broker import RequestContext
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.init_producer_id import INIT_PRODUCER_ID
from kcompat.wire.protocol import Request

MAX_EPOCH = 32766  # Short.MAX_VALUE - 1: Kafka keeps the last value for fencing markers


@handles(INIT_PRODUCER_ID, "0-5")
async def init_producer_id(ctx: RequestContext, request: Request) -> Any:
    body = request.body
    ids = ctx.broker.producer_ids
    assert ids is not None

    def answer(error: ErrorCode, pid: int = -1, epoch: int = -1) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": int(error), "producer_id": pid, "producer_epoch": epoch}

    if body.transactional_id is not None:
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    pid, epoch = body.producer_id, body.producer_epoch
    if (pid < 0) != (epoch < 0):
        return answer(ErrorCode.INVALID_REQUEST)
    if pid >= 0 and ids.issued(pid) and epoch < MAX_EPOCH:
        return answer(ErrorCode.NONE, pid, epoch + 1)
    return answer(ErrorCode.NONE, ids.next_id(), 0)
