"""Cluster mode: this process as a broker under Apache Kafka's KRaft controller quorum.

Entered when `process.roles=broker` and `controller.quorum.bootstrap.servers` are set (Kafka's
names); without them nothing here runs. Two tasks, each with its own controller connection:

* lifecycle: drives kcompat.metadata.broker_lifecycle.BrokerLifecycleManager, sending
  BrokerRegistration (key 62, v4) and BrokerHeartbeat (key 63, v1);
* metadata follower: a Raft observer. Fetch (key 1, v17) of `__cluster_metadata` (topic id
  AAAAAAAAAAAAAAAAAAAAAQ, partition 0) with ReplicaState.ReplicaId = node.id, feeding
  kcompat.metadata.loader.MetadataLoader, which applies records up to the high watermark. The
  leader is found from CurrentLeader and NodeEndpoints in the answers (KIP-853, KIP-919).

The broker is ready to be unfenced once its image holds its own registration (our incarnation).
When the leader answers a Fetch with a SnapshotId (a snapshot newer than where the observer is),
the snapshot is fetched whole with FetchSnapshot (key 59, v1) and the image starts over from it.
Admin requests go to the active controller inside Envelope (forwarding_manager.py), producer ids
come in controller blocks (producer_id_manager.py) and auto-created topics are asked of the
controller (auto_topic_creation.py); all three are built by assembly.py.
Each published image also goes to the ReplicaManager (replica_delta.py): this broker leads or
follows the partitions the image assigns it, followers fetching through replica_fetcher.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kcompat.metadata.broker_lifecycle import (
    NOT_CONTROLLER,
    BrokerLifecycleManager,
    BrokerState,
    HeartbeatResponse,
    Request,
    SendHeartbeat,
)
from kcompat.metadata.features import CLUSTER_SUPPORTED, METADATA_VERSION, refusals
from kcompat.metadata.image import MetadataImage
from kcompat.metadata.loader import MetadataLoader
from kcompat.server.cluster.controller_channel import ControllerChannel, ControllerUnavailable
from kcompat.server.cluster.peer_errors import registration_refused
from kcompat.server.log_throttle import LogThrottle
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages.broker_heartbeat import BROKER_HEARTBEAT
from kcompat.wire.messages.broker_registration import BROKER_REGISTRATION
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.fetch_snapshot import FETCH_SNAPSHOT

log = logging.getLogger("kcompat.cluster")

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
FETCH_SNAPSHOT_VERSION = 1
REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
FETCH_VERSION = 17
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 << 20
FENCED_LEADER_EPOCH = 74
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_LEADER_EPOCH = 76

UNSUPPORTED_VERSION = 35  # a registration refused for a feature level (metadata/features.py)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


# Kafka's SecurityProtocol ids, as BrokerRegistration carries them.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class KRaftBroker:
    """Registration, heartbeats and the metadata image of one cluster-mode broker."""

    def __init__(
        self,
        *,
        node_id: int,
        bootstrap: list[tuple[str, int]],
        rack: str | None = None,
        heartbeat_interval_ms: int = 2000,
        session_timeout_ms: int = 9000,
        on_image: Callable[[MetadataImage], None] | None = None,
        before_image: Callable[[MetadataImage], Awaitable[None]] | None = None,
    ) -> None:
        """Built with the broker; what is known only once it started (its cluster id, its log
        directory's id, the ports its listeners bound) is given to `start`."""
        self.node_id = node_id
        self.cluster_id = ""
        self.directory_id = uuid.UUID(int=0)
        # Several log dirs (directory_assignments.py): the online ones registered, the failed ones
        # in every heartbeat.
        self.log_dir_ids: Callable[[], list[uuid.UUID]] = lambda: [self.directory_id]
        self.offline_log_dirs: Callable[[], list[uuid.UUID]] = list
        self.listeners: list[tuple[str, str, int, str]] = []  # name, host, port, security protocol
        self.rack = rack
        self.incarnation_id = uuid.uuid4()  # a new one every process start
        self.lifecycle = BrokerLifecycleManager(
            incarnation_id=str(self.incarnation_id),
            heartbeat_interval_ms=heartbeat_interval_ms,
            session_timeout_ms=session_timeout_ms,
        )
        self.loader = MetadataLoader()
        self.on_image = on_image
        # Awaited before on_image (the fetch loop waits): work an image needs done off the event
        # loop first, such as making the logs of the partitions it assigns here.
        self.before_image = before_image
        client_id = f"kcompat-broker-{node_id}"
        self._lifecycle_channel = ControllerChannel(bootstrap, client_id=client_id)
        self._raft_channel = ControllerChannel(bootstrap, client_id=client_id + "-raft")
        self._leader_epoch = 0
        self._raft_leader: tuple[str, int] | None = None  # (host, port) of the quorum leader, once known
        self._snapshot_wanted: tuple[int, int] | None = None  # (end offset, epoch) the leader pointed at
        self._wake = asyncio.Event()
        self._want_shutdown = False
        self._tasks: list[asyncio.Task[None]] = []
        self.stopped = asyncio.Event()
        # Set once: unfenced (RUNNING) and the image says so. Only then are the client listeners
        # served, as Kafka's BrokerServer enables request processing after unfencing: a Metadata
        # answered before would name no live broker, and a client (librdkafka) would forget them all.
        self.serving = asyncio.Event()
        # Set once this incarnation's registration is accepted and the image holds it (Kafka's
        # initial catch-up): only then do images reach the replica manager and the coordinators.
        # A process restarted after kill -9 while its previous session still lives is refused
        # (DUPLICATE_BROKER_REGISTRATION) until the controller fences that session and moves its
        # leaderships; the image it reads meanwhile still names it leader, and acting on it (as
        # a coordinator completing transactions from an unreplicated tail, say) would write
        # markers and state no other replica has.
        self.caught_up = False
        self._throttle = LogThrottle(log, 10.0)
        self.bootstrap = bootstrap

    @property
    def raft_leader(self) -> tuple[str, int] | None:
        """The controller listener of the quorum's leader (the active controller), once known."""
        return self._raft_leader

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    @property
    def state(self) -> BrokerState:
        return self.lifecycle.state

    def start(
        self, cluster_id: str, directory_id: uuid.UUID, listeners: list[tuple[str, str, int, str]]
    ) -> None:
        """Register as `cluster_id` with one log directory and these listeners (name, host, port,
        security protocol), heartbeat, and follow the metadata."""
        self.cluster_id = cluster_id
        self.directory_id = directory_id
        self.listeners = listeners
        self._tasks = [
            asyncio.create_task(self._lifecycle_loop(), name="kraft-lifecycle"),
            asyncio.create_task(self._fetch_loop(), name="kraft-metadata-fetch"),
        ]

    async def shutdown(self, timeout_s: float) -> None:
        """Controlled shutdown (heartbeats with WantShutDown), then stop both loops."""
        self._want_shutdown = True
        self._wake.set()
        try:
            await asyncio.wait_for(self.stopped.wait(), timeout_s)
        except TimeoutError:
            log.warning("controlled shutdown not confirmed by the controller within %.0f s", timeout_s)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._lifecycle_channel.close()
        self._raft_channel.close()

    # --- lifecycle ---

    async def _lifecycle_loop(self) -> None:
        lm = self.lifecycle
        requests = lm.start(_now_ms())
        try:
            while lm.state != BrokerState.SHUTTING_DOWN:
                if self._want_shutdown:
                    requests += lm.begin_controlled_shutdown(_now_ms())
                    self._want_shutdown = False
                    continue
                if not requests:
                    requests = self._image_events()
                if requests:
                    requests = await self._send(requests.pop(0))
                    continue
                requests = lm.poll(_now_ms())
                if requests:
                    continue
                delay = 0.5 if lm.next_send_ms is None else max(0.0, (lm.next_send_ms - _now_ms()) / 1000)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
        finally:
            self.stopped.set()

    def _image_events(self) -> list[Request]:
        """What the latest image means for the lifecycle: unfence readiness, a lost registration."""
        lm, image, now = self.lifecycle, self.loader.image, _now_ms()
        lm.update_metadata_offset(image.offset)
        if not lm.registered or image.offset < lm.broker_epoch:
            return []
        mine = image.brokers.get(self.node_id)
        if mine is None or mine.incarnation_id != self.incarnation_id:
            log.warning(
                "the controller's metadata no longer holds this broker's registration; registering again"
            )
            return lm.registration_lost(now)
        if not lm.ready_to_unfence and lm.state in (BrokerState.RECOVERY, BrokerState.STARTING):
            return lm.set_ready_to_unfence(now)
        return []

    async def _send(self, request: Request) -> list[Request]:
        lm = self.lifecycle
        try:
            if isinstance(request, SendHeartbeat):
                body = {
                    "broker_id": self.node_id,
                    "broker_epoch": request.broker_epoch,
                    "current_metadata_offset": request.current_metadata_offset,
                    "want_fence": request.want_fence,
                    "want_shut_down": request.want_shut_down,
                    "offline_log_dirs": self.offline_log_dirs(),
                }
                r = await self._lifecycle_channel.call(BROKER_HEARTBEAT.key, HEARTBEAT_VERSION, body)
                if r.error_code == NOT_CONTROLLER:
                    self._to_active_controller()
                was = lm.state
                out = lm.on_heartbeat_response(
                    _now_ms(),
                    HeartbeatResponse(r.error_code, r.is_caught_up, r.is_fenced, r.should_shut_down),
                )
                if lm.state != was:
                    log.info("broker %d: %s -> %s", self.node_id, was.name, lm.state.name)
                    self._maybe_serve()
                return out
            r = await self._lifecycle_channel.call(
                BROKER_REGISTRATION.key,
                REGISTRATION_VERSION,
                self._registration(request.previous_broker_epoch),
            )
            if r.error_code == 0:
                log.info("broker %d registered with broker epoch %d", self.node_id, r.broker_epoch)
            elif r.error_code == NOT_CONTROLLER:
                log.info(
                    "broker %d registration: NOT_CONTROLLER from %s:%d, looking for the active controller",
                    self.node_id,
                    *self._lifecycle_channel.target,
                )
                self._to_active_controller()
            elif r.error_code == UNSUPPORTED_VERSION:
                self._refused_for_features()
            else:
                self._throttle.log(
                    logging.WARNING,
                    f"refused-{r.error_code}",
                    "broker %d registration refused: %s",
                    self.node_id,
                    registration_refused(r.error_code),
                )
            return lm.on_registration_response(_now_ms(), r.error_code, r.broker_epoch)
        except ControllerUnavailable as e:
            self._unreachable(e)
            self._lifecycle_channel.rotate()
            return lm.on_request_failed(_now_ms())

    def _refused_for_features(self) -> None:
        """UNSUPPORTED_VERSION carries no message: name the feature from the image (which the
        observer follows meanwhile), one line, every 10 s while it lasts."""
        finalized = self.loader.image.features
        found = refusals(finalized, CLUSTER_SUPPORTED) if METADATA_VERSION in finalized else []
        if found:
            why = "; ".join(f.line() for f in found)
        else:
            why = (
                "the controllers finalized a feature level this kcompat does not support "
                "(not yet in the metadata fetched here); kafka-features.sh describe lists them"
            )
        self._throttle.log(
            logging.ERROR,
            "features",
            "broker %d registration refused (UNSUPPORTED_VERSION): %s; retrying",
            self.node_id,
            why,
        )

    def _unreachable(self, e: ControllerUnavailable) -> None:
        """Controllers down or not yet up: keep trying (as Kafka does), saying so every 10 s."""
        self._throttle.log(
            logging.WARNING, "unreachable", "cannot reach the controllers (%s); still trying", e
        )

    def _to_active_controller(self) -> None:
        """The active controller is the Raft leader: go there when the observer knows it, else try the next."""
        if self._raft_leader is not None:
            self._lifecycle_channel.redirect(*self._raft_leader)
        else:
            self._lifecycle_channel.rotate()

    def _registration(self, previous_broker_epoch: int) -> dict[str, Any]:
        return {
            "broker_id": self.node_id,
            "cluster_id": self.cluster_id,
            "incarnation_id": self.incarnation_id,
            "listeners": [
                {"name": n, "host": h, "port": p, "security_protocol": SECURITY_PROTOCOL_IDS[protocol]}
                for n, h, p, protocol in self.listeners
            ],
            "features": [
                {"name": name, "min_supported_version": lo, "max_supported_version": hi}
                for name, (lo, hi) in CLUSTER_SUPPORTED.items()
            ],
            "rack": self.rack,
            "is_migrating_zk_broker": False,
            "log_dirs": self.log_dir_ids(),
            "previous_broker_epoch": previous_broker_epoch,
        }

    # --- the Raft observer ---

    def _fetch_request(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "replica_state": {"replica_id": self.node_id, "replica_epoch": -1},
            "max_wait_ms": FETCH_MAX_WAIT_MS,
            "min_bytes": 0,
            "max_bytes": FETCH_MAX_BYTES,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic_id": METADATA_TOPIC_ID,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": self._leader_epoch,
                            "fetch_offset": self.loader.next_offset,
                            "last_fetched_epoch": max(0, self.loader.last_fetched_epoch),
                            "log_start_offset": -1,
                            "partition_max_bytes": FETCH_MAX_BYTES,
                            "replica_directory_id": self.directory_id,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    async def _fetch_loop(self) -> None:
        backoff = 0.05
        while not self.stopped.is_set():
            try:
                if self._snapshot_wanted is not None:
                    progressed = await self._fetch_snapshot(*self._snapshot_wanted)
                else:
                    r = await self._raft_channel.call(
                        FETCH.key,
                        FETCH_VERSION,
                        self._fetch_request(),
                        timeout_s=FETCH_MAX_WAIT_MS / 1000 + 5,
                    )
                    progressed = await self._handle_fetch(r)
            except ControllerUnavailable as e:
                self._unreachable(e)
                self._raft_channel.rotate()
                progressed = False
            except DecodeError as e:
                log.error("metadata records from the controller do not decode: %s", e)
                progressed = False
            except Exception:
                log.exception("metadata fetch loop")
                progressed = False
            if progressed:
                backoff = 0.05
            else:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    async def _fetch_snapshot(self, end_offset: int, epoch: int) -> bool:
        """FetchSnapshot (key 59, v1) of the whole snapshot, chunk by chunk, then start the image over."""
        data = bytearray()
        while True:
            body = {
                "cluster_id": self.cluster_id,
                "replica_id": self.node_id,
                "max_bytes": FETCH_MAX_BYTES,
                "topics": [
                    {
                        "name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": self._leader_epoch,
                                "snapshot_id": {"end_offset": end_offset, "epoch": epoch},
                                "position": len(data),
                                "replica_directory_id": self.directory_id,
                            }
                        ],
                    }
                ],
            }
            r = await self._raft_channel.call(FETCH_SNAPSHOT.key, FETCH_SNAPSHOT_VERSION, body)
            p = r.topics[0].partitions[0] if r.error_code == 0 and r.topics else None
            if p is None or p.error_code != 0:
                log.info("FetchSnapshot answered with error %d", r.error_code if p is None else p.error_code)
                self._snapshot_wanted = None  # ask the leader again where to start
                return False
            if p.position != len(data):
                raise ControllerUnavailable(f"snapshot chunk at position {p.position}, expected {len(data)}")
            data += bytes(p.unaligned_records or b"")
            if len(data) >= p.size:
                break
        image = self.loader.load_snapshot(data, end_offset, epoch)
        self._snapshot_wanted = None
        log.info(
            "metadata: loaded snapshot %d-%d (%d bytes, %d topics, %d brokers)",
            end_offset,
            epoch,
            len(data),
            len(image.topics_by_id),
            len(image.brokers),
        )
        await self._published(image)
        return True

    async def _published(self, image: MetadataImage) -> None:
        lm = self.lifecycle
        if not self.caught_up and lm.registered and image.offset >= lm.broker_epoch:
            mine = image.brokers.get(self.node_id)
            self.caught_up = mine is not None and mine.incarnation_id == self.incarnation_id
        if self.caught_up and self.before_image is not None:
            await self.before_image(image)
        lm.update_metadata_offset(image.offset)
        self._wake.set()
        if self.caught_up and self.on_image is not None:
            self.on_image(image)
        self._maybe_serve()

    def _maybe_serve(self) -> None:
        me = self.image.brokers.get(self.node_id)
        ours = me is not None and me.incarnation_id == self.incarnation_id and not me.fenced
        if self.lifecycle.state == BrokerState.RUNNING and ours:
            self.serving.set()

    async def _handle_fetch(self, r: Any) -> bool:
        endpoints = {e.node_id: (e.host, e.port) for e in (r.node_endpoints or [])}
        if r.error_code != 0:
            log.info("metadata fetch answered with error %d", r.error_code)
            return False
        p = r.responses[0].partitions[0]
        leader = p.current_leader
        if leader is not None and leader.leader_epoch > self._leader_epoch:
            self._leader_epoch = leader.leader_epoch
        if leader is not None and leader.leader_id in endpoints:
            self._raft_leader = endpoints[leader.leader_id]
        if p.error_code in (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH):
            if self._raft_leader is not None:
                self._raft_channel.redirect(*self._raft_leader)
            return bool(p.error_code == FENCED_LEADER_EPOCH)  # retry at once with the epoch just learned
        if p.error_code != 0:
            log.info("metadata fetch partition error %d", p.error_code)
            return False
        if p.diverging_epoch is not None and p.diverging_epoch.end_offset >= 0:
            self.loader.truncate(p.diverging_epoch.end_offset)
            return True
        if p.snapshot_id is not None and p.snapshot_id.end_offset >= 0:
            self._snapshot_wanted = (p.snapshot_id.end_offset, p.snapshot_id.epoch)
            return True
        if p.records:
            self.loader.append(p.records)
        image = self.loader.advance(p.high_watermark)
        if image is not None:
            await self._published(image)
        return True


# --- how `kcompat serve` enters cluster mode ---
