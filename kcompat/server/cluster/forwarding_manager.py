"""Cluster mode: admin requests forwarded to the active KRaft controller inside Envelope (key 58, v0).

Kafka's ForwardingManager and KafkaApis.maybeForwardToController: a KRaft broker does not change
cluster metadata itself, it wraps the client's request, bytes as received, in an Envelope with the
client's principal and address and sends it to the active controller on the controller listener;
the controller's answer goes back to the client under the client's correlation id.

    client ──CreateTopics──► dispatcher ──forward()──► Envelope{request_data = header+body as sent,
                                                               request_principal = DefaultPrincipalData,
                                                               client_host_address = 4/16 address bytes}
    client ◄──CreateTopics response (decoded, re-encoded) ◄── Envelope response{response_data = header+body}

What Kafka's forwarding channel (NodeToControllerChannelManager, retry timeout 60 s) does with
failures, this does too:
  * Envelope error NOT_CONTROLLER (the controller asked is no longer active), a refused or broken
    connection: find the active controller again (the Raft leader the metadata follower knows,
    else the next bootstrap server) and retry, until FORWARD_TIMEOUT_MS since the request came;
  * that deadline passed: the request's own error response with REQUEST_TIMED_OUT;
  * Envelope error UNSUPPORTED_VERSION: the client's connection is closed (it reconnects and asks
    ApiVersions again); any other Envelope error, or an answer that does not decode:
    UNKNOWN_SERVER_ERROR in the request's error response.

The sans-IO parts (the Envelope body, the principal, the error responses) are module functions
that the unit tests drive; ForwardingManager is the asyncio part. Imported only in cluster mode.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Callable
from typing import Any

from kcompat.server.cluster.controller_channel import ControllerChannel, ControllerUnavailable
from kcompat.server.cluster.forward_errors import error_response
from kcompat.server.dispatcher import CloseConnection
from kcompat.server.log_throttle import LogThrottle
from kcompat.wire.codec import MessageCodec
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages.alter_client_quotas import ALTER_CLIENT_QUOTAS
from kcompat.wire.messages.alter_configs import ALTER_CONFIGS
from kcompat.wire.messages.alter_partition_reassignments import ALTER_PARTITION_REASSIGNMENTS
from kcompat.wire.messages.alter_user_scram_credentials import ALTER_USER_SCRAM_CREDENTIALS
from kcompat.wire.messages.api_versions import API_VERSIONS
from kcompat.wire.messages.create_acls import CREATE_ACLS
from kcompat.wire.messages.create_delegation_token import CREATE_DELEGATION_TOKEN
from kcompat.wire.messages.create_partitions import CREATE_PARTITIONS
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.delete_acls import DELETE_ACLS
from kcompat.wire.messages.delete_topics import DELETE_TOPICS
from kcompat.wire.messages.describe_quorum import DESCRIBE_QUORUM
from kcompat.wire.messages.elect_leaders import ELECT_LEADERS
from kcompat.wire.messages.envelope import ENVELOPE
from kcompat.wire.messages.expire_delegation_token import EXPIRE_DELEGATION_TOKEN
from kcompat.wire.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from kcompat.wire.messages.list_partition_reassignments import LIST_PARTITION_REASSIGNMENTS
from kcompat.wire.messages.principal import DEFAULT_PRINCIPAL_DATA
from kcompat.wire.messages.renew_delegation_token import RENEW_DELEGATION_TOKEN
from kcompat.wire.messages.unregister_broker import UNREGISTER_BROKER
from kcompat.wire.messages.update_features import UPDATE_FEATURES
from kcompat.wire.primitives import Reader
from kcompat.wire.protocol import (
    Chunk,
    Request,
    api,
    decode_response,
    encode_request,
    encode_response,
)
from kcompat.wire.types.envelope import EnvelopeRequest
from kcompat.wire.types.principal import DefaultPrincipalData

log = logging.getLogger("kcompat.cluster")

ENVELOPE_VERSION = 0
FORWARD_TIMEOUT_MS = 60_000  # BrokerServer's forwarding channel: retryTimeoutMs = 60000
CONTROLLER_REQUEST_TIMEOUT_S = 30.0  # request.timeout.ms of Kafka's inter-broker client
RETRY_BACKOFF_S = 0.1

# What a KRaft broker forwards (KafkaApis: maybeForwardToController; DescribeQuorum is
# forwardToControllerOrFail, the same here since a cluster-mode broker always has a controller).
FORWARDED_APIS = frozenset(
    {
        CREATE_TOPICS.key,
        DELETE_TOPICS.key,
        CREATE_PARTITIONS.key,
        ALTER_CONFIGS.key,
        INCREMENTAL_ALTER_CONFIGS.key,
        ELECT_LEADERS.key,
        ALTER_PARTITION_REASSIGNMENTS.key,
        LIST_PARTITION_REASSIGNMENTS.key,
        UPDATE_FEATURES.key,
        DESCRIBE_QUORUM.key,
        UNREGISTER_BROKER.key,
        CREATE_ACLS.key,
        DELETE_ACLS.key,
        ALTER_CLIENT_QUOTAS.key,
        # DescribeDelegationToken is the broker's, from the image's tokens
        CREATE_DELEGATION_TOKEN.key,
        RENEW_DELEGATION_TOKEN.key,
        EXPIRE_DELEGATION_TOKEN.key,
        # DescribeUserScramCredentials is the broker's, from the image's credentials
        ALTER_USER_SCRAM_CREDENTIALS.key,
    }
)

_principal_codec = MessageCodec(DEFAULT_PRINCIPAL_DATA)
_PRINCIPAL_VERSION = 0


# --- sans-IO: the Envelope and what goes back to the client ---


def serialize_principal(
    principal_type: str = "User", name: str = "ANONYMOUS", token_authenticated: bool = False
) -> bytes:
    """DefaultKafkaPrincipalBuilder.serialize: an int16 version, then DefaultPrincipalData.

    The one place a principal enters a forwarded request: the connection's (ANONYMOUS on
    PLAINTEXT; the SASL user or the mTLS-mapped name otherwise)."""
    body = DefaultPrincipalData(type=principal_type, name=name, token_authenticated=token_authenticated)
    return _PRINCIPAL_VERSION.to_bytes(2, "big") + _principal_codec.encode(body, _PRINCIPAL_VERSION)


def deserialize_principal(data: bytes) -> tuple[str, str, bool]:
    r = Reader(data)
    version = r.int16()
    p = _principal_codec.decoder(version)(r)
    return p.type, p.name, p.token_authenticated


def client_address_bytes(host: str) -> bytes:
    """InetAddress.getAddress(): 4 bytes for IPv4, 16 for IPv6 (what the controller parses back)."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).packed
    except ValueError:
        return bytes(4)  # not an IP (a Unix socket in tests): 0.0.0.0, as an unknown peer


def envelope_body(request_frame: bytes, client_host: str, principal: bytes | None = None) -> EnvelopeRequest:
    """The Envelope request: the client's request bytes as received (header and body, no size)."""
    return EnvelopeRequest(
        request_data=request_frame,
        request_principal=serialize_principal() if principal is None else principal,
        client_host_address=client_address_bytes(client_host),
    )


def unwrap_response(request: Request[Any], response_data: bytes) -> Any:
    """The controller's answer to the forwarded request (response header + body) as a body.

    DecodeError when it does not decode or answers another request."""
    correlation, body = decode_response(request.api_key, request.api_version, response_data)
    if correlation != request.correlation_id:
        raise DecodeError(
            f"forwarded answer has correlation id {correlation}, not {request.correlation_id}", "Envelope"
        )
    return body


# --- the asyncio part ---


class ForwardingManager:
    """Sends forwarded requests to the active controller, one at a time, and answers the clients.

    `leader()` is the controller listener (host, port) of the Raft leader as the metadata follower
    last saw it, or None. `controller_versions` holds the controller's ApiVersions ranges of the
    forwarded APIs once asked (Kafka advertises their intersection with its own)."""

    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        *,
        node_id: int,
        leader: Callable[[], tuple[str, int] | None] = lambda: None,
        timeout_ms: int = FORWARD_TIMEOUT_MS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._channel = ControllerChannel(
            bootstrap,
            client_id=f"broker-{node_id}-forwarding",
            request_timeout_s=CONTROLLER_REQUEST_TIMEOUT_S,
        )
        self._leader = leader
        self._timeout_ms = timeout_ms
        self._clock = clock  # seconds, for the forwarding timeout (a test's can be moved on)
        self._lock = asyncio.Lock()  # the channel carries one request at a time
        self._throttle = LogThrottle(log, 10.0)
        self.controller_versions: dict[int, tuple[int, int]] = {}

    def versions(self) -> dict[int, tuple[int, int]]:
        """The ranges to advertise for the forwarded APIs: what kcompat's schemas decode, cut to the
        controller's ranges once known (Kafka's ApiVersionManager with controllerApiVersions)."""
        out = {}
        for key in FORWARDED_APIS:
            r = api(key).versions
            lo, hi = r.low, r.high if r.high is not None else r.low
            if self.controller_versions:  # known: what the controller lacks is not advertised
                c = self.controller_versions.get(key, (0, -1))
                lo, hi = max(lo, c[0]), min(hi, c[1])
            if lo <= hi:
                out[key] = (lo, hi)
        return out

    async def learn_controller_versions(self) -> None:
        """ApiVersions of the controller, asked at start and again each second until answered."""
        while True:
            try:
                async with self._lock:
                    r = await self._channel.call(
                        API_VERSIONS.key,
                        3,
                        {"client_software_name": "kcompat", "client_software_version": "1"},
                    )
            except ControllerUnavailable:
                self._rediscover()
                r = None
            if r is not None and r.error_code == 0:
                self.controller_versions = {
                    k.api_key: (k.min_version, k.max_version)
                    for k in r.api_keys
                    if k.api_key in FORWARDED_APIS
                }
                return
            await asyncio.sleep(1.0)

    async def forward(
        self, frame: bytes, request: Request[Any], client_host: str, principal: str = "User:ANONYMOUS"
    ) -> list[Chunk]:
        """The client's answer to a forwarded request (CloseConnection when Kafka would close).

        `principal` is the connection's KafkaPrincipal as one string (`User:alice`)."""
        principal_type, _, name = principal.partition(":")
        outcome = await self._exchange(
            envelope_body(frame, client_host, serialize_principal(principal_type, name))
        )
        if isinstance(outcome, ErrorCode):
            if outcome == ErrorCode.UNSUPPORTED_VERSION:
                raise CloseConnection(
                    "the controller does not support this request's version (the client will ask ApiVersions again)"
                )
            if outcome == ErrorCode.REQUEST_TIMED_OUT:
                log.info(
                    "forwarding %s to the controller timed out after %d ms",
                    api(request.api_key).name,
                    self._timeout_ms,
                )
            body = error_response(request, outcome)
        else:
            try:
                body = unwrap_response(request, outcome)
            except DecodeError as e:
                log.error("the controller's answer to a forwarded request does not decode: %s", e)
                body = error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR)
        return encode_response(request.api_key, request.api_version, request.correlation_id, body)

    async def send(self, api_key: int, api_version: int, body: Any, client_host: str = "127.0.0.1") -> Any:
        """A request of the broker's own (auto topic creation) inside an Envelope, as Kafka's
        AutoTopicCreationManager sends one: the decoded answer, or the ErrorCode that replaced it."""
        frame = encode_request(api_key, api_version, 0, body, "kcompat-auto-topic-creation")[4:]
        outcome = await self._exchange(envelope_body(frame, client_host))
        if isinstance(outcome, ErrorCode):
            return outcome
        try:
            return decode_response(api_key, api_version, outcome)[1]
        except DecodeError:
            return ErrorCode.UNKNOWN_SERVER_ERROR

    async def _exchange(self, envelope: EnvelopeRequest) -> bytes | ErrorCode:
        """The Envelope's response_data, or the error the client's request is to get instead."""
        deadline = self._clock() + self._timeout_ms / 1000
        while True:
            remaining = deadline - self._clock()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            try:
                async with self._lock:
                    r = await self._channel.call(
                        ENVELOPE.key,
                        ENVELOPE_VERSION,
                        envelope,
                        timeout_s=min(remaining, CONTROLLER_REQUEST_TIMEOUT_S),
                    )
            except ControllerUnavailable as e:
                self._throttle.log(
                    logging.WARNING, "unreachable", "cannot forward to the controller (%s); retrying", e
                )
                r = None
            if r is not None and r.error_code == ErrorCode.NOT_CONTROLLER:
                self._throttle.log(
                    logging.INFO,
                    "not-controller",
                    "forwarding: %s:%d is not the active controller; looking for it",
                    *self._channel.target,
                )
            if r is None or r.error_code == ErrorCode.NOT_CONTROLLER:
                self._rediscover()  # a new active controller, or the same one back
                await asyncio.sleep(min(RETRY_BACKOFF_S, max(0.0, deadline - self._clock())))
                continue
            if r.error_code == ErrorCode.UNSUPPORTED_VERSION:
                return ErrorCode.UNSUPPORTED_VERSION
            if r.error_code != 0 or r.response_data is None:
                log.warning("forwarded request failed with Envelope error %d", r.error_code)
                return ErrorCode.UNKNOWN_SERVER_ERROR
            return bytes(r.response_data)

    def _rediscover(self) -> None:
        self._channel.rediscover(self._leader())

    def close(self) -> None:
        self._channel.close()
