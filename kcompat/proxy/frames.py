"""What the proxy reads from frames without decoding them: the request header's key, version and
correlation id, a Produce's acks, and the rewriting of a node-naming answer (decode, rewrite,
encode; every other frame is relayed as its bytes). A data-path answer (Produce, Fetch,
ShareFetch, ShareAcknowledge) is decoded only when skim.py finds a node in it: most never name one."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kcompat.proxy.node_fields import must_decode
from kcompat.proxy.rewrite import Endpoint, Learn, rewrite_nodes
from kcompat.proxy.skim import SKIMMED, names_nodes
from kcompat.proxy.tenant import Tenant
from kcompat.proxy.tenant_acls import Withheld
from kcompat.wire.messages import APIS
from kcompat.wire.primitives import Reader
from kcompat.wire.protocol import (
    decode_response,
    encode_response,
    peek_header,
    request_header_version,
)

PRODUCE_KEY = 0
_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Pending:
    """A request sent upstream whose answer is awaited: answers come in request order."""

    api_key: int
    api_version: int
    correlation_id: int
    withheld: Withheld = ()  # a virtual cluster's ACL entries answered here, merged into the answer

    @property
    def known(self) -> bool:
        spec = APIS.get(self.api_key)
        return spec is not None and self.api_version in spec.versions


def header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame (DecodeError under 8 bytes)."""
    return peek_header(frame)


def produce_acks(frame: bytes | bytearray | memoryview, api_version: int) -> int:
    """The acks of a Produce request frame, read past its header and transactional id only."""
    r = Reader(frame, 8)
    n = r.int16()  # client id: a nullable STRING with an int16 length in header v1 and v2 alike
    if n > 0:
        r.raw(n)
    flexible = request_header_version(PRODUCE_KEY, api_version) == 2
    if flexible:
        r.tagged_fields()
    if api_version >= 3:  # transactional_id
        r.compact_string() if flexible else r.string()
    return r.int16()


def rewrite_answer(
    pending: Pending,
    frame: bytes | bytearray | memoryview,
    endpoint: Endpoint,
    learn: Learn,
    tenant: Tenant | None = None,
) -> tuple[list[Any], Any]:
    """The answer as chunks to send (rewritten when it names nodes, or a virtual cluster's names;
    else the frame as received with its size prefix) and its decoded body (None: relayed as bytes)."""
    key, version = pending.api_key, pending.api_version
    names = tenant is not None and pending.known and tenant.decodes_answer(key, version)
    if not pending.known or not (names or must_decode(key, version)):
        return [_SIZE.pack(len(frame)), frame], None
    if not names and key in SKIMMED and not names_nodes(key, version, frame):
        return [_SIZE.pack(len(frame)), frame], None
    correlation, body = decode_response(key, version, frame)
    rewrite_nodes(key, body, endpoint, learn)
    if tenant is not None and names:
        tenant.answer(key, version, body, pending.withheld)
    return encode_response(pending.api_key, pending.api_version, correlation, body), body
