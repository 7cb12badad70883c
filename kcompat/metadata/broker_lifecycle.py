"""BrokerLifecycleManager: a KRaft broker's registration and heartbeats, sans IO (Kafka's
core/.../server/BrokerLifecycleManager.scala, as of 4.3).

The driver (kcompat/server) owns the controller connection and the clock: it feeds events in with
the time in milliseconds and sends what comes back. One request is in flight at a time.

    STARTING --IsCaughtUp--> RECOVERY --!IsFenced--> RUNNING --begin_controlled_shutdown-->
    PENDING_CONTROLLED_SHUTDOWN --ShouldShutDown--> SHUTTING_DOWN

* The broker registers (BrokerRegistration, key 62), then heartbeats (key 63) every
  broker.heartbeat.interval.ms with its broker epoch, the metadata offset it has applied, and
  WantFence = not ready_to_unfence (the server says when its logs and metadata are loaded).
* A heartbeat answered STALE_BROKER_EPOCH, or metadata showing our registration gone or replaced
  (Kafka's BrokerRegistrationTracker), means the controller no longer knows this epoch: register
  again, keeping the state reached. A broker fenced by the controller (IsFenced after RUNNING, e.g.
  a lapsed session) keeps heartbeating; the controller unfences it once caught up.
* A failed or unanswered request is retried after an exponential backoff (100 ms doubling, capped
  at half the session timeout); NOT_CONTROLLER is retried at once (the driver finds the new leader).
* Controlled shutdown is heartbeats with WantShutDown until the controller answers ShouldShutDown.
  Asked outside RUNNING, the broker skips it and goes straight to SHUTTING_DOWN, as Kafka does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

NONE = 0
NOT_CONTROLLER = 41
STALE_BROKER_EPOCH = 77

INITIAL_BACKOFF_MS = 100
# Kafka sends the next heartbeat after 10 ms while STARTING (a broker with nothing to recover
# starts sooner) and 50 ms after the first answer in controlled shutdown.
STARTING_HEARTBEAT_MS = 10
FIRST_SHUTDOWN_HEARTBEAT_MS = 50


class BrokerState(enum.IntEnum):
    """Kafka's BrokerState values (the broker's `kafka.server:type=KafkaServer,name=BrokerState`)."""

    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


@dataclass(frozen=True)
class SendRegistration:
    """Send BrokerRegistration; the driver adds listeners, features, rack and log dirs."""

    incarnation_id: str
    previous_broker_epoch: int


@dataclass(frozen=True)
class SendHeartbeat:
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool


Request = SendRegistration | SendHeartbeat


@dataclass(frozen=True)
class HeartbeatResponse:
    error_code: int = NONE
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


# state -> (the heartbeat answer that moves it on, the state it moves to). Other states only stay.
HEARTBEAT_TRANSITIONS: dict[BrokerState, tuple[str, bool, BrokerState]] = {
    BrokerState.STARTING: ("is_caught_up", True, BrokerState.RECOVERY),
    BrokerState.RECOVERY: ("is_fenced", False, BrokerState.RUNNING),
    BrokerState.PENDING_CONTROLLED_SHUTDOWN: ("should_shut_down", True, BrokerState.SHUTTING_DOWN),
}


class BrokerLifecycleManager:
    def __init__(
        self,
        *,
        incarnation_id: str,
        heartbeat_interval_ms: int = 2000,
        session_timeout_ms: int = 9000,
        previous_broker_epoch: int = -1,
    ) -> None:
        self.incarnation_id = incarnation_id
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_backoff_ms = max(INITIAL_BACKOFF_MS, session_timeout_ms // 2)
        self.previous_broker_epoch = previous_broker_epoch
        self.state = BrokerState.NOT_RUNNING
        self.broker_epoch = -1
        self.registered = False
        self.ready_to_unfence = False
        self.fenced = True
        self.metadata_offset = -1
        self.next_send_ms: int | None = None  # None: nothing due (a request is in flight, or stopped)
        self._in_flight: Request | None = None
        self._failures = 0
        self._got_shutdown_answer = False

    # --- events from the server ---

    def start(self, now_ms: int) -> list[Request]:
        self.state = BrokerState.STARTING
        self._due(now_ms, 0)
        return self.poll(now_ms)

    def set_ready_to_unfence(self, now_ms: int) -> list[Request]:
        self.ready_to_unfence = True
        return self.poll(now_ms)

    def update_metadata_offset(self, offset: int) -> None:
        """The highest `__cluster_metadata` offset applied to the image (CurrentMetadataOffset)."""
        self.metadata_offset = max(self.metadata_offset, offset)

    def registration_lost(self, now_ms: int) -> list[Request]:
        """Metadata shows our registration removed or another incarnation's: register again."""
        if self.state in (BrokerState.NOT_RUNNING, BrokerState.SHUTTING_DOWN):
            return []
        self.registered = False
        if self._in_flight is None:
            self._due(now_ms, 0)
        return self.poll(now_ms)

    def begin_controlled_shutdown(self, now_ms: int) -> list[Request]:
        if self.state == BrokerState.RUNNING:
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
            if self._in_flight is None:
                self._due(now_ms, 0)
        elif self.state != BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            self._shut_down()
        return self.poll(now_ms)

    # --- answers from the controller ---

    def on_registration_response(self, now_ms: int, error_code: int, broker_epoch: int) -> list[Request]:
        if not isinstance(self._in_flight, SendRegistration):
            return []
        self._in_flight = None
        if self.state == BrokerState.SHUTTING_DOWN:
            return []
        if error_code != NONE:
            return self._after_failure(now_ms, immediately=error_code == NOT_CONTROLLER)
        self._failures = 0
        self.registered = True
        self.broker_epoch = broker_epoch
        self._due(now_ms, 0)  # the first heartbeat goes out at once
        return self.poll(now_ms)

    def on_heartbeat_response(self, now_ms: int, response: HeartbeatResponse) -> list[Request]:
        if not isinstance(self._in_flight, SendHeartbeat):
            return []
        self._in_flight = None
        if self.state == BrokerState.SHUTTING_DOWN:
            return []
        if response.error_code == STALE_BROKER_EPOCH:
            self.registered = False
            self._due(now_ms, 0)
            return self.poll(now_ms)
        if response.error_code != NONE:
            return self._after_failure(now_ms, immediately=response.error_code == NOT_CONTROLLER)
        self._failures = 0
        self.fenced = response.is_fenced
        delay = self.heartbeat_interval_ms
        if self.state == BrokerState.STARTING:
            delay = STARTING_HEARTBEAT_MS
        elif self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN and not self._got_shutdown_answer:
            delay = FIRST_SHUTDOWN_HEARTBEAT_MS
            self._got_shutdown_answer = True
        move = HEARTBEAT_TRANSITIONS.get(self.state)
        if move is not None and getattr(response, move[0]) == move[1]:
            self.state = move[2]
            if self.state == BrokerState.SHUTTING_DOWN:
                self._shut_down()
                return []
        self._due(now_ms, delay)
        return self.poll(now_ms)

    def on_request_failed(self, now_ms: int) -> list[Request]:
        """The request could not be sent or had no answer in time."""
        if self._in_flight is None:
            return []
        self._in_flight = None
        if self.state == BrokerState.SHUTTING_DOWN:
            return []
        return self._after_failure(now_ms, immediately=False)

    # --- timer ---

    def poll(self, now_ms: int) -> list[Request]:
        """The request due at `now_ms`, if any; the driver calls it again at `next_send_ms`."""
        if self._in_flight is not None or self.next_send_ms is None or now_ms < self.next_send_ms:
            return []
        self.next_send_ms = None
        request: Request
        if not self.registered:
            request = SendRegistration(self.incarnation_id, self.previous_broker_epoch)
        else:
            request = SendHeartbeat(
                broker_epoch=self.broker_epoch,
                current_metadata_offset=self.metadata_offset,
                want_fence=not self.ready_to_unfence,
                want_shut_down=self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN,
            )
        self._in_flight = request
        return [request]

    # --- internals ---

    def _due(self, now_ms: int, delay_ms: int) -> None:
        self.next_send_ms = now_ms + delay_ms

    def _after_failure(self, now_ms: int, *, immediately: bool) -> list[Request]:
        if immediately:
            self._due(now_ms, 0)
        else:
            self._due(now_ms, min(self.max_backoff_ms, INITIAL_BACKOFF_MS << self._failures))
            self._failures = min(self._failures + 1, 30)
        return self.poll(now_ms)

    def _shut_down(self) -> None:
        self.state = BrokerState.SHUTTING_DOWN
        self.next_send_ms = None
