"""BrokerLifecycleManager: tables of events -> (state, requests to send, next send time)."""

from __future__ import annotations

from typing import Any

import pytest

from kcompat.metadata.broker_lifecycle import (
    NOT_CONTROLLER,
    STALE_BROKER_EPOCH,
    BrokerLifecycleManager,
    BrokerState,
    HeartbeatResponse,
    SendHeartbeat,
    SendRegistration,
)

S = BrokerState
REG = SendRegistration("inc-1", -1)


def hb(epoch: int = 10, offset: int = -1, fence: bool = True, shut: bool = False) -> SendHeartbeat:
    return SendHeartbeat(
        broker_epoch=epoch, current_metadata_offset=offset, want_fence=fence, want_shut_down=shut
    )


def ok(caught_up: bool = False, fenced: bool = True, shut: bool = False) -> HeartbeatResponse:
    return HeartbeatResponse(0, is_caught_up=caught_up, is_fenced=fenced, should_shut_down=shut)


def run(m: BrokerLifecycleManager, event: tuple[Any, ...]) -> list[Any]:
    name, now, *args = event
    if name == "start":
        return m.start(now)
    if name == "reg":
        return m.on_registration_response(now, *args)
    if name == "hb":
        return m.on_heartbeat_response(now, args[0])
    if name == "fail":
        return m.on_request_failed(now)
    if name == "poll":
        return m.poll(now)
    if name == "ready":
        return m.set_ready_to_unfence(now)
    if name == "offset":
        m.update_metadata_offset(args[0])
        return []
    if name == "shutdown":
        return m.begin_controlled_shutdown(now)
    if name == "lost":
        return m.registration_lost(now)
    raise AssertionError(name)


# Each step: (event, state after, requests sent, next_send_ms after).
SCENARIOS: dict[str, list[tuple[tuple[Any, ...], BrokerState, list[Any], int | None]]] = {
    "start, catch up, unfence, run": [
        (("start", 0), S.STARTING, [REG], None),
        (("reg", 5, 0, 10), S.STARTING, [hb()], None),
        (("hb", 7, ok()), S.STARTING, [], 17),  # not caught up yet: again after 10 ms
        (("offset", 8, 42), S.STARTING, [], 17),
        (("poll", 16), S.STARTING, [], 17),
        (("poll", 17), S.STARTING, [hb(offset=42)], None),
        (("hb", 20, ok(caught_up=True)), S.RECOVERY, [], 30),  # Kafka: 10 ms here too
        (("poll", 30), S.RECOVERY, [hb(offset=42)], None),
        (("hb", 31, ok(caught_up=True)), S.RECOVERY, [], 2031),
        (("ready", 40), S.RECOVERY, [], 2031),
        (("poll", 2031), S.RECOVERY, [hb(offset=42, fence=False)], None),
        (("hb", 2032, ok(caught_up=True, fenced=False)), S.RUNNING, [], 4032),
        (("poll", 4032), S.RUNNING, [hb(offset=42, fence=False)], None),
        (("hb", 4033, ok(caught_up=True, fenced=False)), S.RUNNING, [], 6033),
    ],
    "a fenced broker (WantFence) stays in RECOVERY": [
        (("start", 0), S.STARTING, [REG], None),
        (("reg", 1, 0, 10), S.STARTING, [hb()], None),
        (("hb", 2, ok(caught_up=True)), S.RECOVERY, [], 12),
        (("poll", 12), S.RECOVERY, [hb()], None),
        (("hb", 13, ok(caught_up=True, fenced=True)), S.RECOVERY, [], 2013),
    ],
    "registration errors back off exponentially; NOT_CONTROLLER retries at once": [
        (("start", 0), S.STARTING, [REG], None),
        (("reg", 1, 104, -1), S.STARTING, [], 101),  # INCONSISTENT_CLUSTER_ID
        (("poll", 101), S.STARTING, [REG], None),
        (("fail", 200), S.STARTING, [], 400),
        (("poll", 400), S.STARTING, [REG], None),
        (("reg", 401, NOT_CONTROLLER, -1), S.STARTING, [REG], None),
        (("reg", 402, 0, 7), S.STARTING, [hb(epoch=7)], None),
    ],
    "STALE_BROKER_EPOCH: register again, keep the state, heartbeat with the new epoch": [
        (("start", 0), S.STARTING, [REG], None),
        (("reg", 1, 0, 10), S.STARTING, [hb()], None),
        (("hb", 2, ok(caught_up=True)), S.RECOVERY, [], 12),
        (("ready", 3), S.RECOVERY, [], 12),
        (("poll", 12), S.RECOVERY, [hb(fence=False)], None),
        (("hb", 2003, HeartbeatResponse(STALE_BROKER_EPOCH)), S.RECOVERY, [REG], None),
        (("reg", 2004, 0, 55), S.RECOVERY, [hb(epoch=55, fence=False)], None),
        (("hb", 2005, ok(caught_up=True, fenced=False)), S.RUNNING, [], 4005),
    ],
    "registration lost in metadata while RUNNING: register again": [
        (("start", 0), S.STARTING, [REG], None),
        (("reg", 1, 0, 10), S.STARTING, [hb()], None),
        (("hb", 2, ok(caught_up=True)), S.RECOVERY, [], 12),
        (("ready", 3), S.RECOVERY, [], 12),
        (("poll", 12), S.RECOVERY, [hb(fence=False)], None),
        (("hb", 2003, ok(caught_up=True, fenced=False)), S.RUNNING, [], 4003),
        (("lost", 2500), S.RUNNING, [REG], None),
        (("reg", 2501, 0, 60), S.RUNNING, [hb(epoch=60, fence=False)], None),
    ],
    "controlled shutdown: WantShutDown until ShouldShutDown": [
        (("start", 0), S.STARTING, [REG], None),
        (("reg", 1, 0, 10), S.STARTING, [hb()], None),
        (("hb", 2, ok(caught_up=True)), S.RECOVERY, [], 12),
        (("ready", 3), S.RECOVERY, [], 12),
        (("poll", 12), S.RECOVERY, [hb(fence=False)], None),
        (("hb", 2003, ok(caught_up=True, fenced=False)), S.RUNNING, [], 4003),
        (("shutdown", 2500), S.PENDING_CONTROLLED_SHUTDOWN, [hb(fence=False, shut=True)], None),
        (("hb", 2501, ok(caught_up=True, fenced=False)), S.PENDING_CONTROLLED_SHUTDOWN, [], 2551),
        (("poll", 2551), S.PENDING_CONTROLLED_SHUTDOWN, [hb(fence=False, shut=True)], None),
        (("hb", 2552, ok(caught_up=True, fenced=True)), S.PENDING_CONTROLLED_SHUTDOWN, [], 4552),
        (("poll", 4552), S.PENDING_CONTROLLED_SHUTDOWN, [hb(fence=False, shut=True)], None),
        (("hb", 4553, ok(caught_up=True, fenced=True, shut=True)), S.SHUTTING_DOWN, [], None),
        (("poll", 9999), S.SHUTTING_DOWN, [], None),
    ],
    "shutdown before RUNNING skips controlled shutdown": [
        (("start", 0), S.STARTING, [REG], None),
        (("shutdown", 1), S.SHUTTING_DOWN, [], None),
        (("reg", 2, 0, 10), S.SHUTTING_DOWN, [], None),
    ],
    "a heartbeat error backs off; answers to nothing in flight are ignored": [
        (("start", 0), S.STARTING, [REG], None),
        (("reg", 1, 0, 10), S.STARTING, [hb()], None),
        (("hb", 2, HeartbeatResponse(15)), S.STARTING, [], 102),  # COORDINATOR_NOT_AVAILABLE-like
        (("hb", 3, ok(caught_up=True)), S.STARTING, [], 102),
        (("reg", 4, 0, 99), S.STARTING, [], 102),
        (("poll", 102), S.STARTING, [hb()], None),
        (("hb", 103, HeartbeatResponse(NOT_CONTROLLER)), S.STARTING, [hb()], None),
    ],
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_lifecycle(name: str) -> None:
    m = BrokerLifecycleManager(incarnation_id="inc-1", heartbeat_interval_ms=2000, session_timeout_ms=9000)
    assert m.state == S.NOT_RUNNING
    for step, (event, state, sent, next_send) in enumerate(SCENARIOS[name]):
        got = run(m, event)
        assert (m.state, got, m.next_send_ms) == (state, sent, next_send), f"step {step}: {event}"


def test_backoff_is_capped_at_half_the_session_timeout() -> None:
    m = BrokerLifecycleManager(incarnation_id="i", session_timeout_ms=1000)
    m.start(0)
    delays = []
    now = 0
    for _ in range(6):
        m.on_request_failed(now)
        assert m.next_send_ms is not None
        delays.append(m.next_send_ms - now)
        now = m.next_send_ms
        assert m.poll(now) == [SendRegistration("i", -1)]
    assert delays == [100, 200, 400, 500, 500, 500]
