"""A virtual cluster (tenant): the names its clients use, prefixed on the way to the upstream and
stripped on the way back, in every request and answer that names a topic, a group or a
transactional id (the table: tenant_fields.py).

    tenant = Tenant("a", "a.")
    frame, withheld = tenant.request(frame)    # `orders` goes upstream as `a.orders`
    if tenant.decodes_answer(key, version):    # the answer names something: decode it
        tenant.answer(key, version, body, withheld)  # `a.orders` back to `orders`; others' dropped

Isolation without ACLs: every name a tenant sends is prefixed, so it can only ever name its own
topics, groups and transactional ids; an answer entry naming anything without the prefix (another
tenant's topic, `__consumer_offsets`, a group of the upstream's own) is dropped from the answer,
so listings (Metadata, ListGroups, ListTransactions, DescribeConfigs, ...) show the tenant's
names only. Topic ids are not rewritten, but a request may name only the ids the tenant was shown
(tenant_ids.py); ACLs are on the tenant's names only (tenant_acls.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kcompat.faults.error_response import error_response
from kcompat.proxy import tenant_acls
from kcompat.proxy.tenant_acls import ACL_KEYS, AclRefused, Withheld
from kcompat.proxy.tenant_fields import REFUSED, REGEX, REQUEST, RESPONSE, N, fields_for
from kcompat.proxy.tenant_ids import ID_ANSWERS, ID_REQUESTS, TopicIds
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import (
    API_VERSIONS_KEY,
    decode_request,
    encode_request,
    encode_response,
    peek_header,
    response_codec,
)

Change = Callable[[str, N], str]
Foreign = Callable[[Any], bool]


class Refused(Exception):
    """A request a tenant may not send (tenant_fields.REFUSED); `why` names what it is. With
    `code`, a request answered here with that error (an ACL beyond its names, a foreign topic id)."""

    def __init__(self, api_key: int, why: str, code: ErrorCode | None = None) -> None:
        super().__init__(why)
        self.api_key = api_key
        self.why = why
        self.code = code
        self.silent = False  # answered with nothing (a Produce with acks=0)


class Tenant:
    __slots__ = ("ids", "name", "prefix")

    def __init__(self, name: str, prefix: str) -> None:
        self.name = name
        self.prefix = prefix
        self.ids = TopicIds()

    # -- requests: the tenant's names to the upstream's --------------------------------------------

    def request(self, frame: bytes | bytearray) -> tuple[bytes | bytearray, Withheld]:
        """The request frame (no size prefix) with every name prefixed, as is when it names none,
        and the ACL entries answered here (tenant_acls.py: their results go back into the answer,
        `answer(..., withheld)`). DecodeError/UnsupportedRequest for a request that cannot be
        read; Refused."""
        key, version, correlation = peek_header(frame)
        why = REFUSED.get(key)
        if why is not None:
            raise Refused(key, why)
        spec = APIS.get(key)
        if spec is None or (version not in spec.versions and key != API_VERSIONS_KEY):
            raise Refused(key, "an API or version the proxy cannot read (its names could not be rewritten)")
        fields = fields_for(key, REQUEST, version)
        if not fields and key not in ID_REQUESTS and key not in ACL_KEYS:
            return frame, ()
        request = decode_request(frame, strict=False)
        if self.ids.unknown(key, request.body):
            refused = Refused(key, "a topic id it was not shown", ErrorCode.UNKNOWN_TOPIC_ID)
            refused.silent = key == _PRODUCE and request.body.acks == 0
            raise refused
        withheld: Withheld = ()
        if key in ACL_KEYS:
            try:
                withheld = tenant_acls.request(self.prefix, key, request.body)
            except AclRefused as e:
                raise Refused(key, e.why, e.code) from None
        elif not fields:
            return frame, ()  # names topics by ids it was shown: as is
        for n in fields:
            _apply(request.body, n.path, n, self._upstream, None)
        renamed = encode_request(key, version, correlation, request.body, request.client_id)[4:]
        return renamed, withheld

    def _upstream(self, name: str, n: N) -> str:
        if not name:
            return name  # "" means none (no group, no transactional id): nothing to prefix
        if n.kind == REGEX:  # Kafka matches the whole topic name against it
            return f"{re.escape(self.prefix)}(?:{unanchored(name)})"
        return self.prefix + name

    # -- answers: the upstream's names to the tenant's, others' dropped ----------------------------

    def decodes_answer(self, api_key: int, api_version: int) -> bool:
        return (
            bool(fields_for(api_key, RESPONSE, api_version)) or api_key in ID_ANSWERS or api_key in ACL_KEYS
        )

    def answer(self, api_key: int, api_version: int, body: Any, withheld: Withheld = ()) -> None:
        self.ids.learn(api_key, body, self.prefix)  # before the names lose their prefix
        if api_key in ACL_KEYS:
            tenant_acls.answer(self.prefix, api_key, body)
            if withheld:
                tenant_acls.merge(api_key, body, withheld)
        for n in fields_for(api_key, RESPONSE, api_version):
            _apply(body, n.path, n, self._client, self._foreign)

    def _client(self, name: str, n: N) -> str:
        return name.removeprefix(self.prefix)

    def _foreign(self, name: Any) -> bool:
        return isinstance(name, str) and bool(name) and not name.startswith(self.prefix)


_PRODUCE, _SHARE_FETCH = 0, 78


def unanchored(regex: str) -> str:
    """The regex without its start anchors (^ and \\A outside character classes): matched against
    whole names, they stand for the start of the tenant's part once the prefix comes before it
    (librdkafka sends `(^orders-.*)`, which after `a\\.` would match nothing)."""
    out: list[str] = []
    i, n, in_class = 0, len(regex), False
    while i < n:
        c = regex[i]
        if c == "\\":
            if in_class or regex[i + 1 : i + 2] != "A":
                out.append(regex[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            j = i + 1 + (regex[i + 1 : i + 2] == "^")
            j += regex[j : j + 1] == "]"  # a ] first in a class is a literal
            out.append(regex[i:j])
            i, in_class = j, True
            continue
        elif c == "^":
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def refused_answer(refused: Refused, frame: bytes | bytearray) -> list[Any] | None:
    """The answer to a request answered here (Refused with a code); [] for one that gets none.
    None: close the connection."""
    if refused.code is None:
        return None
    if refused.silent:
        return []
    request = decode_request(frame, strict=False)
    key, version = request.api_key, request.api_version
    if key in ACL_KEYS:
        body = response_codec(key).build(
            tenant_acls.refused_body(key, request.body, refused.code, refused.why)
        )
    else:
        body = error_response(key, version, request.body, refused.code, refused.why)
        for topic in body.responses if key == _SHARE_FETCH else ():
            for p in topic.partitions:
                p.records = b"" if p.records is None else p.records  # not nullable from v1
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
