"""Frames, headers and the API table: from a request frame to a typed body, and back.

    request frame   = size int32 | request header | request body
    request header  v0: api_key int16, api_version int16, correlation_id int32
                    v1: v0 + client_id nullable STRING (int16 length)
                    v2: v1 + tagged fields (client_id keeps its int16 length)
    response frame  = size int32 | response header | response body
    response header v0: correlation_id int32;  v1: v0 + tagged fields

A request uses header v2 when its API version is flexible, else v1 (v0 belonged only to
ControlledShutdown v0, which clients never send). A response uses header v1 when flexible,
except ApiVersions, whose response header is always v0 so that a client can read the error
code before it knows which versions the broker speaks.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kcompat.wire.codec import MessageCodec
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import APIS
from kcompat.wire.messages.headers import REQUEST_HEADER, RESPONSE_HEADER
from kcompat.wire.primitives import Reader, Sized, Writer
from kcompat.wire.schema import Api
from kcompat.wire.types.headers import RequestHeader

API_VERSIONS_KEY = 18
_SIZE = struct.Struct(">i")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")

Chunk = bytes | bytearray | memoryview | Sized

_request_header = MessageCodec(REQUEST_HEADER)
_response_header = MessageCodec(RESPONSE_HEADER)


class UnsupportedRequest(Exception):
    """The frame's header names an API key or version that kcompat does not declare.

    The server answers as Kafka does (UNSUPPORTED_VERSION for ApiVersions, a closed connection
    otherwise); `correlation_id` lets it address the answer.
    """

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        super().__init__(f"API key {api_key} version {api_version} is not supported")


if TYPE_CHECKING:  # a default (PEP 696, Python 3.13) lets handlers not yet typed write plain `Request`
    from typing_extensions import TypeVar as TypeVarWithDefault

    Body = TypeVarWithDefault("Body", default=Any)
else:
    Body = TypeVar("Body")


@dataclass(slots=True)
class Request(Generic[Body]):
    """A decoded request; a handler names its body's class, `Request[DeleteRecordsRequest]`, so that
    mypy checks the fields it reads (the classes are in kcompat.wire.types)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header: RequestHeader
    body: Body


def api(api_key: int) -> Api:
    return APIS[api_key]


@cache
def request_codec(api_key: int) -> MessageCodec:
    return MessageCodec(APIS[api_key].request)


@cache
def response_codec(api_key: int) -> MessageCodec:
    return MessageCodec(APIS[api_key].response)


def request_header_version(api_key: int, api_version: int) -> int:
    return 2 if api_version in APIS[api_key].flexible else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if api_version in APIS[api_key].flexible else 0


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): readable from any frame of 8 bytes or more."""
    if len(frame) < 8:
        raise DecodeError(f"request header needs 8 bytes, {len(frame)} present", "request_header")
    key, version, correlation = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    return key, version, correlation


def describe_frame(frame: bytes | bytearray | memoryview) -> str:
    """'Metadata v12, correlation id 7' for a frame whose header can be read, else '' (for log lines)."""
    if len(frame) < 8:
        return ""
    key, version, correlation = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    spec = APIS.get(key)
    name = spec.name if spec is not None else f"API key {key}"
    return f"{name} v{version}, correlation id {correlation}"


def decode_request(frame: bytes | bytearray | memoryview, *, strict: bool = True) -> Request[Any]:
    """A request frame (without its size prefix) as header and typed body.

    Raises UnsupportedRequest for an undeclared key or version, DecodeError for bad bytes.
    strict=False ignores bytes after the body, as Kafka's own parser does: librdkafka's admin
    Metadata v12 carries a few more bytes than the schema, and a broker must still answer it.
    """
    key, version, correlation = peek_header(frame)
    decoders = _request_decoders.get((key, version))
    if decoders is None:
        spec = APIS.get(key)
        if spec is None or version not in spec.versions:
            raise UnsupportedRequest(key, version, correlation)
        decoders = _request_decoders[key, version] = (
            _request_header.decoder(request_header_version(key, version)),
            request_codec(key).decoder(version),
        )
    r = Reader(frame)
    header: RequestHeader = decoders[0](r)
    body = decoders[1](r)
    if strict and r.remaining():
        raise DecodeError(f"{r.remaining()} unexpected bytes after the body", APIS[key].request.name)
    return Request(key, version, correlation, header.client_id, header, body)


# The coders of each (API key, version) seen, looked up once: every request and answer asks.
_request_decoders: dict[tuple[int, int], tuple[Any, Any]] = {}
_response_encoders: dict[tuple[int, int], tuple[bool, Any]] = {}


def encode_request(
    api_key: int, api_version: int, correlation_id: int, body: Any, client_id: str | None = "kcompat"
) -> bytes:
    """A whole request frame, size prefix included (for tests, tools, benchmarks and the client).
    `body` is the request's typed message, or nested mappings it is built from (MessageCodec.build)."""
    w = Writer()
    w.int32(0)
    hv = request_header_version(api_key, api_version)
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    _request_header.write(w, header, hv)
    codec = request_codec(api_key)
    codec.write(w, codec.build(body) if isinstance(body, Mapping) else body, api_version)
    data = w.getvalue()
    return _SIZE.pack(len(data) - 4) + data[4:]


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> list[Chunk]:
    """A whole response frame as chunks: bytes, and any pass-through record slices in place.
    `body` is the response's typed message (kcompat.wire.types); anything else is a TypeError."""
    coder = _response_encoders.get((api_key, api_version))
    if coder is None:
        coder = _response_encoders[api_key, api_version] = (
            response_header_version(api_key, api_version) == 1,
            response_codec(api_key).encoder(api_version),
        )
    w = Writer()
    w.int32(0)  # size, patched below
    w.int32(correlation_id)
    if coder[0]:
        w.uvarint(0)  # the header's tagged fields: none
    coder[1](w, body)
    if not w.chunks:  # all bytes (no file slice passed through): the size goes in before the one copy
        _SIZE.pack_into(w.buf, 0, len(w.buf) - 4)
        return [bytes(w.buf)]
    size = w.size() - 4
    chunks = w.finish()
    first = bytearray(chunks[0])  # type: ignore[arg-type]  # the first chunk always holds the header bytes
    _SIZE.pack_into(first, 0, size)
    chunks[0] = bytes(first)
    return chunks


def decode_response(api_key: int, api_version: int, frame: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """(correlation_id, body) from a response frame without its size prefix (for tests and tools)."""
    r = Reader(frame)
    correlation = r.int32()
    if response_header_version(api_key, api_version) == 1:
        r.tagged_fields()
    body = response_codec(api_key).decoder(api_version)(r)
    if r.remaining():
        raise DecodeError(f"{r.remaining()} unexpected bytes after the body", APIS[api_key].response.name)
    return correlation, body
