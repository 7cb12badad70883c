"""The request dispatcher (Kafka's RequestHandler/KafkaApis split): decode, route, encode.

    frame --decode--> Request --registration(api_key)--> handler(ctx, request) --> body
          --encode_response--> [chunks]   (bytes, and the log's file slices left in place for sendfile)

What Kafka does with a request it cannot serve, this does too:
  * ApiVersions of a version it does not know: a v0 body with UNSUPPORTED_VERSION and the
    ApiVersions range, so that the client retries with a version both speak;
  * any other API key or version that is not advertised, or a frame that does not decode: the
    connection is closed (CloseConnection), as Kafka's SocketServer does on an invalid request;
  * a handler that fails unexpectedly: logged with its traceback, and the connection is closed.
A handler's Deferred answer (registry.py) comes back as a future of the chunks, for the connection
to write in its turn.
(Produce with acks=0 that failed closes the connection too: produce.py raises CloseConnection.)

The dispatcher knows no broker state: it is given a factory of the RequestContext handlers see.
Security plugs in here: SASL is settled before a connection's requests reach `handle`, and an
Authorizer can be asked per request before the handler runs.
With fault rules set (kcompat/faults, fault_hook.py), the hook is asked before the request is
routed and before its answer goes out; while a capture runs (kcompat/capture, capture_hook.py)
each request and the answer its client got are offered to it. With neither, two attribute tests
per request (benchmarks/dispatch_seam.py measures them).
A `request_percentage` quota (kcompat.server.quotas) is charged here with the time a request's
handler took up to its answer or its Deferred (Kafka's request handler thread time; a parked wait
is not counted, as Kafka leaves purgatory out); without one, one attribute test per request.
In cluster mode the Forwarder given (kcompat.server.cluster.forwarding_manager) names APIs that go to
the active controller inside an Envelope, before any local handler (KafkaApis.maybeForwardToController);
a single node's (NO_FORWARDING) names none.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import pkgutil
from collections.abc import Awaitable, Callable
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol

from kcompat.server import handlers as _handlers_pkg
from kcompat.server.auth.delegation_tokens import TOKEN_WRITE_KEYS, allow_token_requests
from kcompat.server.broker_stats import BrokerStats
from kcompat.server.quotas.client_quota_manager import QuotaManagers
from kcompat.server.registry import HANDLERS, NO_RESPONSE, Deferred, Registration, registration
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.produce_path import PRODUCE_KEY, decode_produce, encode_produce_answer
from kcompat.wire.protocol import (
    API_VERSIONS_KEY,
    Chunk,
    Request,
    UnsupportedRequest,
    decode_request,
    encode_response,
    peek_header,
)
from kcompat.wire.types.api_versions import ApiVersion, ApiVersionsResponse

if TYPE_CHECKING:  # the hooks are built by the broker on first use (set_faults, set_capture)
    from kcompat.server.capture_hook import CaptureHook
    from kcompat.server.fault_hook import FaultHook

log = logging.getLogger("kcompat.server")

# Kafka's clusterAction APIs a broker may get (ControlledShutdown, WriteTxnMarkers, Envelope):
# inter-broker work, never charged to a client's request_percentage.
_QUOTA_EXEMPT = frozenset({7, 27, 58})


class CloseConnection(Exception):
    """Kafka would close this connection rather than answer (the reason is logged once)."""


def load_handlers() -> None:
    """Import every module of kcompat.server.handlers, each of which registers its APIs.

    A broker does not: it imports each on its API's first request (registry.registration). This is
    for tools/gen_handler_index.py, which lists what they register, and for tests.
    """
    for mod in pkgutil.iter_modules(_handlers_pkg.__path__):
        importlib.import_module(f"{_handlers_pkg.__name__}.{mod.name}")


class Forwarder(Protocol):
    """Where cluster mode sends the requests the controller answers (versions: what to advertise)."""

    def versions(self) -> dict[int, tuple[int, int]]: ...
    async def forward(
        self, frame: bytes, request: Request, client_host: str, principal: str = ...
    ) -> list[Chunk]: ...


class _NoForwarding:
    """A single node: every API is answered here."""

    _NONE: dict[int, tuple[int, int]] = {}

    def versions(self) -> dict[int, tuple[int, int]]:
        return self._NONE

    async def forward(
        self, frame: bytes, request: Request, client_host: str, principal: str = ""
    ) -> list[Chunk]:
        raise AssertionError("a single node forwards nothing")


NO_FORWARDING: Forwarder = _NoForwarding()


BROKER_LOGGER_RESOURCE = 8
_ALTER_CONFIGS_KEYS = (33, 44)  # AlterConfigs, IncrementalAlterConfigs


def _broker_loggers_only(request: Request) -> bool:
    """An (Incremental)AlterConfigs about this broker's loggers alone is answered here, not
    forwarded: loggers are the broker's own, as Kafka's ConfigAdminManager keeps them."""
    if request.api_key not in _ALTER_CONFIGS_KEYS:
        return False
    resources = request.body.resources
    return bool(resources) and all(r.resource_type == BROKER_LOGGER_RESOURCE for r in resources)


class _NoCapture:
    """The seam's capture test before a capture engine is built. `on` is an instance attribute,
    as the engine's is: Python 3.11 specializes only that lookup, a class attribute's is slower."""

    def __init__(self) -> None:
        self.on = False


_NO_CAPTURE = _NoCapture()


class RequestDispatcher:
    """Frames in, chunks out; `context(client, request)` builds what a handler sees; each handled
    request's time (from decoded to answered, parked waits included) is added to `stats`."""

    __slots__ = (
        "_context",
        "_forwards",
        "_quotas",
        "_request_quota",
        "_rules",
        "_stats",
        "_tap",
        "capture",
        "faults",
        "forwarder",
    )

    def __init__(
        self,
        context: Callable[[Any, Request], Any],
        stats: BrokerStats | None = None,
        forwarder: Forwarder = NO_FORWARDING,
        faults: FaultHook | None = None,
        capture: CaptureHook | None = None,
        quotas: QuotaManagers | None = None,
    ) -> None:
        self._context = context
        self._quotas = quotas
        # request_percentage's manager: its `on` is the one test a request pays without that quota
        self._request_quota: Any = quotas.request if quotas is not None else _OFF
        # What the seam tests per request, held directly: the rules (a dict the fault engine keeps
        # for its life) and the capture engine (its `on`); as cheap as one hook's test was.
        self.faults: FaultHook | None = None
        self._rules: object = {}
        self.capture: CaptureHook | None = None
        self._tap: Any = _NO_CAPTURE
        if faults is not None:
            self.set_faults(faults)
        if capture is not None:
            self.set_capture(capture)
        self._stats = stats or BrokerStats()
        self.forwarder = forwarder
        # A single node forwards nothing: its requests skip the forwarder without a call.
        self._forwards = forwarder is not NO_FORWARDING

    def set_faults(self, faults: FaultHook) -> None:
        """The fault hook, given when the broker builds its engine (the first rule or listing)."""
        self.faults = faults
        self._rules = faults.engine.rules

    def set_capture(self, capture: CaptureHook) -> None:
        """The capture hook, given when the broker builds its engine (the first capture or listing)."""
        self.capture = capture
        self._tap = capture.engine

    async def handle(
        self, frame: memoryview, client: Any, decoded: Request | None = None
    ) -> list[Chunk] | asyncio.Future[list[Chunk] | None] | None:
        """The response's chunks (None: no response), or a future of them for a Deferred answer.
        `decoded`: the frame's request, when the fault hook calls back to serve it."""
        if decoded is not None:
            request = decoded
        else:
            try:
                # the common Produce by its own short path (produce_path.py), the rest by the codec;
                # Kafka ignores bytes after the body
                request = decode_produce(frame) or decode_request(frame, strict=False)
            except UnsupportedRequest as e:
                if e.api_key == API_VERSIONS_KEY:
                    return api_versions_unsupported(e.correlation_id)
                raise CloseConnection(str(e)) from None
            except DecodeError as e:
                key, version = peek_header(frame)[:2] if len(frame) >= 8 else (-1, -1)
                raise CloseConnection(f"request (API key {key} v{version}) does not decode: {e}") from None
            if self._tap.on:  # a capture runs: it sees what the client gets, injected faults too
                assert self.capture is not None
                return await self.capture.around(
                    request, client, lambda: self._faulted(frame, client, request)
                )
            if self._rules:  # a fault rule is set: it may answer or change the answer
                assert self.faults is not None
                return await self.faults.around(request, client, lambda: self.handle(frame, client, request))
        if (
            self._forwards
            and request.api_key in (forwarded := self.forwarder.versions())
            and not _broker_loggers_only(request)
            and not (request.api_key in TOKEN_WRITE_KEYS and not allow_token_requests(client))
        ):
            low, high = forwarded[request.api_key]
            if not low <= request.api_version <= high:
                raise CloseConnection(f"API key {request.api_key} v{request.api_version} is not supported")
            return await self.forwarder.forward(
                bytes(frame),
                request,
                getattr(client, "host", ""),
                getattr(client, "principal", "User:ANONYMOUS"),
            )
        reg = HANDLERS.get(request.api_key) or registration(request.api_key)
        if reg is None or not reg.min_version <= request.api_version <= reg.max_version:
            if request.api_key == API_VERSIONS_KEY:
                return api_versions_unsupported(request.correlation_id)
            name = reg.api.name if reg else f"API key {request.api_key}"
            raise CloseConnection(f"{name} v{request.api_version} is not supported")
        ctx = self._context(client, request)
        started = perf_counter()
        body = await self._body(reg, request, reg.handler(ctx, request), started)
        throttle_ms = 0
        if self._request_quota.on and request.api_key not in _QUOTA_EXEMPT and body is not NO_RESPONSE:
            throttle_ms = self._charge(request, client, started)
        if isinstance(body, Deferred):  # taken; answered when its body is ready, in a task of its own
            answer = asyncio.ensure_future(self._finish(reg, request, body.body, started, throttle_ms))
            answer.add_done_callback(partial(self._ended, request.api_key, body.body, started))
            return answer
        return self._encode(request, body, started, throttle_ms)

    def _charge(self, request: Request, client: Any, started: float) -> int:
        """request_percentage: the handler's time charged to the client, its throttle time in ms."""
        assert self._quotas is not None
        if request.api_key == 1 and _from_follower(request.body):
            return 0  # replication is throttled by its own quota, as Kafka exempts follower fetches
        return self._quotas.record_request_time(client, request.client_id, perf_counter() - started)

    def _ended(
        self, api_key: int, pending: Awaitable[Any], started: float, answer: asyncio.Future[Any]
    ) -> None:
        """A Deferred answer cancelled with its connection ends here, counted. Cancelled before its
        task first ran, its body was never awaited: it is closed, not left to the collector."""
        if answer.cancelled():
            if inspect.iscoroutine(pending):
                pending.close()  # a no-op when the cancel reached it inside its await
            self._stats.observe(api_key, perf_counter() - started, cancelled=True)

    async def _faulted(
        self, frame: memoryview, client: Any, request: Request
    ) -> list[Chunk] | asyncio.Future[list[Chunk] | None] | None:
        if self._rules and self.faults is not None:
            return await self.faults.around(request, client, lambda: self.handle(frame, client, request))
        return await self.handle(frame, client, request)

    async def _finish(
        self, reg: Registration, request: Request, pending: Awaitable[Any], started: float, throttle_ms: int
    ) -> list[Chunk] | None:
        return self._encode(request, await self._body(reg, request, pending, started), started, throttle_ms)

    async def _body(
        self, reg: Registration, request: Request, pending: Awaitable[Any], started: float
    ) -> Any:
        try:
            return await pending
        except CloseConnection:
            self._stats.observe(request.api_key, perf_counter() - started, failed=True)
            raise
        except Exception as e:
            self._stats.observe(request.api_key, perf_counter() - started, failed=True)
            log.exception("%s v%d from %r failed", reg.api.name, request.api_version, request.client_id)
            raise CloseConnection(f"{reg.api.name} handler failed: {e}") from e

    def _encode(
        self, request: Request, body: Any, started: float, throttle_ms: int = 0
    ) -> list[Chunk] | None:
        self._stats.observe(request.api_key, perf_counter() - started, body=body)
        if body is NO_RESPONSE:
            return None
        if throttle_ms and getattr(body, "throttle_time_ms", throttle_ms) < throttle_ms:
            body.throttle_time_ms = throttle_ms  # the longer of this and a byte-rate throttle, as Kafka
        if request.api_key == PRODUCE_KEY and (
            answer := encode_produce_answer(request.api_version, request.correlation_id, body)
        ):
            return answer
        return encode_response(request.api_key, request.api_version, request.correlation_id, body)


class _Off:
    on = False


_OFF = _Off()


def _from_follower(body: Any) -> bool:
    """A Fetch from a replica (ReplicaId before v15, ReplicaState after)."""
    replica = getattr(body, "replica_id", -1)
    state = getattr(body, "replica_state", None)
    if state is not None:
        replica = max(replica, state.replica_id)
    return replica >= 0


def api_versions_unsupported(correlation_id: int) -> list[Chunk]:
    """ApiVersions v0 with UNSUPPORTED_VERSION and our range, as Kafka answers a version it lacks."""
    reg = registration(API_VERSIONS_KEY)
    high = reg.max_version if reg else 0
    body = ApiVersionsResponse(
        error_code=int(ErrorCode.UNSUPPORTED_VERSION),
        api_keys=[ApiVersion(api_key=API_VERSIONS_KEY, min_version=0, max_version=high)],
    )
    return encode_response(API_VERSIONS_KEY, 0, correlation_id, body)
