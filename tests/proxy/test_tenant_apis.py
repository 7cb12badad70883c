"""A virtual cluster's ACLs (kcompat/proxy/tenant_acls.py) and topic ids (tenant_ids.py) without
sockets: ACLs on the tenant's names only, its LITERAL `*` the PREFIXED prefix upstream; a request
naming a topic id the tenant was not shown answered UNKNOWN_TOPIC_ID here."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from kcompat.proxy.frames import Pending, rewrite_answer
from kcompat.proxy.tenant import Refused, Tenant, refused_answer
from kcompat.proxy.tenant_acls import CLUSTER_WHY
from kcompat.proxy.tenant_ids import ID_NOT_CHECKED, ID_REQUESTS
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    response_codec,
)

TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALLOW, READ = 3, 3


def _request(tenant: Tenant, key: int, version: int, body: dict[str, Any]) -> Any:
    return decode_request(tenant.request(encode_request(key, version, 7, body, client_id="app")[4:])[0]).body


def _answer(tenant: Tenant, key: int, version: int, body: dict[str, Any]) -> Any:
    built = response_codec(key).build(body)
    _, decoded = decode_response(key, version, b"".join(encode_response(key, version, 7, built))[4:])
    assert tenant.decodes_answer(key, version)
    tenant.answer(key, version, decoded)
    return decoded


def _refused(tenant: Tenant, key: int, version: int, body: dict[str, Any]) -> Any:
    frame = encode_request(key, version, 9, body, client_id="app")[4:]
    with pytest.raises(Refused) as refused:
        tenant.request(frame)
    answer = refused_answer(refused.value, frame)
    assert answer is not None
    correlation, decoded = decode_response(key, version, b"".join(bytes(c) for c in answer)[4:])
    assert correlation == 9
    return decoded


def acl(resource_type: int, name: str, pattern: int) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": "User:app", "host": "*", "operation": READ, "permission_type": ALLOW}  # fmt: skip


def test_create_acls_on_the_tenants_names() -> None:
    a = Tenant("a", "a.")
    creations = [acl(TOPIC, "orders", LITERAL), acl(GROUP, "g", PREFIXED), acl(TXN, "*", LITERAL)]
    body = _request(a, 30, 3, {"creations": creations})
    got = [(c.resource_type, c.resource_name, c.resource_pattern_type) for c in body.creations]
    assert got == [(TOPIC, "a.orders", LITERAL), (GROUP, "a.g", PREFIXED), (TXN, "a.", PREFIXED)]


def test_an_acl_on_the_cluster_is_answered_here() -> None:
    answer = _refused(Tenant("a", "a."), 30, 3, {"creations": [acl(CLUSTER, "kafka-cluster", LITERAL)]})
    assert [r.error_code for r in answer.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]


def _relay(tenant: Tenant, key: int, body: dict[str, Any], answer: dict[str, Any]) -> tuple[Any, Any]:
    """`body` through the tenant (v3) as the connection relays it, and `answer` (the upstream's
    to what was relayed) back as the client gets it: (relayed body, answer body)."""
    frame = encode_request(key, 3, 7, body, client_id="app")[4:]
    renamed, withheld = tenant.request(frame)
    pending = Pending(key, 3, 7, withheld)
    upstream = b"".join(encode_response(key, 3, 7, response_codec(key).build(answer)))[4:]
    chunks, _ = rewrite_answer(pending, upstream, lambda n: ("proxy", 1), lambda *a: None, tenant)
    _, got = decode_response(key, 3, b"".join(bytes(c) for c in chunks)[4:])
    return decode_request(renamed).body, got


def test_a_mixed_create_acls_relays_the_tenants_and_answers_the_rest_in_place() -> None:
    """The cluster ACLs are answered here, the topic and group ones relayed; the answer has one
    result per creation in the request's order."""
    creations = [acl(CLUSTER, "kafka-cluster", LITERAL), acl(TOPIC, "orders", LITERAL),
                 acl(CLUSTER, "kafka-cluster", LITERAL), acl(GROUP, "g", PREFIXED)]  # fmt: skip
    results = [{"error_code": 0, "error_message": None},
               {"error_code": ErrorCode.INVALID_REQUEST, "error_message": "upstream's"}]  # fmt: skip
    relayed, answer = _relay(Tenant("a", "a."), 30, {"creations": creations}, {"results": results})
    assert [(c.resource_type, c.resource_name) for c in relayed.creations] == [
        (TOPIC, "a.orders"),
        (GROUP, "a.g"),
    ]
    assert [(r.error_code, r.error_message) for r in answer.results] == [
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_WHY),
        (0, None),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_WHY),
        (ErrorCode.INVALID_REQUEST, "upstream's"),
    ]


def test_a_mixed_delete_acls_relays_the_named_filters_and_answers_the_rest_in_place() -> None:
    f = {"resource_type_filter": TOPIC, "pattern_type_filter": LITERAL, "principal_filter": None,
         "host_filter": None, "operation": 1, "permission_type": 1}  # fmt: skip
    filters = [{**f, "resource_name_filter": "orders"}, {**f, "resource_name_filter": None},
               {**f, "resource_name_filter": "o", "pattern_type_filter": MATCH}]  # fmt: skip
    matching = [{"resource_type": TOPIC, "resource_name": "a.orders", "pattern_type": LITERAL,
                 "principal": "User:app", "host": "*", "operation": READ, "permission_type": ALLOW}]  # fmt: skip
    relayed, answer = _relay(
        Tenant("a", "a."), 31, {"filters": filters}, {"filter_results": [{"matching_acls": matching}]}
    )
    assert [x.resource_name_filter for x in relayed.filters] == ["a.orders"]
    got = [(r.error_code, [m.resource_name for m in r.matching_acls]) for r in answer.filter_results]
    assert got == [(0, ["orders"]), (ErrorCode.INVALID_REQUEST, []), (ErrorCode.INVALID_REQUEST, [])]


def test_describe_acls_filters_and_answers() -> None:
    a = Tenant("a", "a.")
    f = {"resource_type_filter": ANY, "pattern_type_filter": LITERAL, "principal_filter": None,
         "host_filter": None, "operation": 1, "permission_type": 1}  # fmt: skip
    star = _request(a, 29, 3, {**f, "resource_name_filter": "*"})
    assert (star.resource_name_filter, star.pattern_type_filter) == ("a.", PREFIXED)
    named = _request(a, 29, 3, {**f, "resource_name_filter": "orders", "pattern_type_filter": MATCH})
    assert (named.resource_name_filter, named.pattern_type_filter) == ("a.orders", MATCH)
    every = _request(a, 29, 3, {**f, "resource_name_filter": None, "pattern_type_filter": ANY})
    assert every.resource_name_filter is None
    entry = {"acls": [{"principal": "User:app", "host": "*", "operation": READ, "permission_type": ALLOW}]}
    resources = [
        {"resource_type": TOPIC, "resource_name": "a.orders", "pattern_type": LITERAL, **entry},
        {"resource_type": TOPIC, "resource_name": "a.", "pattern_type": PREFIXED, **entry},
        {"resource_type": TOPIC, "resource_name": "b.orders", "pattern_type": LITERAL, **entry},
        {"resource_type": TOPIC, "resource_name": "*", "pattern_type": LITERAL, **entry},
        {"resource_type": CLUSTER, "resource_name": "kafka-cluster", "pattern_type": LITERAL, **entry},
        {"resource_type": GROUP, "resource_name": "a", "pattern_type": PREFIXED, **entry},
    ]
    answer = _answer(a, 29, 3, {"resources": resources})
    assert [(r.resource_name, r.pattern_type) for r in answer.resources] == [
        ("orders", LITERAL),
        ("*", LITERAL),
    ]


def test_delete_acls_by_name_only() -> None:
    a = Tenant("a", "a.")
    f = {"resource_type_filter": TOPIC, "pattern_type_filter": LITERAL, "principal_filter": None,
         "host_filter": None, "operation": 1, "permission_type": 1}  # fmt: skip
    body = _request(a, 31, 3, {"filters": [{**f, "resource_name_filter": "orders"}]})
    assert body.filters[0].resource_name_filter == "a.orders"
    for unsafe in (
        {**f, "resource_name_filter": None},
        {**f, "resource_name_filter": "o", "pattern_type_filter": MATCH},
    ):
        answer = _refused(a, 31, 3, {"filters": [unsafe]})
        assert [r.error_code for r in answer.filter_results] == [ErrorCode.INVALID_REQUEST]
    matching = [{"resource_type": TOPIC, "resource_name": n, "pattern_type": p, "principal": "User:app",
                 "host": "*", "operation": READ, "permission_type": ALLOW}
                for n, p in (("a.orders", LITERAL), ("b.orders", LITERAL), ("a.", PREFIXED))]  # fmt: skip
    answer = _answer(a, 31, 3, {"filter_results": [{"matching_acls": matching}]})
    got = [(m.resource_name, m.pattern_type) for m in answer.filter_results[0].matching_acls]
    assert got == [("orders", LITERAL), ("*", LITERAL)]


MINE, THEIRS = uuid.uuid4(), uuid.uuid4()


def _shown(tenant: Tenant) -> None:
    topics = [{"name": "a.orders", "topic_id": MINE}, {"name": "b.secret", "topic_id": THEIRS}]
    answer = _answer(tenant, 3, 12, {"topics": topics})
    assert [t.name for t in answer.topics] == ["orders"]


def fetch(topic_id: uuid.UUID) -> dict[str, Any]:
    return {"max_wait_ms": 1, "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0}]}]}


def test_a_topic_id_not_shown_is_unknown() -> None:
    a = Tenant("a", "a.")
    answer = _refused(a, 1, 17, fetch(MINE))  # before any Metadata: a restarted proxy
    assert answer.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    _shown(a)
    frame = encode_request(1, 17, 7, fetch(MINE), client_id="app")[4:]
    assert a.request(frame)[0] is frame  # shown: relayed as is
    answer = _refused(a, 1, 17, fetch(THEIRS))
    assert answer.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    produce = {"acks": -1, "timeout_ms": 1, "topic_data": [{"topic_id": THEIRS, "partition_data": []}]}
    answer = _refused(a, 0, 13, produce)
    assert answer.responses[0].partition_responses == [] or answer.responses[0].error_code
    share = {"group_id": "s", "topics": [{"topic_id": THEIRS, "partitions": [{"partition_index": 0}]}]}
    answer = _refused(a, 78, 1, share)
    assert answer.error_code == ErrorCode.UNKNOWN_TOPIC_ID
    metadata = {"topics": [{"name": None, "topic_id": THEIRS}], "allow_auto_topic_creation": False}
    answer = _refused(a, 3, 12, metadata)
    assert answer.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_ids_learnt_from_a_groups_assignment() -> None:
    a = Tenant("a", "a.")
    _answer(a, 68, 1, {"assignment": {"topic_partitions": [{"topic_id": MINE, "partitions": [0]}]}})
    frame = encode_request(1, 17, 7, fetch(MINE), client_id="app")[4:]
    assert a.request(frame)[0] is frame


def _uuid_paths(fields: Any, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    out = []
    for f in fields:
        p = (*path, f.name)
        if f.element_type == "uuid" and "topic" in f.name:
            out.append(p)
        out += _uuid_paths(f.fields, p)
    return out


def test_every_request_topic_id_a_tenant_may_send_is_checked() -> None:
    from kcompat.proxy.tenant_fields import REFUSED

    for key, spec in APIS.items():
        if key in REFUSED or key in ID_NOT_CHECKED:
            continue
        paths = set(_uuid_paths(spec.request.fields, ()))
        assert paths == set(ID_REQUESTS.get(key, ())), (key, spec.name)


def test_list_transactions_pattern_matches_the_tenants_ids_only() -> None:
    body = _request(Tenant("a", "a."), 66, 2, {"transactional_id_pattern": "tx-.*"})
    assert body.transactional_id_pattern == r"a\.(?:tx-.*)"
    assert _request(Tenant("a", "a."), 66, 2, {"transactional_id_pattern": ""}).transactional_id_pattern == ""


@pytest.mark.parametrize(
    ("regex", "upstream"),
    [
        ("(^orders-.*)", r"a\.(?:(orders-.*))"),  # librdkafka's subscription of ^orders-.*
        ("^a|^b$", r"a\.(?:a|b$)"),
        (r"[^x^]\^y", r"a\.(?:[^x^]\^y)"),  # negated classes and escaped carets stay
        (r"[]^]z\Aw", r"a\.(?:[]^]zw)"),
    ],
)
def test_a_regex_subscription_matches_under_the_prefix(regex: str, upstream: str) -> None:
    body = _request(
        Tenant("a", "a."), 68, 1, {"group_id": "g", "member_epoch": 0, "subscribed_topic_regex": regex}
    )
    assert body.subscribed_topic_regex == upstream


def test_the_prefixed_regex_matches_the_tenants_topics_only() -> None:
    body = _request(
        Tenant("a", "a."), 68, 1, {"group_id": "g", "member_epoch": 0, "subscribed_topic_regex": "(^ord.*)"}
    )
    pattern = re.compile(body.subscribed_topic_regex)
    assert (
        pattern.fullmatch("a.orders")
        and not pattern.fullmatch("b.orders")
        and not pattern.fullmatch("orders")
    )


def test_an_acks0_produce_to_a_topic_id_not_shown_gets_no_answer() -> None:
    produce = {"acks": 0, "timeout_ms": 1, "topic_data": [{"topic_id": THEIRS, "partition_data": []}]}
    frame = encode_request(0, 13, 9, produce, client_id="app")[4:]
    with pytest.raises(Refused) as refused:
        Tenant("a", "a.").request(frame)
    assert refused_answer(refused.value, frame) == []
