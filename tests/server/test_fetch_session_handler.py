"""The follower's side of fetch sessions (KIP-227) against the leader's own session cache
(fetch_session.py): both sans I/O, so every request and answer is checked as it passes."""

from __future__ import annotations

import random
import uuid
from typing import Any

from kcompat.server.cluster.replication.fetch_session_handler import (
    FetchRequestData,
    FetchSessionHandler,
    PartitionFetch,
)
from kcompat.server.fetch_session import FetchManager, FetchSessionCache
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.types.fetch import PartitionData

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
VERSION = 17


def pf(offset: int, epoch: int = 5) -> PartitionFetch:
    return PartitionFetch(epoch, offset, epoch, 0, 1 << 20)


class Leader:
    """The leader's FetchManager with a partition's log end and high watermark per key."""

    def __init__(self) -> None:
        self.manager = FetchManager(FetchSessionCache(10, rng=random.Random(3)))
        self.hw: dict[tuple[uuid.UUID, int], int] = {}
        self.fetch_offsets: dict[tuple[uuid.UUID, int], int] = {}  # as the leader last read them

    def serve(self, req: FetchRequestData) -> tuple[int, int, list[tuple[uuid.UUID, int]]]:
        fetch_data: dict[Any, Any] = {k: v for k, v in req.to_send.items()}
        ctx = self.manager.new_context(VERSION, req.session_id, req.session_epoch, True, fetch_data,
                                       list(req.to_forget), 0)  # fmt: skip
        results = []
        for key, params in ctx.partitions:
            self.fetch_offsets[key] = params.fetch_offset
            hw = self.hw.get(key, 0)
            records = b"x" if params.fetch_offset < hw else b""
            results.append((key, PartitionData(high_watermark=hw, log_start_offset=0, records=records)))
        error, session_id, sent = ctx.respond(results, 0)
        return error, session_id, [k for k, _ in sent]


def exchange(h: FetchSessionHandler, leader: Leader, wanted: dict[Any, PartitionFetch]) -> tuple[FetchRequestData, list[Any], bool]:  # fmt: skip
    req = h.build(wanted)
    error, session_id, answered = leader.serve(req)
    return req, answered, h.handle_response(req, error, session_id, answered)


def test_full_fetch_first_then_only_changed_partitions_then_forgotten() -> None:
    h, leader = FetchSessionHandler(), Leader()
    a, b, c = (T1, 0), (T1, 1), (T2, 0)
    req, answered, ok = exchange(h, leader, {a: pf(0), b: pf(0)})
    assert ok and req.full and (req.session_id, req.session_epoch) == (0, 0) and set(req.to_send) == {a, b}
    assert h.session_id != 0 and h.epoch == 1
    sid = h.session_id

    # Nothing changed: an incremental request naming no partition; the leader still reads both.
    leader.fetch_offsets.clear()
    req, answered, ok = exchange(h, leader, {a: pf(0), b: pf(0)})
    assert (
        ok and (req.session_id, req.session_epoch) == (sid, 1) and req.to_send == {} and req.to_forget == []
    )
    assert leader.fetch_offsets == {a: 0, b: 0} and answered == []

    # New records on `a` at the leader: only `a` is answered; the follower's next fetch sends only `a`.
    leader.hw[a] = 3
    req, answered, ok = exchange(h, leader, {a: pf(0), b: pf(0)})
    assert ok and answered == [a] and h.epoch == 3
    req, answered, ok = exchange(h, leader, {a: pf(3), b: pf(0)})
    assert ok and set(req.to_send) == {a} and req.to_send[a].fetch_offset == 3
    assert leader.fetch_offsets == {a: 3, b: 0}

    # `b` leaves (leadership moved), `c` joins: b forgotten, c sent.
    req, answered, ok = exchange(h, leader, {a: pf(3), c: pf(7)})
    assert ok and set(req.to_send) == {c} and req.to_forget == [b]
    assert set(leader.fetch_offsets) >= {a, c} and h.session_id == sid and set(h.session) == {a, c}

    # A new leader epoch is a change too.
    req, _, ok = exchange(h, leader, {a: pf(3, epoch=6), c: pf(7)})
    assert ok and set(req.to_send) == {a} and req.to_send[a].current_leader_epoch == 6


def test_leader_restarted_session_not_found_starts_over() -> None:
    h, leader = FetchSessionHandler(), Leader()
    a = (T1, 0)
    exchange(h, leader, {a: pf(0)})
    assert h.session_id != 0
    leader = Leader()  # a restarted leader knows no session
    req, answered, ok = exchange(h, leader, {a: pf(0)})
    assert not ok and req.session_epoch == 1 and answered == []
    assert (h.session_id, h.epoch, h.session) == (0, 0, {})
    req, _, ok = exchange(h, leader, {a: pf(0)})
    assert ok and req.full and req.session_id == 0 and h.session_id != 0


def test_other_errors_close_and_reopen_the_session() -> None:
    h, leader = FetchSessionHandler(), Leader()
    a = (T1, 0)
    exchange(h, leader, {a: pf(0)})
    sid = h.session_id
    req = h.build({a: pf(0)})
    assert not h.handle_response(req, int(ErrorCode.INVALID_FETCH_SESSION_EPOCH), sid, [])
    assert (h.session_id, h.epoch) == (sid, 0)
    req, _, ok = exchange(h, leader, {a: pf(0)})  # full, closing `sid` on the leader
    assert ok and req.full and req.session_id == sid and set(req.to_send) == {a}
    assert h.session_id not in (0, sid) and h.epoch == 1

    h.handle_error()  # connection lost: the next request is full again
    req = h.build({a: pf(0)})
    assert req.full and set(req.to_send) == {a}


def test_answer_outside_the_session_is_not_used() -> None:
    h, leader = FetchSessionHandler(), Leader()
    a = (T1, 0)
    exchange(h, leader, {a: pf(0)})
    sid = h.session_id
    req = h.build({a: pf(0)})
    assert not h.handle_response(req, 0, sid, [(T2, 9)])
    assert (h.session_id, h.epoch) == (sid, 0)


def test_no_slot_or_closed_session_stays_sessionless() -> None:
    h = FetchSessionHandler()
    a = (T1, 0)
    req = h.build({a: pf(0)})
    assert h.handle_response(req, 0, 0, [a])  # the leader had no slot: id 0
    assert (h.session_id, h.epoch) == (0, 0) and h.build({a: pf(0)}).full
    req = h.build({a: pf(0)})
    assert h.handle_response(req, 0, 77, [a]) and (h.session_id, h.epoch) == (77, 1)
    req = h.build({})
    assert req.to_forget == [a] and req.session_epoch == 1
    assert h.handle_response(req, 0, 0, [])  # the leader closed the emptied session
    assert (h.session_id, h.epoch, h.session) == (0, 0, {})
