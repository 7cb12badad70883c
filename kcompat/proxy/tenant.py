"""A virtual cluster (tenant): the names its clients use, prefixed on the way to the upstream and
stripped on the way back, in every request and answer that names a topic, a group or a
transactional id (the table: tenant_fields.py).

    tenant = Tenant("a", "a.")
    frame = tenant.request(frame)              # `orders` goes upstream as `a.orders`
    if tenant.decodes_answer(key, version):    # the answer names something: decode it
        tenant.answer(key, version, body)      # `a.orders` back to `orders`; others' names dropped

Isolation without ACLs: every name a tenant sends is prefixed, so it can only ever name its own
topics, groups and transactional ids; an answer entry naming anything without the prefix (another
tenant's topic, `__consumer_offsets`, a group of the upstream's own) is dropped from the answer,
so listings (Metadata, ListGroups, ListTransactions, DescribeConfigs, ...) show the tenant's
names only. Topic ids are not rewritten: a tenant learns only its own topics' ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kcompat.faults.error_response import error_response
from kcompat.proxy.tenant_fields import REFUSED, REGEX, REQUEST, RESPONSE, N, fields_for
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import (
    API_VERSIONS_KEY,
    decode_request,
    encode_request,
    encode_response,
    peek_header,
)

Change = Callable[[str, N], str]
Foreign = Callable[[Any], bool]


class Refused(Exception):
    """A request a tenant may not send (tenant_fields.REFUSED); `why` names what it is."""

    def __init__(self, api_key: int, why: str) -> None:
        super().__init__(why)
        self.api_key = api_key
        self.why = why


class Tenant:
    __slots__ = ("name", "prefix")

    def __init__(self, name: str, prefix: str) -> None:
        self.name = name
        self.prefix = prefix

    # -- requests: the tenant's names to the upstream's --------------------------------------------

    def request(self, frame: bytes | bytearray) -> bytes | bytearray:
        """The request frame (no size prefix) with every name prefixed; as is when it names none.
        DecodeError/UnsupportedRequest for a request that cannot be read; Refused."""
        key, version, correlation = peek_header(frame)
        why = REFUSED.get(key)
        if why is not None:
            raise Refused(key, why)
        spec = APIS.get(key)
        if spec is None or (version not in spec.versions and key != API_VERSIONS_KEY):
            raise Refused(key, "an API or version the proxy cannot read (its names could not be rewritten)")
        fields = fields_for(key, REQUEST, version)
        if not fields:
            return frame
        request = decode_request(frame, strict=False)
        for n in fields:
            _apply(request.body, n.path, n, self._upstream, None)
        return encode_request(key, version, correlation, request.body, request.client_id)[4:]

    def _upstream(self, name: str, n: N) -> str:
        if not name:
            return name  # "" means none (no group, no transactional id): nothing to prefix
        if n.kind == REGEX:  # Kafka matches the whole topic name against it
            return f"{re.escape(self.prefix)}(?:{name})"
        return self.prefix + name

    # -- answers: the upstream's names to the tenant's, others' dropped ----------------------------

    def decodes_answer(self, api_key: int, api_version: int) -> bool:
        return bool(fields_for(api_key, RESPONSE, api_version))

    def answer(self, api_key: int, api_version: int, body: Any) -> None:
        for n in fields_for(api_key, RESPONSE, api_version):
            _apply(body, n.path, n, self._client, self._foreign)

    def _client(self, name: str, n: N) -> str:
        return name.removeprefix(self.prefix)

    def _foreign(self, name: Any) -> bool:
        return isinstance(name, str) and bool(name) and not name.startswith(self.prefix)


_ACLS = frozenset({29, 30, 31})


def refused_answer(refused: Refused, frame: bytes | bytearray) -> list[Any] | None:
    """The answer to a refused request, where Kafka has one: the ACL APIs are answered
    SECURITY_DISABLED, as by a cluster without an authorizer. None: close the connection."""
    if refused.api_key not in _ACLS:
        return None
    request = decode_request(frame, strict=False)
    key, version = request.api_key, request.api_version
    text = "this virtual cluster has no ACLs: its names are isolated by the proxy"
    body = error_response(key, version, request.body, ErrorCode.SECURITY_DISABLED, text)
    return list(encode_response(key, version, request.correlation_id, body))


def _typed(struct: Any, n: N) -> bool:
    return not n.resource_types or getattr(struct, "resource_type", None) in n.resource_types


def _apply(struct: Any, path: tuple[str, ...], n: N, change: Change, foreign: Foreign | None) -> None:
    """Change the names at `path` under `struct`; with `foreign`, drop the array entries (or the
    names of a list of names) that are another's."""
    name, rest = path[0], path[1:]
    value = getattr(struct, name, None)
    if value is None:
        return
    if not rest:  # the name, or a list of names
        if isinstance(value, list):
            kept = [v for v in value if not (foreign is not None and foreign(v))]
            setattr(struct, name, [change(v, n) if isinstance(v, str) else v for v in kept])
        elif isinstance(value, str) and _typed(struct, n):
            setattr(struct, name, change(value, n))
        return
    if isinstance(value, list):
        if foreign is not None and len(rest) == 1:  # entries of an array, each named by rest[0]
            value = [v for v in value if not (_typed(v, n) and foreign(getattr(v, rest[0], None)))]
            setattr(struct, name, value)
        for item in value:
            _apply(item, rest, n, change, foreign)
    else:
        _apply(value, rest, n, change, foreign)
