"""Fetch (key 1): v4-12.

Version notes:
* v4: isolation_level, last_stable_offset, aborted_transactions (LSO = high watermark: no
  transactions are ever open, so read_committed and read_uncommitted read the same; aborted
  transactions are always empty)
* v5: log_start_offset
* v6: no change
* v7: fetch sessions (KIP-227). Sessionless: every answer has session_id 0, which tells clients to
  keep sending full fetches; a non-zero session id gets FETCH_SESSION_ID_NOT_FOUND, a session epoch
  other than 0 / -1 without a session gets INVALID_FETCH_SESSION_EPOCH, forgotten topics are moot
* v8: no change
* v9: current_leader_epoch (older: FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH)
* v10: no change (zstd)
* v11: rack_id accepted; preferred_read_replica always -1
* v12: flexible; last_fetched_epoch accepted (one replica, nothing diverges); diverging_epoch,
  current_leader and snapshot_id tagged fields not sent
Not advertised: v0-3 (magic 0/1 formats, which Kafka 4 dropped too), v13+ (topic ids instead of
names).

Reading: records go out as the log's file slices (whole batches), sent with sendfile by the
transport. Kafka's limits (KIP-74): the response's max_bytes (capped by fetch.max.bytes) and each
partition's partition_max_bytes bound the data, but the first partition that has data returns at
least its first whole batch even when it is larger. Every requested partition appears once, in
request order, with its own error code.

Long polling: with less than min_bytes available and max_wait_ms > 0, the fetch parks on its
partitions (delayed_fetch.py) until an append wakes it or the wait ends, then reads again. Errors
answer at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kcompat.server.broker import RequestContext
from kcompat.server.epoch_fencing import leader_epoch_error
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.protocol import Request

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@handles(FETCH, "4-12")
async def fetch(ctx: RequestContext, request: Request) -> Any:
    body = request.body
    if body.session_id != INVALID_SESSION_ID:
        return _session_error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if body.session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        return _session_error(ErrorCode.INVALID_FETCH_SESSION_EPOCH)

    # Every requested partition once, in request order (a repeated one keeps its first position).
    wanted: dict[tuple[str, int], Any] = {}
    for ft in body.topics:
        for fp in ft.partitions:
            wanted.setdefault((ft.topic, fp.partition), fp)

    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(body.max_wait_ms, 0) / 1000
    max_bytes = min(body.max_bytes, ctx.broker.fetch_max_bytes)
    while True:
        results, total, errors = _read_all(ctx, wanted, max_bytes)
        remaining = deadline - loop.time()
        waiters = ctx.broker.fetch_waiters
        if total >= body.min_bytes or errors or remaining <= 0 or not wanted or waiters.closed:
            break
        await waiters.wait(wanted, remaining)
        if waiters.closed:
            break  # shutting down: answer with what was read

    # Kafka groups consecutive partitions of a topic; a topic interleaved with another repeats.
    topics: list[dict[str, Any]] = []
    for (topic, _), part in zip(wanted, results, strict=True):
        if not topics or topics[-1]["topic"] != topic:
            topics.append({"topic": topic, "partitions": []})
        topics[-1]["partitions"].append(part)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": INVALID_SESSION_ID, "responses": topics}


def _session_error(error: ErrorCode) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(error), "session_id": INVALID_SESSION_ID, "responses": []}


def _read_all(ctx: RequestContext, wanted: dict[tuple[str, int], Any], max_bytes: int) -> tuple[list[dict[str, Any]], int, bool]:
    broker = ctx.broker
    results = []
    total = 0
    errors = False
    min_one = True
    for (topic, partition), fp in wanted.items():
        out: dict[str, Any] = {
            "partition_index": partition,
            "error_code": 0,
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": [],
            "preferred_read_replica": -1,
            "records": b"",
        }
        results.append(out)
        t = broker.topic(topic)
        if t is None or not 0 <= partition < t.partitions:
            out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            errors = True
            continue
        if (fenced := leader_epoch_error(fp.current_leader_epoch, t.leader_epoch)) is not None:
            out["error_code"] = int(fenced)
            errors = True
            continue
        plog = broker.partition_log(topic, partition)
        start, hwm = plog.log_start_offset, plog.high_watermark
        out.update(high_watermark=hwm, last_stable_offset=hwm, log_start_offset=start)
        if not start <= fp.fetch_offset <= hwm:
            out["error_code"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
            errors = True
            continue
        limit = min(fp.partition_max_bytes, max_bytes - total)
        if fp.fetch_offset == hwm or (limit <= 0 and not min_one):
            continue
        data = plog.read(fp.fetch_offset, max(limit, 0), min_one_batch=min_one)
        n = len(data)
        if n:
            out["records"] = data
            total += n
            min_one = False
    return results, total, errors
