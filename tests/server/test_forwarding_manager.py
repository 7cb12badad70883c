"""Envelope forwarding (kcompat.server.cluster.forwarding_manager): the sans-IO framing, and the retry rules
against a stand-in controller on a local socket (NOT_CONTROLLER, then the answer; unreachable until
the deadline, then REQUEST_TIMED_OUT)."""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

import pytest

from kcompat.server.cluster.forwarding_manager import (
    FORWARDED_APIS,
    ForwardingManager,
    client_address_bytes,
    deserialize_principal,
    envelope_body,
    error_response,
    serialize_principal,
    unwrap_response,
)
from kcompat.server.dispatcher import CloseConnection
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError
from kcompat.wire.protocol import (
    decode_request,
    encode_request,
    encode_response,
    request_codec,
    response_codec,
)

ENVELOPE, CREATE_TOPICS = 58, 19


def respond(api_key: int, version: int, correlation: int, body: Any) -> list[Any]:
    """A response frame's chunks; the fake controllers here write their answers as dicts."""
    typed = response_codec(api_key).build(body) if isinstance(body, dict) else body
    return encode_response(api_key, version, correlation, typed)


def frame_of(api_key: int, version: int, correlation: int, body: dict[str, Any]) -> bytes:
    return encode_request(api_key, version, correlation, body, "client-1")[4:]


CREATE = {"topics": [{"name": "t", "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []}],
          "timeout_ms": 5000, "validate_only": False}  # fmt: skip


def joined(chunks: list[Any]) -> bytes:
    return b"".join(bytes(c) for c in chunks)


def test_principal_is_version_prefixed_default_principal_data() -> None:
    data = serialize_principal()
    # int16 version 0 | compact string "User" | compact string "ANONYMOUS" | bool | no tagged fields
    assert data == b"\x00\x00" + b"\x05User" + b"\x0aANONYMOUS" + b"\x00" + b"\x00"
    assert deserialize_principal(data) == ("User", "ANONYMOUS", False)
    assert deserialize_principal(serialize_principal("User", "alice", True)) == ("User", "alice", True)


def test_client_address_is_the_raw_ip() -> None:
    assert client_address_bytes("127.0.0.1") == bytes([127, 0, 0, 1])
    assert client_address_bytes("::1") == bytes(15) + b"\x01"
    assert client_address_bytes("fe80::1%eth0") == bytes([0xFE, 0x80]) + bytes(13) + b"\x01"
    assert client_address_bytes("not-an-ip") == bytes(4)


def test_envelope_carries_the_request_as_sent() -> None:
    frame = frame_of(CREATE_TOPICS, 7, 42, CREATE)
    body = envelope_body(frame, "10.1.2.3")
    encoded = request_codec(ENVELOPE).encode(body, 0)
    decoded = request_codec(ENVELOPE).decode(encoded, 0)
    assert bytes(decoded.request_data) == frame
    assert bytes(decoded.client_host_address) == bytes([10, 1, 2, 3])
    assert deserialize_principal(bytes(decoded.request_principal)) == ("User", "ANONYMOUS", False)
    inner = decode_request(bytes(decoded.request_data))
    assert (inner.api_key, inner.api_version, inner.correlation_id, inner.client_id) == (
        CREATE_TOPICS,
        7,
        42,
        "client-1",
    )


def test_unwrap_checks_the_correlation_id() -> None:
    request = decode_request(frame_of(CREATE_TOPICS, 7, 42, CREATE))
    answer = {
        "throttle_time_ms": 0,
        "topics": [{"name": "t", "topic_id": uuid.uuid4(), "error_code": 0, "num_partitions": 3}],
    }
    data = joined(respond(CREATE_TOPICS, 7, 42, answer))[4:]
    assert unwrap_response(request, data).topics[0].num_partitions == 3
    other = joined(respond(CREATE_TOPICS, 7, 43, answer))[4:]
    with pytest.raises(DecodeError):
        unwrap_response(request, other)


REQUESTS: dict[int, tuple[int, dict[str, Any]]] = {
    64: (0, {"broker_id": 5}),  # UnregisterBroker
    38: (
        3,
        {"owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1},
    ),
    39: (2, {"hmac": b"h", "renew_period_ms": -1}),  # RenewDelegationToken
    40: (2, {"hmac": b"h", "expiry_time_period_ms": -1}),  # ExpireDelegationToken
    19: (7, CREATE),
    20: (6, {"topics": [{"name": "t", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 1}),
    37: (
        3,
        {"topics": [{"name": "t", "count": 4, "assignments": None}], "timeout_ms": 1, "validate_only": False},
    ),
    33: (
        2,
        {"resources": [{"resource_type": 2, "resource_name": "t", "configs": []}], "validate_only": False},
    ),
    44: (
        1,
        {"resources": [{"resource_type": 4, "resource_name": "1", "configs": []}], "validate_only": False},
    ),
    43: (
        2,
        {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0, 1]}], "timeout_ms": 1},
    ),
    45: (
        0,
        {"timeout_ms": 1, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
    ),
    46: (0, {"timeout_ms": 1, "topics": None}),
    57: (
        1,
        {
            "timeout_ms": 1,
            "feature_updates": [{"feature": "group.version", "max_version_level": 1, "upgrade_type": 1}],
            "validate_only": False,
        },
    ),
    55: (2, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}),
    30: (
        3,
        {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": "t",
                    "resource_pattern_type": 3,
                    "principal": "User:a",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ]
        },
    ),
    31: (
        3,
        {
            "filters": [
                {
                    "resource_type_filter": 1,
                    "resource_name_filter": None,
                    "pattern_type_filter": 1,
                    "principal_filter": None,
                    "host_filter": None,
                    "operation": 1,
                    "permission_type": 1,
                }
            ]
        },
    ),
    49: (
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "user", "entity_name": None}],
                    "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}],
                }
            ],
            "validate_only": False,
        },
    ),
    51: (
        0,
        {
            "deletions": [{"name": "bob", "mechanism": 1}],
            "upsertions": [
                {"name": "alice", "mechanism": 2, "iterations": 4096, "salt": b"s", "salted_password": b"p"},
                {"name": "bob", "mechanism": 2, "iterations": 4096, "salt": b"s", "salted_password": b"p"},
            ],
        },
    ),
}


@pytest.mark.parametrize("api_key", sorted(FORWARDED_APIS))
def test_every_forwarded_api_has_an_error_response(api_key: int) -> None:
    version, body = REQUESTS[api_key]
    request = decode_request(frame_of(api_key, version, 7, body))
    response = error_response(request, ErrorCode.REQUEST_TIMED_OUT)
    data = joined(respond(api_key, version, 7, response))
    text = repr(unwrap_response(request, data[4:]))
    assert f"error_code={int(ErrorCode.REQUEST_TIMED_OUT)}" in text, text


def test_alter_user_scram_credentials_error_names_each_user_once() -> None:
    version, body = REQUESTS[51]
    request = decode_request(frame_of(51, version, 7, body))
    response = error_response(request, ErrorCode.NOT_CONTROLLER, "no controller")
    # AlterUserScramCredentialsRequest.getErrorResponse: the distinct users, sorted
    assert [(x.user, x.error_code, x.error_message) for x in response.results] == [
        ("alice", ErrorCode.NOT_CONTROLLER, "no controller"),
        ("bob", ErrorCode.NOT_CONTROLLER, "no controller"),
    ]


class StandInController:
    """Answers Envelope: NOT_CONTROLLER for the first `refuse` requests, then the inner request's
    answer (a CreateTopics result naming the principal it saw)."""

    def __init__(self, refuse: int) -> None:
        self.refuse = refuse
        self.seen: list[Any] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                envelope = decode_request(await reader.readexactly(size))
                assert envelope.api_key == ENVELOPE
                self.seen.append(envelope.body)
                if len(self.seen) <= self.refuse:
                    body: dict[str, Any] = {
                        "response_data": None,
                        "error_code": int(ErrorCode.NOT_CONTROLLER),
                    }
                else:
                    inner = decode_request(bytes(envelope.body.request_data))
                    who = deserialize_principal(bytes(envelope.body.request_principal))[1]
                    answer = {"throttle_time_ms": 0, "topics": [{"name": t.name, "error_code": 0, "error_message": who}
                                                                for t in inner.body.topics]}  # fmt: skip
                    data = joined(respond(inner.api_key, inner.api_version, inner.correlation_id, answer))[4:]
                    body = {"response_data": data, "error_code": 0}
                writer.write(joined(respond(ENVELOPE, 0, envelope.correlation_id, body)))
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def test_not_controller_then_the_answer_with_the_clients_correlation_id() -> None:
    async def run() -> None:
        controller = StandInController(refuse=2)
        port = await controller.start()
        fm = ForwardingManager([("127.0.0.1", port)], node_id=1, leader=lambda: ("127.0.0.1", port))
        request = decode_request(frame_of(CREATE_TOPICS, 7, 1234, CREATE))
        try:
            chunks = await fm.forward(frame_of(CREATE_TOPICS, 7, 1234, CREATE), request, "127.0.0.1")
        finally:
            fm.close()
            await asyncio.sleep(0.05)  # the stand-in sees the hang-up and closes its side
            await controller.close()
        body = unwrap_response(request, joined(chunks)[4:])  # checks correlation id 1234
        assert body.topics[0].error_code == 0 and body.topics[0].error_message == "ANONYMOUS"
        assert len(controller.seen) == 3  # two NOT_CONTROLLER, then forwarded again

    asyncio.run(run())


def test_unreachable_controller_times_out_with_request_timed_out() -> None:
    async def run() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = int(server.sockets[0].getsockname()[1])
        server.close()
        await server.wait_closed()  # nothing listens there now
        readings: list[float] = []

        def clock() -> float:  # every reading 10 s later: the 30 s timeout passes after a few retries
            readings.append(10.0 * len(readings))
            return readings[-1]

        fm = ForwardingManager([("127.0.0.1", port)], node_id=1, timeout_ms=30_000, clock=clock)
        request = decode_request(frame_of(CREATE_TOPICS, 7, 9, CREATE))
        loop = asyncio.get_running_loop()
        started = loop.time()
        chunks = await fm.forward(frame_of(CREATE_TOPICS, 7, 9, CREATE), request, "127.0.0.1")
        elapsed = loop.time() - started
        fm.close()
        body = unwrap_response(request, joined(chunks)[4:])
        assert body.topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        assert readings[-1] - readings[0] >= 30.0  # answered once the timeout passed, not before
        assert elapsed < 3.0  # by the forwarder's clock: not waited out in real time

    asyncio.run(run())


def test_unsupported_version_closes_the_clients_connection() -> None:
    async def run() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            envelope = decode_request(await reader.readexactly(size))
            body = {"response_data": None, "error_code": int(ErrorCode.UNSUPPORTED_VERSION)}
            writer.write(joined(respond(ENVELOPE, 0, envelope.correlation_id, body)))
            await writer.drain()
            await reader.read()  # until the forwarder hangs up
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = int(server.sockets[0].getsockname()[1])
        fm = ForwardingManager([("127.0.0.1", port)], node_id=1)
        request = decode_request(frame_of(CREATE_TOPICS, 7, 9, CREATE))
        try:
            with pytest.raises(CloseConnection):
                await fm.forward(frame_of(CREATE_TOPICS, 7, 9, CREATE), request, "127.0.0.1")
        finally:
            fm.close()
            await asyncio.sleep(0.05)
            server.close()
            await server.wait_closed()

    asyncio.run(run())


def test_advertised_versions_are_cut_to_the_controllers() -> None:
    fm = ForwardingManager([("127.0.0.1", 1)], node_id=1)
    own = fm.versions()
    assert set(own) == FORWARDED_APIS and own[CREATE_TOPICS] == (
        2,
        7,
    )  # what kcompat decodes, until the controller says
    fm.controller_versions = {key: (0, 99) for key in FORWARDED_APIS if key != 55} | {CREATE_TOPICS: (4, 5)}
    cut = fm.versions()
    assert cut[CREATE_TOPICS] == (4, 5)
    assert 55 not in cut  # a controller without DescribeQuorum: not advertised
    assert cut[20] == own[20]
