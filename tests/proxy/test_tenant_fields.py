"""Virtual clusters: the table of name fields (kcompat/proxy/tenant_fields.py) against Kafka's
specs, and the rewriting of requests and answers (kcompat/proxy/tenant.py) without sockets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kcompat.config.errors import ConfigError
from kcompat.config.proxy_config import ProxyConfig
from kcompat.proxy.tenant import Refused, Tenant, refused_answer
from kcompat.proxy.tenant_fields import (
    NAME_FIELDS,
    NOT_TENANT_NAMES,
    REFUSED,
    RESPONSE,
    fields_for,
    path_versions,
)
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    response_codec,
)
from tests.wire.schema_reference import SHARED_SPECS
from tools.gen_schemas import load_spec, resolve_fields, snake

ENTITIES = {"topicName", "groupId", "transactionalId"}
TABLE = {(n.api_key, n.side, n.path) for n in NAME_FIELDS}
A = Tenant("a", "a.")


def _annotated(fields: list[dict[str, Any]], path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    for f in fields:
        p = (*path, snake(f["name"]))
        if f.get("entityType") in ENTITIES:
            yield p
        if "fields" in f:
            yield from _annotated(f["fields"], p)


@pytest.mark.skipif(not SHARED_SPECS.is_dir(), reason=f"Kafka's specs are not at {SHARED_SPECS}")
def test_every_name_field_of_the_official_specs_is_in_the_table() -> None:
    missing = []
    seen = 0
    for side in ("Request", "Response"):
        for path in sorted((SHARED_SPECS / "client-messages").glob(f"*{side}.json")):
            spec = load_spec(path)
            key = spec["apiKey"]
            if key in REFUSED or key not in APIS:  # refused for tenants / not served by the proxy
                continue
            common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
            for p in _annotated(resolve_fields(spec.get("fields", []), common), ()):
                seen += 1
                found = (key, side.lower(), p)
                if found not in TABLE and found not in NOT_TENANT_NAMES:
                    missing.append(found)
    assert not missing, f"name fields a virtual cluster would not rewrite: {missing}"
    assert seen > 100


def test_table_entries_exist_in_the_schemas() -> None:
    for n in NAME_FIELDS:
        assert path_versions(n.api_key, n.side, n.path), n
    assert fields_for(1, RESPONSE, 12) and not fields_for(1, RESPONSE, 13)  # Fetch: topic ids from v13
    assert not fields_for(12, RESPONSE, 4)  # Heartbeat's answer names nothing: relayed as bytes


def _request(key: int, version: int, body: dict[str, Any]) -> Any:
    frame, _ = A.request(encode_request(key, version, 7, body, client_id="app")[4:])
    return decode_request(frame).body


def _answer(key: int, version: int, body: dict[str, Any]) -> Any:
    built = response_codec(key).build(body)
    _, decoded = decode_response(key, version, b"".join(encode_response(key, version, 7, built))[4:])
    A.answer(key, version, decoded)
    return decoded


def test_requests_name_the_tenants_topics_groups_and_transactions() -> None:
    produce = _request(0, 9, {"transactional_id": "tx", "acks": -1, "timeout_ms": 1,
                              "topic_data": [{"name": "orders", "partition_data": []}]})  # fmt: skip
    assert (produce.transactional_id, produce.topic_data[0].name) == ("a.tx", "a.orders")
    commit = _request(8, 8, {"group_id": "g", "topics": [{"name": "orders", "partitions": []}]})
    assert (commit.group_id, commit.topics[0].name) == ("a.g", "a.orders")
    find = _request(10, 4, {"key_type": 1, "coordinator_keys": ["tx", "tx2"]})
    assert find.coordinator_keys == ["a.tx", "a.tx2"]
    configs = _request(32, 4, {"resources": [{"resource_type": 2, "resource_name": "orders"},
                                             {"resource_type": 4, "resource_name": "1"}]})  # fmt: skip
    assert [r.resource_name for r in configs.resources] == ["a.orders", "1"]  # a broker's id unchanged
    heartbeat = _request(68, 1, {"group_id": "g", "member_epoch": 0, "subscribed_topic_regex": "ord.*"})
    assert heartbeat.subscribed_topic_regex == r"a\.(?:ord.*)"
    assert _request(11, 9, {"group_id": "", "protocol_type": "consumer"}).group_id == ""


def test_answers_show_the_tenants_names_only() -> None:
    topics = [{"name": n, "partitions": []} for n in ("a.orders", "b.orders", "__consumer_offsets", "a.x")]
    metadata = _answer(3, 12, {"brokers": [], "topics": topics})
    assert [t.name for t in metadata.topics] == ["orders", "x"]
    groups = _answer(16, 5, {"groups": [{"group_id": "a.g"}, {"group_id": "b.g"}, {"group_id": "other"}]})
    assert [g.group_id for g in groups.groups] == ["g"]
    configs = _answer(32, 4, {"results": [{"resource_type": 2, "resource_name": "b.t", "configs": []},
                                          {"resource_type": 2, "resource_name": "a.t", "configs": []},
                                          {"resource_type": 4, "resource_name": "1", "configs": []}]})  # fmt: skip
    assert [(r.resource_type, r.resource_name) for r in configs.results] == [(2, "t"), (4, "1")]
    find = _answer(10, 4, {"coordinators": [{"key": "a.tx", "node_id": 1, "host": "h", "port": 1}]})
    assert find.coordinators[0].key == "tx"


def test_raft_and_inter_broker_rpcs_close_the_connection() -> None:
    share_state = [(key, 0, {"group_id": "g", "topics": []}) for key in range(83, 88)]  # KIP-932's
    for key, version, body in ((52, 2, {"topics": []}), *share_state):
        with pytest.raises(Refused) as refused:
            A.request(encode_request(key, version, 1, body)[4:])
        assert refused_answer(refused.value, b"") is None


def test_virtual_clusters_from_properties() -> None:
    base = {"proxy.upstream.bootstrap.servers": "127.0.0.1:9092", "proxy.virtual.clusters": "a,b"}
    config = ProxyConfig({**base, "proxy.virtual.cluster.a.bootstrap.listener": "127.0.0.1:9300",
                          "proxy.virtual.cluster.a.node.port.base": "9301",
                          "proxy.virtual.cluster.b.bootstrap.listener": "127.0.0.1:9400",
                          "proxy.virtual.cluster.b.node.port.base": "9401",
                          "proxy.virtual.cluster.b.prefix": "tenant-b-"})  # fmt: skip
    a, b = config.virtual_clusters
    assert (a.name, a.prefix, a.node_port_base, b.prefix) == ("a", "a.", 9301, "tenant-b-")
    own = config.for_virtual_cluster(b)
    assert own.bootstrap == ("127.0.0.1", 9400) and own.get("proxy.node.port.base") == 9401
    with pytest.raises(ConfigError, match=r"bootstrap\.listener"):
        ProxyConfig({**base, "proxy.virtual.clusters": "a"})
    with pytest.raises(ConfigError, match="overlap"):
        ProxyConfig({**base, "proxy.virtual.cluster.a.bootstrap.listener": "127.0.0.1:9300",
                     "proxy.virtual.cluster.a.node.port.base": "9301", "proxy.virtual.cluster.a.prefix": "t",
                     "proxy.virtual.cluster.b.bootstrap.listener": "127.0.0.1:9400",
                     "proxy.virtual.cluster.b.node.port.base": "9401", "proxy.virtual.cluster.b.prefix": "tb"})  # fmt: skip
    with pytest.raises(ConfigError, match="not a setting"):
        ProxyConfig({**base, "proxy.virtual.cluster.c.prefix": "c."})


def test_share_group_apis_name_the_tenants_groups_and_topics() -> None:
    heartbeat = _request(76, 1, {"group_id": "sg", "member_id": "m", "member_epoch": 0,
                                 "subscribed_topic_names": ["orders"]})  # fmt: skip
    assert (heartbeat.group_id, heartbeat.subscribed_topic_names) == ("a.sg", ["a.orders"])
    assert _request(77, 1, {"group_ids": ["sg"]}).group_ids == ["a.sg"]
    described = _answer(77, 1, {"groups": [{"group_id": "a.sg", "members": [{
        "member_id": "m", "subscribed_topic_names": ["a.orders", "b.orders"],
        "assignment": {"topic_partitions": [{"topic_name": "a.orders", "partitions": [0]}]}}]}]})  # fmt: skip
    (member,) = described.groups[0].members
    assert member.subscribed_topic_names == ["orders"]
    assert [t.topic_name for t in member.assignment.topic_partitions] == ["orders"]
    offsets = _request(90, 1, {"groups": [{"group_id": "sg", "topics": [{"topic_name": "orders"}]}]})
    assert (offsets.groups[0].group_id, offsets.groups[0].topics[0].topic_name) == ("a.sg", "a.orders")
    for key in (91, 92):  # Alter, DeleteShareGroupOffsets
        body = _request(key, 0, {"group_id": "sg", "topics": [{"topic_name": "orders"}]})
        assert (body.group_id, body.topics[0].topic_name) == ("a.sg", "a.orders")
        answer = _answer(key, 0, {"responses": [{"topic_name": "a.orders"}, {"topic_name": "b.orders"}]})
        assert [r.topic_name for r in answer.responses] == ["orders"]
    fetched = _answer(90, 1, {"groups": [{"group_id": "a.sg", "topics": [{"topic_name": "a.orders"}]}]})
    assert (fetched.groups[0].group_id, fetched.groups[0].topics[0].topic_name) == ("sg", "orders")
